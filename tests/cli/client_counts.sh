#!/usr/bin/env bash
# `tributary client learn` sends documents as they are (issue 13, item 6):
#   - a stream whose term counts are 3, 0.5 and other non-integers, learned
#     through a live server, gives the model `tributary train` learns offline
#     from the same stream with the same settings, bit for bit (the client
#     used to send max(1, round(count)) copies of each term);
#   - documents with a count of -5, NaN or 0, or without the label the
#     server's loss needs, are refused by the client itself (exit 1), naming
#     the file, the document, the field and what was expected, and nothing of
#     their batch is sent;
#   - a count of 1e12 is legal (finite, > 0: the server's rule) and is sent
#     as a count: it is learned, in bounded memory.
# Usage: client_counts.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
source "$(dirname "$0")/lib/serve.sh"  # $dir, fail, start

# 1. 300 svmlight lines, two classes, counts 3 and 0.5 among others.
for i in $(seq 1 300); do
  if ((i % 2)); then
    echo "1 1:3 2:0.5 $((3 + i % 5)):1.25 9:$((i % 4)).5"
  else
    echo "2 2:3 $((5 + i % 3)):0.5 8:2 9:0.75"
  fi
done >"$dir/train.svm"
"$T" convert -q --format svmlight --in "$dir/train.svm" --out "$dir/train.pb"
# Its header without frame checksums (format 1), for the streams Python writes.
"$T" convert -q --no-frame-checksum --format svmlight --in "$dir/train.svm" --out "$dir/train1.pb"
N=300

# 2. Offline: one sdEM learner (NCLL), arrival order, seed 7.
"$T" train -q --in "$dir/train.pb" --out "$dir/offline.trib" --select off --loss ncll --seed 7 --n $N

learned() { "$T" client stats --connect "127.0.0.1:$port" --json | sed -n 's/.*"documents_learned":\([0-9]*\).*/\1/p'; }
wait_learned() {
  for _ in $(seq 1 200); do
    [[ "$(learned)" == "$1" ]] && return 0
    sleep 0.05
  done
  fail "the server learned $(learned) documents, expected $1"
}

# 3. The same stream through a live server with the same settings.
start "$dir/data" "$dir/server.log" --schema "$dir/train.pb" --n $N --loss ncll --select off --engine sdem --seed 7 ||
  fail "server did not start"
port=$(cut -d' ' -f1 "$dir/port")
"$T" client learn --connect "127.0.0.1:$port" --in "$dir/train.pb" --batch 32 >"$dir/learn.out" 2>"$dir/learn.log" ||
  fail "client learn failed"
grep -q "acknowledged $N documents" "$dir/learn.out" || fail "client: $(cat "$dir/learn.out")"
wait_learned $N
# The text form of the same stats: one "name: value" line per field.
"$T" client stats --connect "127.0.0.1:$port" >"$dir/stats.txt" || fail "client stats (text) failed"
grep -qx "documents_learned: $N" "$dir/stats.txt" || fail "client stats (text): $(cat "$dir/stats.txt")"
grep -qx 'loss: "ncll"' "$dir/stats.txt" || fail "client stats (text) without the loss: $(cat "$dir/stats.txt")"
snap=$("$T" client snapshot --connect "127.0.0.1:$port")
digest() { "$T" inspect --model "$1" --json | sed -n 's/.*"stats_digest":"\([0-9a-f]*\)".*/\1/p'; }
updates() { "$T" inspect --model "$1" --json | sed -n 's/.*"updates":\([0-9]*\).*/\1/p'; }
[[ "$(updates "$snap")" == "$N" ]] || fail "the server's snapshot has $(updates "$snap") updates, expected $N"
off=$(digest "$dir/offline.trib")
on=$(digest "$snap")
[[ -n "$off" && "$off" == "$on" ]] ||
  fail "the model learned through the server (digest $on) differs from train's on the same stream (digest $off)"
