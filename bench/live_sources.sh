#!/usr/bin/env bash
# Text piped in as it arrives (issue 14, item 1): how fast documents get from
# a source into the model, against the learner reading a converted file.
#   file      train --in F.pb (the live conversion saved to a file)
#   stdin     the same stream piped: cat F.pb | train --in -
#   live      the text itself: cat F.tsv | convert --in - --out - | train --in -
#             (tokenizing, hashing, one flushed write per document, a pipe)
# Each is `train` with its defaults for a stream of unknown length (NCLL, the
# streaming candidates, n = 10000 given to the file runs so that all three
# learn the same model). documents/s = documents / wall seconds of the whole
# pipeline, best of REPS runs. Corpus: Debian's fortunes (scripts/
# fortunes_to_tsv.py training split), repeated COPIES times.
#
# Then the server's three ways in (below). Needs redis-server (scripts/
# install_deps.sh).
# Usage: bench/live_sources.sh OUT.md BUILD_DIR   (COPIES=10 REPS=3;
#   SERVE_FLAGS="..." adds flags to the three servers; CONVERT_FLAGS="..."
#   to the conversions, e.g. --open-vocabulary)
set -euo pipefail
OUT=$1
B=$(cd "$2" && pwd)
T=$B/bin/tributary
COPIES=${COPIES:-10}
REPS=${REPS:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/live_sources.XXXXXX")
trap 'rm -rf "$dir"' EXIT

/usr/bin/python3 "$here/scripts/fortunes_to_tsv.py" --train "$dir/one.tsv" --test "$dir/test.tsv" 2>/dev/null
for ((i = 0; i < COPIES; i++)); do cat "$dir/one.tsv"; done >"$dir/train.tsv"
docs=$(wc -l <"$dir/train.tsv")
cat "$dir/train.tsv" | "$T" convert -q --format tsv ${CONVERT_FLAGS:-} --in - --out "$dir/train.pb"

best() {  # command...: the best wall time of REPS runs, seconds
  local b=
  for ((r = 0; r < REPS; r++)); do
    local s e
    s=$(date +%s.%N)
    bash -c "$*"
    e=$(date +%s.%N)
    b=$(/usr/bin/python3 -c "import sys; t=$e-$s; b='$b'; print(t if not b else min(t, float(b)))")
  done
  echo "$b"
}
file=$(best "'$T' train -q --in '$dir/train.pb' --epochs 1 --n 10000 --out '$dir/file.trib'")
stdin=$(best "cat '$dir/train.pb' | '$T' train -q --in - --out '$dir/stdin.trib'")
live=$(best "cat '$dir/train.tsv' | '$T' convert -q --format tsv ${CONVERT_FLAGS:-} --in - --out - | '$T' train -q --in - --out '$dir/live.trib'")

# The server's ways in: the same documents into `serve` (its defaults for a
# model with no schema: text with an open vocabulary, open classes, n = 10000;
# SERVE_FLAGS="--hashed-dim 262144" for hashed text), timed from the
# first byte sent until /metrics says all are learned; then SIGTERM and the
# final snapshot. The three servers learn the same documents in the same
# order, so their models must be equal.
#   protocol  tributary client learn --in F.pb (binary protocol, 100 per request)
#   http      POST /v1/learn, 100 texts per JSON request, one connection
#   redis     serve --source redis://...: the stream already holds every
#             entry (a backlog), read in batches of 256
serve_run() {  # NAME WAY: prints seconds; the model is left in $dir/NAME/data/model.trib
  local name=$1 way=$2 extra=()
  local d=$dir/$name
  rm -rf "$d"
  mkdir -p "$d"
  [[ $way == redis ]] && extra=(--source "redis://127.0.0.1:$rport/docs-$name")
  "$T" serve --data-dir "$d/data" --listen 127.0.0.1:0 --http 127.0.0.1:0 --port-file "$d/port" \
    --family multinomial --loss ncll --n 10000 "${extra[@]}" ${SERVE_FLAGS:-} 2>"$d/serve.log" &
  local spid=$!
  for _ in $(seq 1 400); do [[ -s $d/port ]] && break; sleep 0.05; done
  read -r port hport <"$d/port"
  /usr/bin/python3 - "$way" "$port" "$hport" "$docs" "$dir/train.tsv" "$dir/train.pb" "$T" "$rport" "$name" <<'EOF'
import http.client, json, subprocess, sys, time, urllib.request
way, port, hport, docs, tsv, pb, T, rport, name = sys.argv[1:10]
docs = int(docs)
def learned():
    text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % hport).read().decode()
    for line in text.splitlines():
        if line.startswith("tributary_documents_learned_total "):
            return int(float(line.split()[1]))
    return 0
rows = [l.rstrip("\n").split("\t", 1) for l in open(tsv, encoding="utf-8")]
if way == "redis":
    # Loaded before the clock starts: the server reads a backlog.
    import socket
    s = socket.create_connection(("127.0.0.1", int(rport)))
    out = bytearray()
    for label, text in rows:
        args = [b"XADD", ("docs-" + name).encode(), b"*", b"label", label.encode(), b"text", text.encode()]
        out += b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    s.sendall(out)
    f = s.makefile("rb")
    for _ in rows:
        f.readline(); f.readline()
t0 = time.monotonic()
if way == "protocol":
    subprocess.run([T, "client", "learn", "--connect", "127.0.0.1:" + port, "--in", pb, "--batch", "100"],
                   check=True, stdout=subprocess.DEVNULL)
elif way == "http":
    c = http.client.HTTPConnection("127.0.0.1", int(hport))
    for i in range(0, len(rows), 100):
        body = json.dumps({"documents": [{"text": t, "label": l} for l, t in rows[i:i + 100]]})
        c.request("POST", "/v1/learn", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit("HTTP %d" % r.status)
while learned() < docs:
    time.sleep(0.01)
print("%.3f" % (time.monotonic() - t0))
EOF
  kill -TERM "$spid"
  wait "$spid"
}
rport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null 2>&1 &
rpid=$!
trap 'kill $rpid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do [[ "$(redis-cli -p "$rport" ping 2>/dev/null)" == PONG ]] && break; sleep 0.05; done
sproto=$(serve_run protocol protocol)
shttp=$(serve_run http http)
sredis=$(serve_run redis redis)

digest() { "$T" inspect --model "$1" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["stats_digest"])'; }
same=no
[[ $(digest "$dir/file.trib") == $(digest "$dir/live.trib") && $(digest "$dir/file.trib") == $(digest "$dir/stdin.trib") ]] && same=yes
sames=no
[[ $(digest "$dir/protocol/data/model.trib") == $(digest "$dir/http/data/model.trib") &&
  $(digest "$dir/protocol/data/model.trib") == $(digest "$dir/redis/data/model.trib") ]] && sames=yes
rate() { /usr/bin/python3 -c "print('%.0f' % ($docs / $1))"; }
ratio() { /usr/bin/python3 -c "print('%.2f' % ($2 / $1))"; }
{
  echo "## Live sources: $(date -u +%Y-%m-%d), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo
  echo "$docs documents (fortunes training split x $COPIES), best of $REPS; conversion flags: ${CONVERT_FLAGS:-none}; the three models equal by digest: $same."
  echo
  echo "| source | seconds | documents/s | vs file |"
  echo "|---|---|---|---|"
  echo "| file (train --in F.pb) | $(printf %.2f "$file") | $(rate "$file") | 1.00 |"
  echo "| stdin (cat F.pb \| train --in -) | $(printf %.2f "$stdin") | $(rate "$stdin") | $(ratio "$stdin" "$file") |"
  echo "| live text (cat F.tsv \| convert \| train --in -) | $(printf %.2f "$live") | $(rate "$live") | $(ratio "$live" "$file") |"
  echo "| serve, binary protocol (client learn, 100 per request) | $(printf %.2f "$sproto") | $(rate "$sproto") | $(ratio "$sproto" "$file") |"
  echo "| serve, HTTP/JSON (POST /v1/learn, 100 texts per request) | $(printf %.2f "$shttp") | $(rate "$shttp") | $(ratio "$shttp" "$file") |"
  echo "| serve, Redis stream (--source, a backlog) | $(printf %.2f "$sredis") | $(rate "$sredis") | $(ratio "$sredis" "$file") |"
  echo
  echo "Server flags added: ${SERVE_FLAGS:-none}. The three servers' models equal by digest: $sames (the server's fixed defaults, not train's candidates:"
  echo "not comparable by digest with the rows above)."
} | tee -a "$OUT"
