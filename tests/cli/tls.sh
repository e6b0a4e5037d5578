#!/usr/bin/env bash
# TLS on serve's HTTP port (issue 42 item 5; docs/http-api.md, TLS). The
# openssl program makes a CA and a certificate for 127.0.0.1 signed by it;
# serve --tls-cert/--tls-key answers curl --cacert over HTTPS (/healthz,
# /v1/learn, /v1/predict), answers plain HTTP 400 (curl -f fails), and curl
# without the CA fails verification. Without TLS, serve says at start that
# the HTTP port is plain text. A key that is not the certificate's, a missing
# file, or --tls-cert alone is refused at start, naming the file or flag
# (also from a --config file's tls-cert and tls-key).
# Usage: tls.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
pid=
trap 'if [[ -n "$pid" ]]; then kill -KILL "$pid" 2>/dev/null || true; fi; rm -rf "$dir"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
for tool in openssl curl; do
  command -v "$tool" >/dev/null || fail "$tool is missing: run scripts/install_deps.sh"
done
cd "$dir"

# ---- A throwaway CA, and a certificate for 127.0.0.1 it signs.
cat >ca.cnf <<'CNF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = tributary test CA
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1
CNF
newkey=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
openssl req -x509 "${newkey[@]}" -config ca.cnf -extensions ca -days 2 -keyout ca.key -out ca.pem 2>openssl.log ||
  fail "openssl req (the CA): $(cat openssl.log)"
openssl req "${newkey[@]}" -config ca.cnf -subj /CN=127.0.0.1 -keyout key.pem -out server.csr 2>openssl.log ||
  fail "openssl req (the server's request): $(cat openssl.log)"
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile ca.cnf \
  -extensions server -out cert.pem 2>openssl.log || fail "openssl x509 -req: $(cat openssl.log)"
openssl req "${newkey[@]}" -config ca.cnf -subj /CN=stray -keyout stray.key -out stray.csr 2>/dev/null

# start LOG ARGS...: serve in the background ($pid), its ports in $port, $http.
start() {
  local log=$1
  shift
  rm -f ports
  "$T" serve --data-dir data --listen 127.0.0.1:0 --http 127.0.0.1:0 --port-file ports "$@" 2>"$log" &
  pid=$!
  for _ in $(seq 1 100); do
    [[ -s ports ]] && break
    kill -0 "$pid" 2>/dev/null || fail "serve $*: exited: $(cat "$log")"
    sleep 0.1
  done
  [[ -s ports ]] || fail "serve $*: not listening after 10 s: $(cat "$log")"
  read -r port http <ports
}
stop() {
  kill -TERM "$pid"
  wait "$pid" || fail "serve did not stop cleanly"
  pid=
}

# ---- HTTPS.
start tls.log --tls-cert cert.pem --tls-key key.pem
grep -q "HTTPS on port $http" tls.log || fail "no 'HTTPS on port $http' at start: $(cat tls.log)"
if grep -q "plain text" tls.log; then fail "serve with TLS says the port is plain text: $(cat tls.log)"; fi
url=https://127.0.0.1:$http
[[ "$(curl -fsS --cacert ca.pem "$url/healthz")" == ok ]] || fail "curl --cacert ca.pem $url/healthz"
learn='{"documents": [{"text": "the striker scored a goal", "label": "sports"},
                      {"text": "whisk the flour and bake", "label": "cooking"}]}'
out=$(curl -fsS --cacert ca.pem -H 'Content-Type: application/json' -d "$learn" "$url/v1/learn") ||
  fail "POST /v1/learn over HTTPS"
grep -q '"acknowledged":2' <<<"$out" || fail "POST /v1/learn over HTTPS: $out"
out=$(curl -fsS --cacert ca.pem -H 'Content-Type: application/json' \
  -d '{"documents": [{"text": "a goal for the striker"}]}' "$url/v1/predict") || fail "POST /v1/predict over HTTPS"
grep -q '"predicted":' <<<"$out" || fail "POST /v1/predict over HTTPS: $out"
curl -fsS --cacert ca.pem "$url/metrics" | grep -c '^tributary_' > /dev/null || fail "GET /metrics over HTTPS"
# Plain HTTP: 400 saying the port speaks HTTPS (so curl -f fails).
rc=0
curl -fsS "http://127.0.0.1:$http/healthz" >/dev/null 2>&1 || rc=$?
((rc != 0)) || fail "curl http://127.0.0.1:$http/healthz succeeded on the TLS port"
code=$(curl -sS -o plain.body -w '%{http_code}' "http://127.0.0.1:$http/healthz") || true
[[ "$code" == 400 ]] || fail "plain HTTP on the TLS port: status $code, expected 400"
grep -q 'this port speaks HTTPS' plain.body || fail "plain HTTP on the TLS port: $(cat plain.body)"
# A client that does not trust the CA: verification fails (curl's 60).
rc=0
curl -fsS "$url/healthz" >/dev/null 2>curl.err || rc=$?
((rc == 60)) || fail "curl without --cacert: exit $rc, expected 60 (certificate not verified): $(cat curl.err)"
stop
grep -q "stopped cleanly" tls.log || fail "no clean stop: $(cat tls.log)"

# ---- Without TLS, serve says so at start.
start plain.log
grep -q "NOTE: the HTTP port $http is plain text (no TLS).*--tls-cert and --tls-key" plain.log ||
  fail "no plain-text notice at start: $(cat plain.log)"
[[ "$(curl -fsS "http://127.0.0.1:$http/healthz")" == ok ]] || fail "GET /healthz over plain HTTP"
stop

# ---- Files and flags that cannot serve: refused at start, naming them.
refused() {
  local want=$1
  shift
  rm -f ports
  if timeout 20 "$T" serve --data-dir data --http 127.0.0.1:0 --port-file ports "$@" 2>refused.log; then
    fail "serve $* started"
  fi
  grep -qF -- "$want" refused.log || fail "serve $*: no '$want' in: $(cat refused.log)"
  [[ ! -e ports ]] || fail "serve $*: wrote its port file"
}
refused "TLS private key 'stray.key' (--tls-key) does not belong to the certificate in 'cert.pem'" \
  --tls-cert cert.pem --tls-key stray.key
refused "TLS certificate 'missing.pem' (--tls-cert): cannot be read" --tls-cert missing.pem --tls-key key.pem
refused "--tls-cert 'cert.pem' needs --tls-key" --tls-cert cert.pem
# The same keys in a --config file (deploy/serve.toml names them).
printf '[serve]\ntls-cert = "cert.pem"\ntls-key = "stray.key"\n' >tls.toml
refused "TLS private key 'stray.key' (--tls-key) does not belong" --config tls.toml
echo "tls: ok"
