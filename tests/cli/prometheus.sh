#!/usr/bin/env bash
# Prometheus for real (issue 42 item 7): Debian's `prometheus` scrapes a
# running `tributary serve`. `promtool check metrics` passes on the text of
# GET /metrics (no problems, no lint: exit 0, no output); a Prometheus server
# (temporary config: job "tributary", scrape_interval 1s, the alerting rules
# of deploy/prometheus/tributary-rules.yml loaded) scrapes the server while
# it learns labelled fortune cookies (Debian's fortunes package, each
# labelled by its file) over POST /v1/learn with a bearer token (/metrics
# needs none); then Prometheus's HTTP API answers: up{job="tributary"} is 1,
# tributary_documents_learned_total is the number learned, the recent
# prequential accuracy is in [0, 1], rate() of the learned counter is > 0,
# the target has no scrape error, and the rules are loaded and evaluate.
# The rules file passes `promtool check rules` and its unit tests
# (deploy/prometheus/tributary-rules.test.yml, `promtool test rules`).
# Usage: prometheus.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
SRC=$2
PY=/usr/bin/python3
FORTUNES=/usr/share/games/fortunes
RULES="$SRC/deploy/prometheus/tributary-rules.yml"
RULES_TEST="$SRC/deploy/prometheus/tributary-rules.test.yml"
for p in /usr/bin/prometheus /usr/bin/promtool; do
  [[ -x "$p" ]] || { echo "FAIL: $p missing: run scripts/install_deps.sh (Debian package prometheus)" >&2; exit 1; }
done
for f in computers food love sports; do
  [[ -f "$FORTUNES/$f" ]] || { echo "FAIL: $FORTUNES/$f missing: run scripts/install_deps.sh (fortunes)" >&2; exit 1; }
done

# shellcheck source=lib/serve.sh
source "$SRC/tests/cli/lib/serve.sh"
prom_pid=
stop_all() {
  if [[ -n "$prom_pid" ]] && kill -0 "$prom_pid" 2>/dev/null; then
    kill -TERM "$prom_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$prom_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$prom_pid" 2>/dev/null || true
  fi
  cleanup  # lib/serve.sh: the server, the scratch directory
}
trap stop_all EXIT

# The rules: syntax, and the alerts firing on synthetic series.
out=$(/usr/bin/promtool check rules "$RULES" 2>&1) || fail "promtool check rules $RULES: $out"
out=$(cd "$(dirname "$RULES_TEST")" && /usr/bin/promtool test rules "$(basename "$RULES_TEST")" 2>&1) ||
  fail "promtool test rules $RULES_TEST: $out"

printf 'tok-%s\n' "$RANDOM$RANDOM" >"$dir/token"
start "$dir/data" "$dir/serve.log" --auth-token-file "$dir/token" || fail "serve did not start"
read -r _ http <"$dir/port"

# Prometheus on a free port of its own, scraping the HTTP port every second.
prom_port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cp "$RULES" "$dir/tributary-rules.yml"
cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $dir/tributary-rules.yml
scrape_configs:
  - job_name: tributary
    metrics_path: /metrics
    static_configs:
      - targets: ["127.0.0.1:$http"]
EOF
/usr/bin/prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$dir/prometheus.log" 2>&1 &
prom_pid=$!

# The corpus: fortunes of four files, labelled by the file, shuffled.
"$PY" - "$FORTUNES" "$dir" <<'PYEOF'
import json, random, sys
src, out = sys.argv[1], sys.argv[2]
docs = []
for label in ["computers", "food", "love", "sports"]:
    with open("%s/%s" % (src, label), encoding="utf-8", errors="replace") as f:
        entries = [" ".join(e.split()) for e in f.read().split("\n%\n")]
    entries = [e for e in entries if any(c.isalpha() for c in e)][:150]
    docs += [{"id": "%s-%d" % (label, i), "text": e, "label": label} for i, e in enumerate(entries)]
random.Random(7).shuffle(docs)
json.dump(docs, open(out + "/corpus.json", "w"))
PYEOF

