#!/usr/bin/env bash
# Open-class streams through `tributary serve` (issue 13, item 4): N learn
# documents, each with a label the model has not seen, sent to a server that
# starts with one class. Measures, for each build given:
#   ack     seconds until `client learn` has every document acknowledged
#   learn   seconds until the learner has applied them all (documents_learned)
#   replay  seconds from a restart (of a copy of the data directory taken
#           right after the acknowledgement, so the write-ahead log holds
#           every document and the snapshot none) until the log is replayed
#           (/metrics tributary_replayed_documents = N)
#   ready   ... until the server is ready (/healthz 200): after the replay it
#           writes a snapshot of the recovered model and publishes it
# and the learner's documents/s. Run it with the build before a change and
# the build after it to get both in one run (same machine, same data).
#
# Usage: bench/open_classes.sh OUT.md BUILD_DIR [BUILD_DIR...]
#   N=1500 V=20000 TERMS=12 (documents, vocabulary, terms per document)
set -euo pipefail
OUT=$1
shift
N=${N:-1500}
V=${V:-20000}
TERMS=${TERMS:-12}
dir=$(mktemp -d "${TMPDIR:-/tmp}/open_classes.XXXXXX")
pid=
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

# The schema: one class "0" and one document holding every term 1..V
# (svmlight ids: convert's vocabulary is the features it sees); then N documents
# labelled 1..N, TERMS random terms each.
awk -v v="$V" 'BEGIN { line = "0"; for (w = 1; w <= v; w++) line = line " " w ":1"; print line }' >"$dir/schema.svm"
awk -v n="$N" -v v="$V" -v t="$TERMS" 'BEGIN {
  srand(7)
  for (i = 1; i <= n; i++) {
    # One term from each of t equal slices of the vocabulary: distinct and
    # increasing, as svmlight wants them.
    line = i
    for (j = 0; j < t; j++) line = line " " (1 + int((j + rand()) * v / t)) ":1"
    print line
  }
}' >"$dir/learn.svm"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# Starts serve and waits for its port file, which it writes once the model
# is ready (after any replay), however long that takes.
start() {  # BIN DATA_DIR LOG [flags]
  launch "$@" || return 1
  until [[ -s "$dir/port" ]]; do
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
}
# Starts serve with a fixed HTTP port (answering /healthz and /metrics
# during the replay) without waiting.
launch() {  # BIN DATA_DIR LOG [flags]
  local bin=$1 data=$2 log=$3
  shift 3
  rm -f "$dir/port"
  "$bin" serve --data-dir "$data" --listen 127.0.0.1:0 --port-file "$dir/port" "$@" 2>"$log" &
  pid=$!
}
learned() { "$1" client stats --connect "127.0.0.1:$2" --json | sed -n 's/.*"documents_learned":\([0-9]*\).*/\1/p'; }
healthy() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/healthz" 2>/dev/null || true; }
replayed() {
  curl -s "http://127.0.0.1:$1/metrics" 2>/dev/null | sed -n 's/^tributary_replayed_documents \([0-9]*\).*/\1/p' || true
}
HPORT=${HPORT:-18765}

{
  echo "# Open-class stream through \`tributary serve\` ($(date -u +%Y-%m-%d))"
  echo
  echo "- Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr)"
  echo "- Workload: $N learn documents, each with a new label, $TERMS distinct terms each, vocabulary $V;"
  echo "  the server starts with one class (open classes), multinomial NB, NCLL, sdEM, defaults otherwise"
  echo "  (group commit every 10 ms, publish every 10 ms or 1,000 updates). Client: \`client learn --batch 100\`."
  echo "- ack: until every document is acknowledged (in the fsynced log); learn: until the learner applied"
  echo "  them all; replay: a copy of the data directory taken right after the acknowledgement, restarted,"
  echo "  until the log is replayed (tributary_replayed_documents = N); ready: until /healthz answers 200"
  echo "  (after the replay the server snapshots the recovered model and publishes it)."
  echo
  echo "| build | ack s | learn s | learner docs/s | replay s | replay docs/s | ready s |"
  echo "|---|---|---|---|---|---|---|"
} >"$OUT"

for build in "$@"; do
  T=$(cd "$build" && pwd)/bin/tributary
  [[ -x "$T" ]] || { echo "no $T" >&2; exit 1; }
  rm -rf "$dir/data" "$dir"/*.pb
  "$T" convert -q --format svmlight --open-classes --in "$dir/schema.svm" --out "$dir/schema.pb"
  "$T" convert -q --format svmlight --in "$dir/learn.svm" --out "$dir/learn.pb"
  start "$T" "$dir/data" "$dir/server.log" --http 127.0.0.1:0 --schema "$dir/schema.pb" --n "$N" --loss ncll --engine sdem ||
    { cat "$dir/server.log" >&2; exit 1; }
  port=$(cut -d' ' -f1 "$dir/port")
  t0=$(now)
  "$T" client learn --connect "127.0.0.1:$port" --in "$dir/learn.pb" --batch 100 >/dev/null
  t1=$(now)
  # Restart measurement needs the log to hold everything: copy the data
  # directory as a crash image now (before learning finishes).
  kill -STOP "$pid"
  cp -a "$dir/data" "$dir/crash"
  kill -CONT "$pid"
  while [[ "$(learned "$T" "$port")" != "$N" ]]; do sleep 0.05; done
  t2=$(now)
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  t3=$(now)
  launch "$T" "$dir/crash" "$dir/replay.log" --http "127.0.0.1:$HPORT"
  until [[ "$(replayed "$HPORT")" == "$N" || "$(healthy "$HPORT")" == "200" ]]; do
    kill -0 "$pid" 2>/dev/null || { cat "$dir/replay.log" >&2; exit 1; }
    sleep 0.02
  done
  t4=$(now)
  while [[ "$(healthy "$HPORT")" != "200" ]]; do sleep 0.05; done
  t5=$(now)
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  rm -rf "$dir/crash"
  learn_s=$(elapsed "$t0" "$t2")
  replay_s=$(elapsed "$t3" "$t4")
  rate=$(awk -v n="$N" -v s="$learn_s" 'BEGIN { printf "%.0f", n / s }')
  replay_rate=$(awk -v n="$N" -v s="$replay_s" 'BEGIN { printf "%.0f", n / s }')
  echo "| \`$build\` ($("$T" --version 2>/dev/null | head -1)) | $(elapsed "$t0" "$t1") | $learn_s | $rate |" \
    "$replay_s | $replay_rate | $(elapsed "$t3" "$t5") |" >>"$OUT"
done
cat "$OUT"
