#!/usr/bin/env bash
# `tributary serve` on a damaged write-ahead log (issue 13, item 1), as an
# operator meets it: a crash image whose live log segment has one flipped byte
# at 30 % of its length.
#   - With no flag the server refuses to start (exit 1), names the damage and
#     the policy flag, and leaves the segment byte for byte as it was.
#   - With --on-corruption skip it starts, says DAMAGE on stderr, learns every
#     readable document, keeps a copy of the segment, and /healthz answers 503
#     until the .report file is removed; then 200.
#   - A bad policy name is a usage error.
# Usage: serve_damage.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
source "$(dirname "$0")/lib/serve.sh"  # $dir, fail, start

# 400 labelled lines of two topics.
for i in $(seq 1 400); do
  if ((i % 2)); then echo -e "sports\tgoal match team w$((i % 17)) score"; else echo -e "tech\tcode linux kernel w$((i % 13)) bug"; fi
done >"$dir/train.tsv"
"$T" convert -q --format tsv --in "$dir/train.tsv" --out "$dir/train.pb"

http_get() {  # http_get PORT PATH: prints the status line and body
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf 'GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' "$2" >&3
  timeout 5 cat <&3
  exec 3<&-
}

# 1. Learn everything, then crash (kill -9): the image has the base snapshot and the whole log.
start "$dir/data" "$dir/first.log" --schema "$dir/train.pb" --n 400 || fail "server did not start"
port=$(cut -d' ' -f1 "$dir/port")
"$T" client learn --connect "127.0.0.1:$port" --in "$dir/train.pb" --batch 20 >/dev/null
for _ in $(seq 1 100); do
  learned=$("$T" client stats --connect "127.0.0.1:$port" --json | sed -n 's/.*"documents_learned":\([0-9]*\).*/\1/p')
  [[ "$learned" == 400 ]] && break
  sleep 0.05
done
[[ "$learned" == 400 ]] || fail "learned $learned of 400"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=

seg=$(ls "$dir"/data/wal/wal-*.log | tail -1)
size=$(stat -c %s "$seg")
off=$((size * 3 / 10))
byte=$(od -An -tu1 -j "$off" -N1 "$seg" | tr -d ' ')
printf "\\x$(printf %02x $((byte ^ 16)))" | dd of="$seg" bs=1 seek="$off" conv=notrunc status=none
cp "$seg" "$dir/damaged-copy"

# 2. The default policy refuses and changes nothing.
if start "$dir/data" "$dir/refused.log"; then fail "the server started on a corrupted log"; fi
wait "$pid" 2>/dev/null && fail "refusal exited 0" || true
pid=
grep -q "cannot be read" "$dir/refused.log" || fail "the refusal does not say what cannot be read"
grep -q -- "--on-corruption=skip" "$dir/refused.log" || fail "the refusal does not name the policy flag"
cmp -s "$seg" "$dir/damaged-copy" || fail "the refusal modified the log segment"
echo "refused as expected: $(grep -o 'records [0-9.]* ([0-9]* acknowledged documents) cannot be read' "$dir/refused.log")"

# 3. skip: starts, reports, learns the rest; /healthz 503 until the report is removed.
start "$dir/data" "$dir/skip.log" --on-corruption skip || fail "the server did not start with --on-corruption skip"
grep -q "DAMAGE" "$dir/skip.log" || fail "no DAMAGE line on stderr"
port=$(cut -d' ' -f1 "$dir/port")
hport=$(cut -d' ' -f2 "$dir/port")
learned=$("$T" client stats --connect "127.0.0.1:$port" --json | sed -n 's/.*"documents_learned":\([0-9]*\).*/\1/p')
((learned >= 397 && learned <= 399)) || fail "learned $learned documents after skipping one damaged record"
kept=$(ls "$dir"/data/damaged/wal-*.log.* | grep -v '\.report$' | head -1)
cmp -s "$kept" "$dir/damaged-copy" || fail "the segment kept aside differs from the damaged one"
http_get "$hport" /healthz | grep -q "503" || fail "/healthz is not 503 with a damage report"
rm "$dir"/data/damaged/*.report
http_get "$hport" /healthz | grep -q "200 OK" || fail "/healthz is not 200 once the report is removed"
kill -TERM "$pid"
wait "$pid" || fail "SIGTERM exit status $?"
pid=

# 4. A bad policy name.
if "$T" serve --data-dir "$dir/data" --on-corruption ignore 2>"$dir/bad.log"; then fail "--on-corruption ignore accepted"; fi
grep -q "on-corruption" "$dir/bad.log" || fail "the usage error does not name the flag"
echo "OK: refused by default, skipped with a report, healthz follows the report"
