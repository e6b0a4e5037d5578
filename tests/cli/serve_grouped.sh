#!/usr/bin/env bash
# A class-grouped stream through `tributary serve` with its defaults (issue
# 39): a backfill that arrives class by class (every document of the first
# class, then of the second, ...) over HTTP in batches of 100. The default
# live learner must predict every class afterwards (its per-class sample shows
# that the discriminative candidate forgot the early classes, and a candidate
# that did not is served); one learner (--select off, the previous default)
# predicts the last classes for everything, which shows the stream is hard.
# Usage: serve_grouped.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
export T=$1  # (used by lib/serve.sh's start)
SRC=$2
# shellcheck source=lib/serve.sh
source "$SRC/tests/cli/lib/serve.sh"  # $dir, fail, start, $pid

run() {  # run NAME [serve flags...]: learn the grouped stream, print the held-out report
  local name=$1
  shift
  start "$dir/$name" "$dir/$name.log" "$@" || fail "serve $name did not start"
  local http
  http=$(cut -d' ' -f2 "$dir/port")
  /usr/bin/python3 - "$http" <<'EOF'
import json, random, sys, time, urllib.request
http = int(sys.argv[1])
rng = random.Random(5)
classes = ["c%d" % k for k in range(6)]
common = ["the", "a", "of", "and", "to", "in", "is", "it", "that", "for"]
own = {c: ["%s_%02d" % (c, j) for j in range(30)] for c in classes}
shared = ["s%03d" % j for j in range(120)]

def text(c):
    words = []
    for _ in range(rng.randint(6, 14)):
        r = rng.random()
        words.append(rng.choice(own[c]) if r < 0.35 else rng.choice(shared) if r < 0.7 else rng.choice(common))
    return " ".join(words)

def call(path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (http, path),
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())

train = [(c, text(c)) for c in classes for _ in range(500)]  # grouped by class
test = [(c, text(c)) for c in classes for _ in range(100)]
for i in range(0, len(train), 100):
    call("/v1/learn", {"documents": [{"text": t, "label": c} for c, t in train[i:i + 100]]})
deadline = time.time() + 60
while True:
    p = call("/v1/predict", {"documents": [{"text": t} for _, t in test]})
    if p["model_version"] >= len(train) or time.time() > deadline:
        break
    time.sleep(0.05)
assert p["model_version"] >= len(train), p["model_version"]
recall = {c: 0 for c in classes}
for (c, _), pr in zip(test, p["predictions"]):
    recall[c] += pr["predicted"] == c
accuracy = sum(recall.values()) / len(test)
print(json.dumps({"accuracy": accuracy, "recall": {c: recall[c] / 100 for c in classes}}))
EOF
  kill -TERM "$pid"
  wait "$pid" || fail "serve $name exited with status $? after SIGTERM"
}

run live >"$dir/live.json"
run single --select off >"$dir/single.json"
live=$(cat "$dir/live.json")
single=$(cat "$dir/single.json")
echo "live (defaults):  $live"
echo "one learner:      $single"
/usr/bin/python3 - "$live" "$single" <<'EOF' || fail "see above"
import json, sys
live, single = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ok = True
if min(single["recall"].values()) > 0.3:
    print("FAIL: one learner kept every class (%s): the stream does not test forgetting" % single["recall"])
    ok = False
if live["accuracy"] < 0.8:
    print("FAIL: the live learner's held-out accuracy %.3f < 0.8" % live["accuracy"])
    ok = False
for c, r in sorted(live["recall"].items()):
    if r < 0.5:
        print("FAIL: the live learner forgot class %s (recall %.2f)" % (c, r))
        ok = False
sys.exit(0 if ok else 1)
EOF
echo PASS
