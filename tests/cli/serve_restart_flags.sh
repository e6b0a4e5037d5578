#!/usr/bin/env bash
# serve takes train's step-schedule flags (--schedule, --lambda, --tau0,
# --kappa, --rho) for a new model, and a restart whose flags of a new model
# differ from the data directory's model says so (issue 39 item 4; they
# used to be ignored silently).
# Usage: serve_restart_flags.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
trap 'pkill -f "serve --data-dir $dir/data" 2>/dev/null || true; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# serve FLAGS...: starts, waits until it listens, stops it with SIGTERM;
# its standard error is in $dir/log.
serve() {
  rm -f "$dir/port"
  "$T" serve --data-dir "$dir/data" --port-file "$dir/port" "$@" 2>"$dir/log" &
  local pid=$!
  for _ in $(seq 1 100); do
    [[ -s "$dir/port" ]] && break
    kill -0 "$pid" 2>/dev/null || fail "serve $*: exited: $(cat "$dir/log")"
    sleep 0.1
  done
  [[ -s "$dir/port" ]] || fail "serve $*: not listening after 10 s"
  kill -TERM "$pid"
  wait "$pid" || fail "serve $*: exit status $?: $(cat "$dir/log")"
}
serve --loss hinge --schedule constant --rho 0.05 --n 2000
"$T" inspect --model "$dir/data/model.trib" --json | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)
assert m["loss"] == "hinge", m["loss"]
assert m["schedule"] == "rho_t = 0.05", m["schedule"]
assert m["effective_size"] == 2000, m["effective_size"]
'
# The same flags again: nothing to say.
serve --loss hinge --schedule constant --rho 0.05 --n 2000
! grep -q "contradict" "$dir/log" || fail "a restart with the same flags: $(cat "$dir/log")"
# No flags: nothing to say either (the stored model's settings are kept).
serve
! grep -q "contradict" "$dir/log" || fail "a restart without flags: $(cat "$dir/log")"
# Other flags: the start is refused (issue 42: they would be dropped
# silently), each flag named with the model's value, and how to go on; the
# model is unchanged and nothing listens.
rm -f "$dir/port"
if "$T" serve --data-dir "$dir/data" --port-file "$dir/port" --loss nll --schedule inverse --lambda 0.5 --prior 3 \
  --n 500 2>"$dir/log"; then
  fail "a restart whose flags contradict the stored model was served: $(cat "$dir/log")"
fi
[[ ! -e "$dir/port" ]] || fail "a refused restart wrote its port file"
for want in "--loss nll (the model: hinge)" "--schedule inverse (the model: constant)" \
  "--prior 3 (the model: default)" "--n 500 (the model: 2000)" "Drop them to serve the stored model" \
  "start a new model with another --data-dir"; do
  grep -qF -- "$want" "$dir/log" || fail "no '$want' in: $(cat "$dir/log")"
done
"$T" inspect --model "$dir/data/model.trib" --json | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)
assert m["loss"] == "hinge" and m["schedule"] == "rho_t = 0.05", m
'
# A schedule that is not one is refused before anything is written.
if "$T" serve --data-dir "$dir/other" --schedule sometimes >"$dir/out" 2>&1; then fail "--schedule sometimes: accepted"; fi
grep -qF "schedule 'sometimes': expected inverse, poly or constant" "$dir/out" || fail "--schedule sometimes: $(cat "$dir/out")"
! grep -q "default schema" "$dir/out" || fail "--schedule sometimes blamed on the schema: $(cat "$dir/out")"
[[ ! -e "$dir/other" ]] || fail "a data directory was made for a refused flag"
# Authentication is remembered: a data directory served with a token
# refuses a start without one (it would answer anyone), says which flag and
# how to go on; --no-auth drops it knowingly.
echo "s3cret-token" > "$dir/token"
serve --auth-token-file "$dir/token"
! grep -q "without authentication" "$dir/log" || fail "served with a token, yet: $(cat "$dir/log")"
rm -f "$dir/port"
if "$T" serve --data-dir "$dir/data" --port-file "$dir/port" 2>"$dir/log"; then
  fail "a restart without --auth-token-file of a data directory served with one was served: $(cat "$dir/log")"
fi
[[ ! -e "$dir/port" ]] || fail "the refused start listened"
for want in "was served with --auth-token-file" "Give --auth-token-file again, or --no-auth"; do
  grep -qF -- "$want" "$dir/log" || fail "no '$want' in: $(cat "$dir/log")"
done
serve --auth-token-file "$dir/token"  # with it: served
serve --no-auth
grep -qF "served without authentication (--no-auth" "$dir/log" || fail "--no-auth: $(cat "$dir/log")"
serve  # no longer asks for a token, and says it serves anyone
grep -qF "every request on both ports is served without authentication" "$dir/log" || fail "$(cat "$dir/log")"
echo "serve_restart_flags: OK"
