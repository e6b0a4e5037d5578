#!/usr/bin/env bash
# The data directory has one owner (lib/include/tributary/data_dir.h, issue 40):
#  - a second `serve` on a directory in use is refused, naming the process
#    that holds it, and starts once that one has stopped;
#  - a model learned with a plugin given by --plugin comes back after a
#    restart given the same --plugin (recovery finds plugins where the
#    command does; it used to search a registry of its own and fail).
# Usage: serve_data_dir.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
fixtures=$(cd "$(dirname "$T")/../tests/fixture_plugins" && pwd)
dir=$(mktemp -d)
trap 'pkill -f "serve --data-dir $dir/" 2>/dev/null || true; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# start NAME COMMAND...: starts the command (a serve) in the background (pid in $NAME.pid,
# standard error in $NAME.log) and waits until it listens.
start() {
  local name=$1
  shift
  rm -f "$dir/$name.port"
  "$@" --port-file "$dir/$name.port" 2>"$dir/$name.log" &
  echo $! >"$dir/$name.pid"
  for _ in $(seq 1 100); do
    [[ -s "$dir/$name.port" ]] && return 0
    kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null || fail "$name: exited: $(cat "$dir/$name.log")"
    sleep 0.1
  done
  fail "$name: not listening after 10 s: $(cat "$dir/$name.log")"
}
stop() {
  kill -TERM "$(cat "$dir/$1.pid")"
  wait "$(cat "$dir/$1.pid")" || fail "$1: exit status $?: $(cat "$dir/$1.log")"
}

# 1. The lock.
start first "$T" serve --data-dir "$dir/data"
first_pid=$(cat "$dir/first.pid")
if "$T" serve --data-dir "$dir/data" --port-file "$dir/second.port" >"$dir/second.out" 2>&1; then
  fail "a second server on a directory in use started"
fi
grep -qF "data directory '$dir/data' is in use" "$dir/second.out" || fail "second server: $(cat "$dir/second.out")"
grep -qF "process $first_pid (tributary serve" "$dir/second.out" || fail "the holder is not named: $(cat "$dir/second.out")"
[[ ! -s "$dir/second.port" ]] || fail "the refused server listened"
stop first
start again "$T" serve --data-dir "$dir/data"
stop again

# 2. A --plugin model across a restart (a stream with a schema and labels).
printf 'spam\tcheap pills now\nham\tlunch at noon\nspam\tcheap watches now\nham\tmeeting at noon\n' >"$dir/train.tsv"
"$T" convert -q --format tsv --in "$dir/train.tsv" --out "$dir/train.trib"
start plugin "$T" --plugin "$fixtures/load_marker.so" serve --data-dir "$dir/pdata" --loss marked-ncll \
  --schema "$dir/train.trib"
stop plugin
"$T" --plugin "$fixtures/load_marker.so" inspect --json --model "$dir/pdata/model.trib" | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)
assert "marked-ncll" in json.dumps(m), m
'
start restart "$T" --plugin "$fixtures/load_marker.so" serve --data-dir "$dir/pdata"
grep -qF "recovered: snapshot" "$dir/restart.log" || fail "restart: $(cat "$dir/restart.log")"
stop restart
# Without the plugin the model cannot be served: said, naming the plugin.
if "$T" serve --data-dir "$dir/pdata" >"$dir/noplugin.out" 2>&1; then fail "served without its plugin"; fi
grep -qF "marked-ncll" "$dir/noplugin.out" || fail "without --plugin: $(cat "$dir/noplugin.out")"
echo "serve_data_dir: OK"
