#!/usr/bin/env bash
# Crash test of `tributary serve` (issue 5) with one learner (--select off;
# server_crash_live.sh has the live learner): kill -9 at random moments, restart,
# and check that nothing acknowledged was lost and that the recovered model is,
# bit for bit, the model trained offline on the logged documents.
#
# A Python feeder sends a generated stream of 6,000 documents in order, in
# learn requests of 20 documents, 3 requests in flight, and tracks the highest
# acknowledged document. The server runs with group commit every 10 ms and a
# snapshot every 500 documents, so recovery exercises both the snapshot and the
# log replay. Five times, at a random point of the stream plus a random delay,
# the server is killed with SIGKILL and restarted; then
#   - stats.wal_sequence (durable documents; sequences are contiguous from 1)
#     must be >= the highest acknowledged document;
#   - a snapshot is taken and its stats_digest (tributary inspect) must equal
#     that of `tributary train` on exactly the first wal_sequence documents of
#     the stream, with the same --n, --seed, family and loss;
#   - feeding resumes at document wal_sequence, so the log is always a prefix
#     of the stream (and every learn response's first_sequence is checked).
# The last crash is not resumed from. Finally SIGTERM must exit 0 and a
# restart must recover the same model without replaying anything.
# Usage: server_crash.sh PATH/TO/tributary SOURCE_DIR   (CRASH_SEED=... to replay a run)
set -euo pipefail
T=$1
SRC=$2
dir=$(mktemp -d)
cleanup() {
  if [[ -s "$dir/server.pid" ]]; then
    pid=$(cat "$dir/server.pid")
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

# shellcheck source=lib/python_env.sh
source "$SRC/tests/cli/lib/python_env.sh"
export PYTHONPATH="$SRC/tests/cli/lib:$PYTHONPATH"  # crash_feeder.py

# The stream: 6,000 documents of three topics (overlapping vocabularies).
"$PY" - "$dir/train.tsv" <<'EOF'
import random, sys
rng = random.Random(11)
words = ["w%03d" % i for i in range(400)]
topics = {"alpha": words[0:200], "beta": words[100:300], "gamma": words[200:400]}
with open(sys.argv[1], "w") as f:
    for i in range(6000):
        label = rng.choice(sorted(topics))
        text = " ".join(rng.choice(topics[label]) for _ in range(rng.randint(5, 40)))
        f.write("%s\t%s\n" % (label, text))
EOF
# Format 1 (no frame checksums): the Python below re-frames its documents.
"$T" convert -q --format tsv --no-frame-checksum --in "$dir/train.tsv" --out "$dir/train.pb"

seed=${CRASH_SEED:-$RANDOM$RANDOM}
echo "CRASH_SEED=$seed"
# Bounded: every wait below has a deadline; the whole run has one too.
timeout -s KILL 240 "$PY" - "$T" "$dir" "$seed" <<'EOF'
import os, random, shutil, signal, subprocess, sys, threading, time, json
import tributary_client as tc
from crash_feeder import Feeder, Harness, read_frames  # tests/cli/lib

T, DIR, SEED = sys.argv[1], sys.argv[2], int(sys.argv[3])
N = 6000           # --n, server and offline alike
BATCH, WINDOW = 20, 3
KILLS = 5
rng = random.Random(SEED)
pb2 = tc.load_pb2()
DATA = os.path.join(DIR, "data")
H = Harness(DIR)
fail = H.fail

# The stream's frames, kept as bytes: the offline prefix is written from them.
frames = read_frames(os.path.join(DIR, "train.pb"))
header_frame, doc_frames = frames[0], frames[1:]
docs = [pb2.Document.FromString(b) for b in doc_frames]
assert len(docs) == N, len(docs)

server = None

def start_server():
    global server
    server, ports = H.start(
        [T, "serve", "--data-dir", DATA, "--schema", os.path.join(DIR, "train.pb"), "--n", str(N),
         "--family", "multinomial", "--loss", "ncll", "--select", "off",
         "--seed", "1", "--listen", "127.0.0.1:0",
         "--fsync", "interval", "--fsync-interval-ms", "10", "--snapshot-every", "500"], "server")
    return ports[0]

def digest(model):
    out = subprocess.run([T, "inspect", "--json", "--model", model], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)

def check_against_offline(port, wal_seq, tag):
    """Snapshot now; compare with `tributary train` on the first wal_seq documents."""
    with tc.Client("127.0.0.1", port, timeout=30, pb2=pb2) as c:
        snap = c.snapshot()
    if snap.wal_sequence != wal_seq:
        fail("%s: snapshot at sequence %d, stats said %d" % (tag, snap.wal_sequence, wal_seq))
    served = os.path.join(DIR, "served-%s.trib" % tag)
    shutil.copyfile(snap.path, served)  # the server may snapshot again later
    prefix = os.path.join(DIR, "prefix.pb")
    with open(prefix, "wb") as f:
        f.write(tc.encode_varint(len(header_frame)) + header_frame)
        for b in doc_frames[:wal_seq]:
            f.write(tc.encode_varint(len(b)) + b)
    offline = os.path.join(DIR, "offline.trib")
    subprocess.run([T, "train", "-q", "--in", prefix, "--out", offline, "--n", str(N), "--seed", "1",
                    "--family", "multinomial", "--loss", "ncll", "--select", "off"], check=True)
    s, o = digest(served), digest(offline)
    if s["updates"] != wal_seq or o["updates"] != wal_seq:
        fail("%s: updates served %d, offline %d, expected %d" % (tag, s["updates"], o["updates"], wal_seq))
    if s["stats_digest"] != o["stats_digest"]:
        fail("%s: recovered model differs from the offline model on %d documents: digest %s vs %s"
             % (tag, wal_seq, s["stats_digest"], o["stats_digest"]))
    return s["stats_digest"]

t0 = time.monotonic()
feeder = Feeder(docs, pb2, BATCH, WINDOW)
feeder.start()
port = start_server()
feeder.port = port
feeder.offline.clear()  # before go: the main loop reads it as "the feeder stopped"
feeder.go.set()
# Kill points: one random point in each of KILLS equal slices of the stream's
# first 90%, plus a random delay of 0-40 ms.
slice_len = int(N * 0.9) // KILLS
results = []
for k in range(KILLS):
    target = k * slice_len + rng.randrange(slice_len // 4, slice_len)
    acked = H.kill_when_acknowledged(feeder, server, target, rng, k + 1)
    port = start_server()
    with tc.Client("127.0.0.1", port, timeout=30, pb2=pb2) as c:
        st = c.stats()
    wal_seq = st.wal_sequence
    H.log.flush()
    recovery = [l for l in open(H.log_path).read().splitlines() if "recovered" in l][-1]
    print("crash %d: killed after %d acknowledged documents; recovered wal_sequence %d (%s)"
          % (k + 1, acked, wal_seq, recovery.split("(", 1)[-1].rstrip(")")))
    H.check_recovered(acked, wal_seq, k + 1, N)
    d = check_against_offline(port, wal_seq, "crash%d" % (k + 1))
    results.append((acked, wal_seq, d))
    if k + 1 < KILLS:  # resume from the first document that is not in the log
        H.resume(feeder, port, wal_seq)

# Graceful stop, then a clean restart recovers the same model.
final_seq = results[-1][1]
server.send_signal(signal.SIGTERM)
try:
    rc = server.wait(timeout=30)
except subprocess.TimeoutExpired:
    fail("server still running 30 s after SIGTERM")
if rc != 0:
    fail("server exited with status %d after SIGTERM" % rc)
port = start_server()
with tc.Client("127.0.0.1", port, timeout=30, pb2=pb2) as c:
    st = c.stats()
if st.wal_sequence != final_seq:
    fail("after SIGTERM and restart: wal_sequence %d, expected %d" % (st.wal_sequence, final_seq))
if check_against_offline(port, final_seq, "final") != results[-1][2]:
    fail("the model changed across a clean restart")
server.send_signal(signal.SIGTERM)
rc = server.wait(timeout=30)
if rc != 0:
    fail("server exited with status %d after SIGTERM" % rc)
print("OK: %d crashes, every acknowledged document recovered, models equal to offline training "
      "(%d requests, %.1f s)" % (KILLS, feeder.requests, time.monotonic() - t0))
EOF
