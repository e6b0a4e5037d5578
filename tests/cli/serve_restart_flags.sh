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
! grep -q "NOTE" "$dir/log" || fail "a restart with the same flags: $(cat "$dir/log")"
# No flags: nothing to say either (the stored model's settings are kept).
serve
! grep -q "NOTE" "$dir/log" || fail "a restart without flags: $(cat "$dir/log")"
# Other flags: each named with the model's value; the model is unchanged.
serve --loss nll --schedule inverse --lambda 0.5 --prior 3 --n 500
for want in "--loss nll (the model: hinge)" "--schedule inverse (the model: constant)" \
  "--prior 3 (the model: default)" "--n 500 (the model: 2000)" "Start a new model with another --data-dir"; do
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
echo "serve_restart_flags: OK"
