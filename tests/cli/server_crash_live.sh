#!/usr/bin/env bash
# Crash test of `tributary serve` with its default live learner (issue 39):
# kill -9 during a drift, restart, and check that the recovered learner - every
# candidate, its windows, the detector, the per-class sample and the documents
# it holds - is bit for bit the learner an uninterrupted server builds from the
# same documents.
#
# The stream: 4,000 documents of three topics; from document 2,000 on, the
# labels of two topics are swapped (a sudden drift the live learner's detector
# must see). A Python feeder sends it in learn requests of 20 documents, 3 in
# flight. Three times (once before the swap, twice after it, while the learner
# adapts) the server is killed with SIGKILL at a random moment and restarted;
# then
#   - stats.wal_sequence must be >= the highest acknowledged document;
#   - a snapshot is taken; a second, fresh server on another data directory is
#     fed exactly the first wal_sequence documents and snapshotted too; the two
#     snapshot files must be byte-identical (the whole live learner is in the
#     snapshot: ModelSnapshot.live_state);
#   - feeding resumes at document wal_sequence.
# Finally the learner must have raised a drift alarm after the swap (the test
# covered a drift) and served predictions of every class.
# Usage: server_crash_live.sh PATH/TO/tributary SOURCE_DIR   (CRASH_SEED=... to replay a run)
set -euo pipefail
T=$1
SRC=$2
dir=$(mktemp -d)
cleanup() {
  for f in "$dir"/*.pid; do
    [[ -s "$f" ]] || continue
    pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT

# shellcheck source=lib/python_env.sh
source "$SRC/tests/cli/lib/python_env.sh"
export PYTHONPATH="$SRC/tests/cli/lib:$PYTHONPATH"  # crash_feeder.py

"$PY" - "$dir/train.tsv" <<'EOF'
import random, sys
rng = random.Random(12)
words = ["w%03d" % i for i in range(300)]
topics = {"alpha": words[0:120], "beta": words[90:210], "gamma": words[180:300]}
swap = {"alpha": "beta", "beta": "alpha", "gamma": "gamma"}
with open(sys.argv[1], "w") as f:
    for i in range(4000):
        topic = rng.choice(sorted(topics))
        text = " ".join(rng.choice(topics[topic]) for _ in range(rng.randint(5, 30)))
        label = swap[topic] if i >= 2000 else topic
        f.write("%s\t%s\n" % (label, text))
EOF
"$T" convert -q --format tsv --no-frame-checksum --in "$dir/train.tsv" --out "$dir/train.pb"

seed=${CRASH_SEED:-$RANDOM$RANDOM}
echo "CRASH_SEED=$seed"
timeout -s KILL 240 "$PY" - "$T" "$dir" "$seed" <<'EOF'
import json, os, random, shutil, signal, subprocess, sys, threading, time, urllib.request
import tributary_client as tc
from crash_feeder import Feeder, Harness, read_frames  # tests/cli/lib

T, DIR, SEED = sys.argv[1], sys.argv[2], int(sys.argv[3])
N = 4000
BATCH, WINDOW = 20, 3
rng = random.Random(SEED)
pb2 = tc.load_pb2()
H = Harness(DIR)
fail = H.fail

frames = read_frames(os.path.join(DIR, "train.pb"))
docs = [pb2.Document.FromString(b) for b in frames[1:]]
assert len(docs) == N, len(docs)

def start_server(name):
    """A server on data directory DIR/name (defaults: the live learner); returns (process, port, http port)."""
    p, ports = H.start(
        [T, "serve", "--data-dir", os.path.join(DIR, name), "--schema", os.path.join(DIR, "train.pb"),
         "--n", str(N), "--seed", "1", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
         "--fsync", "interval", "--fsync-interval-ms", "10", "--snapshot-every", "700"], name, ports=2)
    return p, ports[0], ports[1]

def status(http_port):
    with urllib.request.urlopen("http://127.0.0.1:%d/v1/status" % http_port, timeout=20) as r:
        return json.loads(r.read())

def snapshot_copy(port, wal_seq, tag):
    with tc.Client("127.0.0.1", port, timeout=30, pb2=pb2) as c:
        snap = c.snapshot()
    if snap.wal_sequence != wal_seq:
        fail("%s: snapshot at sequence %d, expected %d" % (tag, snap.wal_sequence, wal_seq))
    out = os.path.join(DIR, tag + ".trib")
    shutil.copyfile(snap.path, out)
    return out

def uninterrupted(wal_seq, tag):
    """A fresh server fed documents [0, wal_seq) without interruption, snapshotted."""
    name = "fresh-" + tag
    p, port, _ = start_server(name)
    with tc.Client("127.0.0.1", port, timeout=30, pb2=pb2) as c:
        for i in range(0, wal_seq, 200):
            r = c.new_request()
            r.learn.documents.extend(docs[i:min(wal_seq, i + 200)])
            c.send(r)
            resp = c.receive(check=False)
            if resp.code != pb2.Response.OK:
                fail("%s: the fresh server refused documents from %d: %s" % (tag, i, resp))
    path = snapshot_copy(port, wal_seq, name)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    return path

feeder = Feeder(docs, pb2, BATCH, WINDOW)
feeder.start()
server, port, http = start_server("data")
feeder.port = port
feeder.offline.clear()
feeder.go.set()
# One kill before the swap (document 2,000), two while the learner adapts to it.
targets = [rng.randrange(900, 1800), rng.randrange(2100, 2600), rng.randrange(2700, 3600)]
for k, target in enumerate(targets):
    acked = H.kill_when_acknowledged(feeder, server, target, rng, k + 1)
    server, port, http = start_server("data")
    with tc.Client("127.0.0.1", port, timeout=30, pb2=pb2) as c:
        wal_seq = c.stats().wal_sequence
    H.check_recovered(acked, wal_seq, k + 1, N)
    st = status(http)
    if "live" not in st:
        fail("crash %d: the recovered server has no live learner: %s" % (k + 1, st))
    recovered = snapshot_copy(port, wal_seq, "crash%d" % (k + 1))
    fresh = uninterrupted(wal_seq, "crash%d" % (k + 1))
    a, b = open(recovered, "rb").read(), open(fresh, "rb").read()
    if a != b:
        fail("crash %d: the recovered learner (%d bytes) differs from the uninterrupted one (%d bytes) on %d "
             "documents" % (k + 1, len(a), len(b), wal_seq))
    print("crash %d: killed after %d acknowledged documents; recovered %d, snapshot of %d bytes equal to the "
          "uninterrupted server's; alarms %s, served %s"
          % (k + 1, acked, wal_seq, len(a), [x["document"] for x in st["live"]["alarms"]], st["live"]["served"]))
    H.resume(feeder, port, wal_seq)

if not feeder.offline.wait(timeout=120):
    fail("the feeder did not finish")
if feeder.error:
    fail("feeder: " + feeder.error)
st = status(http)
alarms = [a["document"] for a in st["live"]["alarms"]]
if not any(2000 < a <= 3000 for a in alarms):
    fail("no drift alarm within 1,000 documents of the swap at 2,000 (alarms %s): the test covered no drift" % alarms)
# Alarms are events in the log too, with the document's number.
H.log.flush()
lines = [l for l in open(H.log_path).read().splitlines() if "drift alarm after labelled document" in l]
if not any(str(a) in l for a in alarms for l in lines):
    fail("the server log names no alarm of %s: %s" % (alarms, lines[:3]))
per_class = {c["class"]: c for c in st["quality"]["per_class"]}
if sorted(per_class) != ["alpha", "beta", "gamma"]:
    fail("per-class quality %s" % per_class)
print("done: alarms at %s, final window accuracy %.3f" % (alarms, st["quality"]["window_accuracy"]))
if st["quality"]["window_accuracy"] < 0.8:
    fail("the live learner did not recover from the swap: window accuracy %.3f" % st["quality"]["window_accuracy"])
server.send_signal(signal.SIGTERM)
if server.wait(timeout=30) != 0:
    fail("server exit status after SIGTERM")
EOF
echo "PASS"
