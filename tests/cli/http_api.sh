#!/usr/bin/env bash
# The HTTP/JSON API (docs/http-api.md) end to end, from Python's standard
# library only (urllib.request + json, /usr/bin/python3): `tributary serve`
# with a bearer token learns fortune cookies (Debian's fortunes package,
# /usr/share/games/fortunes), each labelled by the file it comes from, over
# POST /v1/learn, then predicts held-out ones over POST /v1/predict (accuracy
# well above chance), checks the error answers (401, 400 with document_index,
# 404, 405, 415), and a restart recovers every acknowledged document.
# Usage: http_api.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
SRC=$2
PY=/usr/bin/python3
FORTUNES=/usr/share/games/fortunes
for f in computers food love sports; do
  [[ -f "$FORTUNES/$f" ]] || { echo "SKIP: $FORTUNES/$f missing (apt-get install fortunes)"; exit 0; }
done

# shellcheck source=lib/serve.sh
source "$SRC/tests/cli/lib/serve.sh"

# The corpus: fortunes of four files, every fifth held out for testing; a
# TSV of one document per class gives `serve --schema` the class names.
"$PY" - "$FORTUNES" "$dir" <<'PYEOF'
import json, random, sys
src, out = sys.argv[1], sys.argv[2]
train, test, first = [], [], {}
for label in ["computers", "food", "love", "sports"]:
    with open("%s/%s" % (src, label), encoding="utf-8", errors="replace") as f:
        entries = [" ".join(e.split()) for e in f.read().split("\n%\n")]
    entries = [e for e in entries if any(c.isalpha() for c in e)]
    first[label] = entries[0]
    for i, e in enumerate(entries):
        (test if i % 5 == 0 else train).append({"id": "%s-%d" % (label, i), "text": e, "label": label})
random.Random(3).shuffle(train)
json.dump({"train": train, "test": test}, open(out + "/corpus.json", "w"))
with open(out + "/classes.tsv", "w") as f:
    for label, text in sorted(first.items()):
        f.write("%s\t%s\n" % (label, text.replace("\t", " ")))
PYEOF
"$T" convert -q --format tsv --hashed-dim 65536 --in "$dir/classes.tsv" --out "$dir/classes.pb"
printf 'tok-%s\n' "$RANDOM$RANDOM" >"$dir/token"

# With no --model and no --schema, serve starts from the default schema: text
# with an open vocabulary (multinomial), open classes (the labels arrive with
# the documents),
# n = 10000. The first server is given a schema anyway (the class names of a
# stream) ...
start "$dir/data0" "$dir/serve0.log" --schema "$dir/classes.pb" --auth-token-file "$dir/token" ||
  fail "serve --schema did not start"
kill -TERM "$pid"
wait "$pid" || fail "serve --schema did not stop cleanly"
pid=
# ... the one under test has no set-up at all.
start "$dir/data" "$dir/serve.log" --auth-token-file "$dir/token" || fail "serve did not start"
read -r _ http <"$dir/port"

"$PY" - "$http" "$dir" <<'PYEOF' || fail "HTTP client"
import json, sys, time, urllib.error, urllib.request
port, d = sys.argv[1], sys.argv[2]
token = open(d + "/token").read().strip()
corpus = json.load(open(d + "/corpus.json"))
base = "http://127.0.0.1:%s" % port

def call(path, body, token=token, method="POST", ctype="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if ctype:
        req.add_header("Content-Type", ctype)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read()), r.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), e.headers

train = corpus["train"]
last = 0
for i in range(0, len(train), 50):
    status, body, _ = call("/v1/learn", {"documents": train[i:i + 50]})
    assert status == 200, (status, body)
    assert body["acknowledged"] == len(train[i:i + 50]), body
    assert body["sequence"] == last + body["acknowledged"], (last, body)
    last = body["sequence"]
assert last == len(train), (last, len(train))
open(d + "/acked", "w").write(str(last))

test = [{"id": t["id"], "text": t["text"]} for t in corpus["test"]]
for _ in range(2000):
    status, body, _ = call("/v1/predict", {"documents": test})
    assert status == 200, (status, body)
    if body["model_version"] >= last:
        break
    time.sleep(0.01)
assert body["model_version"] == last, body["model_version"]
assert sorted(body["classes"]) == ["computers", "food", "love", "sports"], body["classes"]
truth = {t["id"]: t["label"] for t in corpus["test"]}
right = sum(p["predicted"] == truth[p["id"]] for p in body["predictions"])
acc = right / len(test)
print("held-out accuracy %.3f on %d fortunes (chance 0.25)" % (acc, len(test)))
assert acc >= 0.5, acc
p = body["predictions"][0]
assert abs(sum(p["probabilities"]) - 1) < 1e-6, p
assert len(p["probabilities"]) == len(body["classes"]), (p, body["classes"])

status, body, headers = call("/v1/learn", {"documents": train[:1]}, token="wrong")
assert status == 401 and body["error"]["code"] == "UNAUTHENTICATED", (status, body)
assert headers["WWW-Authenticate"] == "Bearer", dict(headers)
status, body, _ = call("/v1/learn", {"documents": [train[0], {"id": "x", "terms": {"hi": -1}, "label": "food"}]})
assert status == 400 and body["error"]["document_index"] == 1, (status, body)
assert "id 'x'" in body["error"]["message"], body
status, body, _ = call("/v1/learn", b"{not json")
assert status == 400 and body["error"]["code"] == "INVALID_REQUEST", (status, body)
status, body, _ = call("/v1/nothing", {"documents": []})
assert status == 404, (status, body)
status, body, headers = call("/v1/predict", None, method="GET", ctype=None)
assert status == 405 and headers["Allow"] == "POST", (status, body)
status, body, _ = call("/v1/predict", {"documents": test[:1]}, ctype="text/plain")
assert status == 415, (status, body)
with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
    metrics = r.read().decode()
assert 'tributary_http_errors_total{status="401",code="UNAUTHENTICATED"} 1' in metrics, metrics
PYEOF

# SIGKILL, restart: every acknowledged document is in the recovered model.
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
start "$dir/data" "$dir/serve2.log" --auth-token-file "$dir/token" || fail "restart"
read -r _ http <"$dir/port"
"$PY" - "$http" "$dir" <<'PYEOF' || fail "after restart"
import json, sys, time, urllib.request
port, d = sys.argv[1], sys.argv[2]
acked = int(open(d + "/acked").read())
for _ in range(1000):
    with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=10) as r:
        m = dict(l.rsplit(" ", 1) for l in r.read().decode().splitlines() if l and not l.startswith("#"))
    if float(m["tributary_model_version"]) >= acked:
        break
    time.sleep(0.01)
assert float(m["tributary_model_version"]) == acked, (m["tributary_model_version"], acked)
PYEOF
kill -TERM "$pid"
wait "$pid" || fail "serve did not stop cleanly"
pid=
echo "OK"
