#!/usr/bin/env bash
# serve's token file with scopes (issue 42 item 5): one token per line, alone
# (every scope) or with its scopes; a predict-only token gets 403 on learn
# and predicts; a learn-only token learns; a line with a word that is no
# scope, or a token given twice, is refused naming the file and the line.
# Usage: token_scopes.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$dir/tokens" <<'TOK'
# the operators' token: every scope
admin-secret
# the web front end predicts only; the ingestion job learns only
frontend-secret predict
ingest-secret   learn
TOK
"$T" serve --data-dir "$dir/data" --listen 127.0.0.1:0 --http 127.0.0.1:0 --port-file "$dir/ports" \
  --auth-token-file "$dir/tokens" 2>"$dir/log" &
pid=$!
for _ in $(seq 1 100); do [[ -s "$dir/ports" ]] && break; sleep 0.1; done
[[ -s "$dir/ports" ]] || fail "serve did not start: $(cat "$dir/log")"
http=$(cut -d' ' -f2 "$dir/ports")
/usr/bin/python3 - "$http" <<'PY'
import http.client, json, sys
port = int(sys.argv[1])
def call(method, path, token, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    headers = {"Authorization": "Bearer " + token}
    if body is not None: headers["Content-Type"] = "application/json"
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    r = c.getresponse()
    return r.status, r.read().decode()
learn = {"documents": [{"text": "the striker scored a goal", "label": "sports"},
                       {"text": "whisk the flour and bake", "label": "cooking"}]}
st, body = call("POST", "/v1/learn", "frontend-secret", learn)
assert st == 403 and "PERMISSION_DENIED" in body and "needs learn" in body, (st, body)
st, body = call("POST", "/v1/learn", "ingest-secret", learn)
assert st == 200, (st, body)
st, body = call("POST", "/v1/predict", "ingest-secret", learn)
assert st == 403 and "needs predict" in body, (st, body)
st, body = call("POST", "/v1/predict", "frontend-secret", learn)
assert st == 200, (st, body)
st, body = call("GET", "/v1/status", "frontend-secret")
assert st == 200, (st, body)
st, body = call("POST", "/v1/learn", "admin-secret", learn)
assert st == 200, (st, body)
# Versions: anyone with a token lists them; keeping one and restoring need admin.
st, body = call("GET", "/v1/models", "frontend-secret")
assert st == 200, (st, body)
for token in ("frontend-secret", "ingest-secret"):
    st, body = call("POST", "/v1/models", token)
    assert st == 403 and "needs admin" in body, (st, body)
st, body = call("POST", "/v1/models", "admin-secret")
assert st == 200, (st, body)
version = json.loads(body)["version"]
for token in ("frontend-secret", "ingest-secret"):
    st, body = call("POST", "/v1/models/%d/restore" % version, token)
    assert st == 403 and "needs admin" in body, (st, body)
st, body = call("POST", "/v1/models/%d/restore" % version, "admin-secret")
assert st == 200 and json.loads(body)["restored"] == version, (st, body)
# Late labels: keeping is predicting, the label is learning.
st, body = call("POST", "/v1/predict", "frontend-secret", {"keep": True, "documents": [{"text": "a late goal"}]})
assert st == 200, (st, body)
pid_ = json.loads(body)["predictions"][0]["prediction_id"]
fb = {"feedback": [{"prediction_id": pid_, "label": "sports"}]}
st, body = call("POST", "/v1/feedback", "frontend-secret", fb)
assert st == 403 and "needs learn" in body, (st, body)
st, body = call("POST", "/v1/feedback", "ingest-secret", fb)
assert st == 200, (st, body)
st, body = call("POST", "/v1/learn", "wrong-secret", learn)
assert st == 401, (st, body)
print("scopes: predict-only 403 on learn, feedback, keeping and restoring a version; learn-only 403 on predict "
      "and on versions; the full token learns and restores")
PY
kill -TERM "$pid"
wait "$pid" || fail "serve did not stop cleanly: $(cat "$dir/log")"
pid=
# Bad token files are refused before anything listens, naming the line.
printf 'admin-secret\nfrontend-secret predict,lern\n' > "$dir/bad"
if "$T" serve --data-dir "$dir/data" --auth-token-file "$dir/bad" 2>"$dir/out"; then fail "a bad scope was accepted"; fi
grep -qF "line 2: scope 'lern': expected predict, learn, admin or all" "$dir/out" || fail "$(cat "$dir/out")"
printf 'admin-secret\nadmin-secret predict\n' > "$dir/twice"
if "$T" serve --data-dir "$dir/data" --auth-token-file "$dir/twice" 2>"$dir/out"; then fail "a token twice"; fi
grep -qF "line 2: the same token as line 1" "$dir/out" || fail "$(cat "$dir/out")"
printf '# only a comment\n\n' > "$dir/none"
if "$T" serve --data-dir "$dir/data" --auth-token-file "$dir/none" 2>"$dir/out"; then fail "no token accepted"; fi
grep -qF "is empty (no token)" "$dir/out" || fail "$(cat "$dir/out")"
echo "token_scopes: OK"