# The predictions agree too (a second, independent view of the same fact).
"$T" predict --model "$dir/offline.trib" --in "$dir/train.pb" --out "$dir/offline.jsonl"
"$T" predict --model "$snap" --in "$dir/train.pb" --out "$dir/online.jsonl"
cmp -s "$dir/offline.jsonl" "$dir/online.jsonl" || fail "predictions of the two models differ"

# 4. Invalid counts are refused by the client before anything of the batch
#    is sent. Streams written by Python (the standard library only): the
#    header of train1.pb, then three good documents and one bad one.
python3 - "$dir" <<'PY'
import math, struct, sys
d = sys.argv[1]
data = open(d + "/train1.pb", "rb").read()
def read_varint(b, i):
    x = s = 0
    while True:
        c = b[i]; i += 1
        x |= (c & 0x7F) << s; s += 7
        if not c & 0x80:
            return x, i
def varint(x):
    o = bytearray()
    while True:
        b = x & 0x7F; x >>= 7
        o.append(b | (0x80 if x else 0))
        if not x:
            return bytes(o)
n, i = read_varint(data, 0)
header = data[: i + n]
def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload
def doc(id_, label, ids, counts):
    m = ld(1, id_.encode())
    if label is not None:
        m += ld(2, label.encode())
    m += ld(3, b"".join(varint(x) for x in ids)) + ld(4, b"".join(struct.pack("<d", c) for c in counts))
    return varint(len(m)) + m
good = b"".join(doc("ok%d" % k, "1", [0, 1], [3.0, 0.5]) for k in range(3))
for name, bad in [("neg", doc("bad", "2", [1, 2], [1.0, -5.0])), ("nan", doc("bad", "2", [1, 2], [1.0, math.nan])),
                  ("zero", doc("bad", "2", [1, 2], [0.0, 1.0])), ("nolabel", doc("bad", None, [1], [1.0])),
                  ("huge", doc("huge", "2", [1, 2], [1e12, 1.0]))]:
    open("%s/%s.pb" % (d, name), "wb").write(header + good + bad)
PY
refused() {  # refused NAME FIELD_MESSAGE
  local f=$dir/$1.pb
  local rc=0
  "$T" client learn --connect "127.0.0.1:$port" --in "$f" >/dev/null 2>"$dir/$1.err" || rc=$?
  [[ $rc == 1 ]] || fail "client learn of $1.pb: exit status $rc, expected 1 (refused): $(cat "$dir/$1.err")"
  for want in "'$f'" "document #3 (id 'bad')" "$2"; do
    grep -qF -- "$want" "$dir/$1.err" || fail "$1.pb: the refusal does not say \"$want\": $(cat "$dir/$1.err")"
  done
  [[ "$(learned)" == "$N" ]] || fail "$1.pb: the server learned part of a refused batch"
}
refused neg "term_counts[1] is -5, expected a finite count > 0"
refused nan "term_counts[1] is nan, expected a finite count > 0"
refused zero "term_counts[0] is 0, expected a finite count > 0"
refused nolabel "loss 'ncll' needs a label, the document has none"
# 1e12 is a count the server accepts: sent as such (one token, count 1e12),
# not as 1e12 tokens - the client stays within 1 GB of address space. (Under
# AddressSanitizer, which reserves terabytes of shadow address space, there is
# no ulimit: its allocator aborts on such an allocation by itself.)
asan=0
ldd "$T" 2>/dev/null | grep libasan >/dev/null && asan=1  # no -q: with pipefail, ldd would die of SIGPIPE
(
  ((asan)) || ulimit -v 1000000
  timeout 60 "$T" client learn --connect "127.0.0.1:$port" --in "$dir/huge.pb" >"$dir/huge.out" 2>"$dir/huge.log"
) || fail "client learn of a count of 1e12 failed"
grep -q "acknowledged 4 documents" "$dir/huge.out" || fail "huge: $(cat "$dir/huge.out")"
wait_learned $((N + 4))
kill -TERM "$pid"
wait "$pid" || fail "the server did not stop cleanly"
pid=
echo PASS
