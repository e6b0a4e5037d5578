#!/usr/bin/env bash
# Per-frame checksums through the command-line program (issue 13): `convert`
# writes a checksummed stream by default (--frame-checksum) that trains; one flipped bit
# inside a document makes `train` exit non-zero naming the file and the
# document, and `train --skip-bad` goes on, counting it. The same flip in a
# plain stream (--no-frame-checksum) is learned without a word.
# Usage: stream_checksum.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

/usr/bin/python3 - "$dir/train.tsv" <<'EOF'
import random, sys
rng = random.Random(3)
topics = {"sports": "goal match team score coach league ball".split(),
          "tech": "code server cpu linux compile kernel cloud".split()}
with open(sys.argv[1], "w") as f:
    for i in range(400):
        label = rng.choice(sorted(topics))
        f.write("%s\t%s\n" % (label, " ".join(rng.choice(topics[label]) for _ in range(rng.randint(4, 12)))))
EOF
"$T" convert -q --format tsv --frame-checksum --in "$dir/train.tsv" --out "$dir/checked.tds"
"$T" convert -q --format tsv --no-frame-checksum --in "$dir/train.tsv" --out "$dir/plain.tds"
"$T" convert -q --format tsv --in "$dir/train.tsv" --out "$dir/default.tds"
cmp -s "$dir/checked.tds" "$dir/default.tds" || fail "convert does not write frame checksums by default"
[[ $(stat -c %s "$dir/checked.tds") -eq $(( $(stat -c %s "$dir/plain.tds") + 4 * 401 + 2 )) ]] ||
  fail "a checksummed stream should be 4 bytes a frame (and 2 of header field) larger"
"$T" train -q --family multinomial --loss nll --in "$dir/checked.tds" --out "$dir/ok.trib" ||
  fail "train refused an intact checksummed stream"

# Flip one bit in the term ids of document #100 (0-based) of each stream.
flip() {  # in out checksum(0|1)
  /usr/bin/python3 - "$@" <<'EOF'
import sys
src, dst, crc = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
data = bytearray(open(src, "rb").read())
def varint(off):
    n, shift = 0, 0
    while True:
        b = data[off]; off += 1
        n |= (b & 0x7F) << shift; shift += 7
        if not b & 0x80: return n, off
n, off = varint(0)
off += n + (4 if crc else 0)       # the header frame
for _ in range(100):               # documents 0..99
    n, off = varint(off)
    off += n + (4 if crc else 0)
n, p = varint(off)
p += 4 if crc else 0
ids = data.index(b"\x1a", p, p + n)  # Document.term_ids (field 3, packed)
data[ids + 2] ^= 0x01                # the first term id: another term of the vocabulary
open(dst, "wb").write(data)
print(off)
EOF
}
off=$(flip "$dir/checked.tds" "$dir/damaged.tds" 1)
flip "$dir/plain.tds" "$dir/damaged_plain.tds" 0 >/dev/null

rc=0
"$T" train -q --family multinomial --loss nll --in "$dir/damaged.tds" --out "$dir/bad.trib" 2>"$dir/err" || rc=$?
cat "$dir/err"
[[ $rc -eq 1 ]] || fail "train on a damaged checksummed stream exited with $rc (expected 1: bad input)"
grep -q "$dir/damaged.tds" "$dir/err" || fail "the error does not name the file"
grep -q "document #100 (frame at byte $off," "$dir/err" || fail "the error does not name document #100 at byte $off"
grep -q "checksum mismatch (stored 0x" "$dir/err" || fail "the error does not say checksum mismatch"
[[ ! -e "$dir/bad.trib" ]] || fail "a model was written from a damaged stream (only <out>.partial may be)"

"$T" train --skip-bad --select off --family multinomial --loss nll --in "$dir/damaged.tds" --out "$dir/skip.trib" 2>"$dir/skip" ||
  { cat "$dir/skip" >&2; fail "train --skip-bad did not go on past the damaged document"; }
grep -q "skipped 1 bad document" "$dir/skip" || { cat "$dir/skip" >&2; fail "--skip-bad did not count the document"; }

# Without checksums the same flip is learned silently.
"$T" train -q --family multinomial --loss nll --in "$dir/damaged_plain.tds" --out "$dir/plain.trib" ||
  fail "the damaged plain stream was refused (the flip should have parsed)"
echo "OK"
