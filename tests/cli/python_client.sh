#!/usr/bin/env bash
# The Python client example (examples/python-client) against a live server:
# Python writes a small separable labelled stream, `tributary serve` starts a
# model from its header, the client learns it (command line, ids sent as
# tokens), predicts fresh token documents through the library (accuracy must
# be >= 0.95), checks stats and a refused request, then SIGTERM must stop the
# server with exit status 0.
# Usage: python_client.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
SRC=$2
CLIENT="$SRC/examples/python-client/tributary_client.py"
dir=$(mktemp -d)
srv_pid=
cleanup() {
  if [[ -n "$srv_pid" ]] && kill -0 "$srv_pid" 2>/dev/null; then kill -9 "$srv_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

# shellcheck source=lib/python_env.sh
source "$SRC/tests/cli/lib/python_env.sh"

# 1. Data, written from Python: two topics with disjoint vocabularies plus
#    shared noise words; 2,000 training documents (term ids), 500 test
#    documents (raw tokens, as a live client would send them).
"$PY" - "$dir" <<'EOF'
import random, sys, pickle
import tributary_client as tc
pb2 = tc.load_pb2()
out = sys.argv[1]
rng = random.Random(7)
topics = {"sports": ["goal", "match", "team", "score", "coach", "league", "ball", "win"],
          "tech": ["code", "server", "cpu", "linux", "compile", "kernel", "bug", "cloud"]}
noise = ["the", "a", "of", "today", "new", "big"]
vocab = sorted({w for ws in topics.values() for w in ws} | set(noise))
index = {w: i for i, w in enumerate(vocab)}
def words(label):
    return [rng.choice(topics[label]) for _ in range(rng.randint(3, 8))] + rng.sample(noise, 2)
schema = pb2.Schema(vocabulary=vocab, class_names=sorted(topics))
train = []
for i in range(2000):
    label = rng.choice(sorted(topics))
    train.append(pb2.Document(id="t%d" % i, label=label, term_ids=[index[w] for w in words(label)]))
tc.write_stream(out + "/train.pb", schema, train, pb2)
test = []
for i in range(500):
    label = rng.choice(sorted(topics))
    test.append(pb2.Document(id="q%d" % i, label=label, tokens=words(label)))
tc.write_stream(out + "/test.pb", pb2.Schema(class_names=sorted(topics)), test, pb2)
EOF

# 2. The server.
"$T" serve --data-dir "$dir/data" --schema "$dir/train.pb" --n 2000 --listen 127.0.0.1:0 \
  --port-file "$dir/port" --idle-timeout-s 60 2>"$dir/server.log" &
srv_pid=$!
for _ in $(seq 1 100); do [[ -s "$dir/port" ]] && break; sleep 0.1; done
[[ -s "$dir/port" ]] || { cat "$dir/server.log" >&2; echo "FAIL: server did not write its port file" >&2; exit 1; }
port=$(cut -d' ' -f1 "$dir/port")
ADDR=127.0.0.1:$port
echo "server on $ADDR"

# 3. The command-line client: ping, learn (ids sent as tokens), snapshot.
[[ $("$PY" "$CLIENT" ping --connect "$ADDR") == pong ]] || { echo "FAIL: ping" >&2; exit 1; }
ack=$("$PY" "$CLIENT" learn --connect "$ADDR" --in "$dir/train.pb" --batch 50 --json |
      "$PY" -c 'import json,sys; print(json.load(sys.stdin)["acknowledged"])')
echo "learn: acknowledged $ack"
[[ "$ack" == 2000 ]] || { echo "FAIL: acknowledged $ack, expected 2000" >&2; exit 1; }

# 4. The library: wait until learned, predict, check stats and an error answer.
"$PY" - "$ADDR" "$dir/test.pb" <<'EOF'
import sys, time
import tributary_client as tc
host, _, port = sys.argv[1].rpartition(":")
with tc.Client(host, int(port)) as c:
    # Learning is asynchronous: acknowledged means durable, not yet learned.
    deadline = time.monotonic() + 30
    while True:
        s = c.stats()
        if s.documents_learned >= 2000 and s.model_version >= 2000:
            break
        if time.monotonic() > deadline:
            sys.exit("FAIL: stats after 30 s: %s" % s)
        time.sleep(0.05)
    print("stats: documents_learned=%d model_version=%d wal_sequence=%d family=%s loss=%s"
          % (s.documents_learned, s.model_version, s.wal_sequence, s.family, s.loss))
    assert s.documents_learned == 2000, s
    assert s.wal_sequence == 2000, s
    assert s.family == "multinomial" and s.loss == "ncll", s
    assert s.learning_enabled and s.errors == 0, s

    _, test = tc.read_stream(sys.argv[2], c.pb2)
    correct, versions = 0, set()
    for i in range(0, len(test), 16):
        batch = test[i:i + 16]
        r = c.predict(batch)
        assert len(r.predictions) == len(batch), r
        assert list(r.class_names) == ["sports", "tech"], r.class_names
        versions.add(r.model_version)
        for d, p in zip(batch, r.predictions):
            assert p.id == d.id and len(p.probabilities) == 2
            correct += p.predicted == d.label
    acc = correct / len(test)
    print("predict: accuracy %.4f on %d documents, model versions %s" % (acc, len(test), sorted(versions)))
    assert acc >= 0.95, "FAIL: accuracy %.4f < 0.95" % acc
    assert min(versions) > 0

    # A refused request is answered (INVALID_REQUEST) and the connection lives on.
    try:
        c.learn([c.pb2.Document(id="bad", label="weather", tokens=["rain"])])
        sys.exit("FAIL: a document with an unknown class was accepted")
    except tc.TributaryError as e:
        print("refused as expected: %s" % e)
        assert e.code == "INVALID_REQUEST", e.code
    assert c.ping()

    # Pipelining: several requests in flight, answers in request order.
    reqs = []
    for i in range(8):
        r = c.new_request()
        r.predict.documents.append(test[i])
        c.send(r)
        reqs.append(r.request_id)
    got = [c.receive().request_id for _ in reqs]
    assert got == reqs, (got, reqs)
    s = c.stats()
    assert s.predictions == len(test) + 8, s
    assert s.errors == 1, s
print("library: OK")
EOF

snap=$("$PY" "$CLIENT" snapshot --connect "$ADDR" --json)
echo "snapshot: $snap"
"$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["wal_sequence"] == 2000, d' "$snap"
"$PY" "$CLIENT" stats --connect "$ADDR" --json

# 5. SIGTERM: drain, snapshot, exit 0.
kill -TERM "$srv_pid"
for _ in $(seq 1 100); do kill -0 "$srv_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$srv_pid" 2>/dev/null; then echo "FAIL: server still running 10 s after SIGTERM" >&2; exit 1; fi
rc=0; wait "$srv_pid" || rc=$?
srv_pid=
cat "$dir/server.log"
[[ $rc -eq 0 ]] || { echo "FAIL: server exited with status $rc after SIGTERM" >&2; exit 1; }
# (serve's default live learner: its labelled documents, learned or held in
# its per-class sample, are the documents it learned.)
learned=$("$T" inspect --json --model "$dir/data/model.trib" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["live"]["labelled"])')
[[ "$learned" == 2000 ]] || { echo "FAIL: final snapshot's live learner has $learned documents, expected 2000" >&2; exit 1; }
echo "OK"
