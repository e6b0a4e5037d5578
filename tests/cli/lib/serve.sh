# Sourced by the shell tests that start `tributary serve`: a scratch $dir
# (removed at exit, with the server killed), fail MESSAGE (prints the logs in
# $dir and exits 1), and start DATA_DIR LOG [flags...], which starts serve in
# the background ($pid) with a protocol and an HTTP port on 127.0.0.1 and
# waits for its port file ($dir/port: "<port> <http port>").
# Expects $T (the tributary program).
dir=$(mktemp -d)
pid=
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$dir"/*.log; do echo "--- $f" >&2; cat "$f" >&2; done
  exit 1
}
start() {
  local data=$1 log=$2
  shift 2
  rm -f "$dir/port"
  "$T" serve --data-dir "$data" --listen 127.0.0.1:0 --http 127.0.0.1:0 --port-file "$dir/port" "$@" 2>"$log" &
  pid=$!
  for _ in $(seq 1 200); do
    [[ -s "$dir/port" ]] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