# Learn the first half, wait for Prometheus to have scraped the server, learn
# the rest (so the counter rises between scrapes), wait until all is learned.
learn() {  # learn FROM TO: documents [FROM, TO) of the corpus
  "$PY" - "$http" "$dir" "$1" "$2" <<'PYEOF' || fail "learning over HTTP"
import json, sys, urllib.request
port, d, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
docs = json.load(open(d + "/corpus.json"))
hi = len(docs) if hi == "end" else int(hi)
token = open(d + "/token").read().strip()
for i in range(lo, hi, 50):
    batch = docs[i:min(i + 50, hi)]
    req = urllib.request.Request("http://127.0.0.1:%s/v1/learn" % port, data=json.dumps({"documents": batch}).encode(),
                                 method="POST", headers={"Content-Type": "application/json",
                                                         "Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=30) as r:
        body = json.loads(r.read())
    assert body["acknowledged"] == len(batch), body
PYEOF
}
# query PROMQL: prints Prometheus's JSON answer of an instant query.
query() {
  curl -sS --max-time 5 -G "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"
}

for _ in $(seq 1 100); do
  curl -sf --max-time 1 "http://127.0.0.1:$prom_port/-/ready" >/dev/null 2>&1 && break
  kill -0 "$prom_pid" 2>/dev/null || fail "prometheus exited at start"
  sleep 0.1
done
curl -sf --max-time 1 "http://127.0.0.1:$prom_port/-/ready" >/dev/null || fail "prometheus not ready in 10 s"

learn 0 300
# Until Prometheus holds a scraped value of the counter.
for _ in $(seq 1 100); do
  n=$(query 'tributary_documents_learned_total{job="tributary"}' | "$PY" -c \
    'import json,sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")')
  [[ -n "$n" && "$n" != 0 ]] && break
  sleep 0.1
done
[[ -n "$n" && "$n" != 0 ]] || fail "prometheus did not scrape tributary_documents_learned_total in 10 s (got '$n')"
learn 300 end
total=$("$PY" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$dir/corpus.json")

# The server has learned them all (its own /metrics, no token) ...
"$PY" - "$http" "$total" <<'PYEOF' || fail "the server did not learn every document"
import sys, time, urllib.request
port, total = sys.argv[1], int(sys.argv[2])
for _ in range(1000):
    with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=10) as r:
        m = dict(l.rsplit(" ", 1) for l in r.read().decode().splitlines() if l and not l.startswith("#"))
    if int(m["tributary_documents_learned_total"]) >= total:
        break
    time.sleep(0.01)
assert int(m["tributary_documents_learned_total"]) == total, (m["tributary_documents_learned_total"], total)
PYEOF

# ... and its text passes promtool's check (exit 0, not a word of lint).
curl -sS --max-time 5 "http://127.0.0.1:$http/metrics" >"$dir/metrics.txt" || fail "GET /metrics"
grep -q '^tributary_prequential_accuracy{window="recent"} ' "$dir/metrics.txt" ||
  fail "no recent prequential accuracy in /metrics: $(cat "$dir/metrics.txt")"
# (Sample values in full: the version is the number learned, not 6 digits.)
grep -qx "tributary_model_version $total" "$dir/metrics.txt" ||
  fail "tributary_model_version is not $total: $(grep '^tributary_model_version' "$dir/metrics.txt")"
rc=0
lint=$(/usr/bin/promtool check metrics <"$dir/metrics.txt" 2>&1) || rc=$?
[[ $rc -eq 0 && -z "$lint" ]] || fail "promtool check metrics (exit $rc): $lint"

# Prometheus's view, once it has scraped the final count (scrapes every 1 s).
"$PY" - "$prom_port" "$total" <<'PYEOF' || fail "Prometheus's answers"
import json, math, sys, time, urllib.parse, urllib.request
port, total = sys.argv[1], int(sys.argv[2])
base = "http://127.0.0.1:%s/api/v1/" % port

def get(path, **params):
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]

def query(q):
    return get("query", query=q)["result"]

learned = None
deadline = time.time() + 15
while time.time() < deadline:
    r = query('tributary_documents_learned_total{job="tributary"}')
    learned = int(float(r[0]["value"][1])) if r else None
    if learned == total:
        break
    time.sleep(0.2)
assert learned == total, "tributary_documents_learned_total in Prometheus: %s, learned %d" % (learned, total)

r = query('up{job="tributary"} == 1')
assert len(r) == 1, "up{job=\"tributary\"} == 1 has no answer: %s (targets: %s)" % (r, get("targets"))

r = query('tributary_prequential_accuracy{job="tributary",window="recent"}')
assert len(r) == 1, "no tributary_prequential_accuracy{window=\"recent\"} in Prometheus: %s" % r
acc = float(r[0]["value"][1])
assert 0 <= acc <= 1, "recent prequential accuracy %r outside [0, 1]" % acc
r = query('tributary_prequential_accuracy{job="tributary",window="cumulative"}')
assert len(r) == 1 and 0 <= float(r[0]["value"][1]) <= 1, r

r = query('rate(tributary_documents_learned_total{job="tributary"}[1m])')
assert len(r) == 1, "rate(tributary_documents_learned_total[1m]) has no answer: %s" % r
rate = float(r[0]["value"][1])
assert math.isfinite(rate) and rate > 0, "rate(tributary_documents_learned_total[1m]) = %r, not > 0" % rate

targets = get("targets")["activeTargets"]
assert len(targets) == 1 and targets[0]["health"] == "up" and not targets[0]["lastError"], targets

# The alerting rules are loaded and evaluate without errors.
rules = [rule for g in get("rules")["groups"] for rule in g["rules"]]
assert len(rules) == 7, [rule["name"] for rule in rules]
for _ in range(50):
    rules = [rule for g in get("rules")["groups"] for rule in g["rules"]]
    if all(rule["health"] == "ok" for rule in rules):
        break
    time.sleep(0.2)
bad = [(rule["name"], rule["health"], rule.get("lastError")) for rule in rules if rule["health"] != "ok"]
assert not bad, "rules not evaluated cleanly: %s" % bad
firing = [a["labels"]["alertname"] for a in get("alerts")["alerts"]]
assert not any(a in ("TributaryDown", "TributaryWriteAheadLogErrors") for a in firing), firing
print("Prometheus: %d documents learned, recent prequential accuracy %.3f, rate %.1f/s, %d rules" %
      (learned, acc, rate, len(rules)))
PYEOF

kill -TERM "$pid"
wait "$pid" || fail "serve did not stop cleanly"
pid=
echo "OK"
