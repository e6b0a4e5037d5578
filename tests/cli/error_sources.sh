#!/usr/bin/env bash
# Every refusal names its source (issue 13, item 7). Builds damaged and invalid
# inputs deterministically - a valid stream from `tributary convert` with one
# byte flipped at many offsets or cut short, plus targeted cases (bad schema
# headers, unlabelled documents for a supervised loss, NaN / infinite
# features and counts, unknown plugins, bad --opt) - and runs train, and
# eval / predict / prequential with a model trained on the valid stream, on
# each (inspect and topics on damaged snapshots). Every non-zero exit must
# print an error that contains the path of the file at fault (the option or
# plugin instead, for errors about flags), and never an "internal error" or a
# bare exception ("error: std::bad_alloc"); no run may crash (exit status > 2).
# Out of memory is provoked cheaply: a header whose hashed_dim asks for
# hundreds of megabytes, read under a 150 MB address space.
# Usage: error_sources.sh PATH/TO/tributary SOURCE_DIR [--report]
#   --report: print every refusal that fails the check and the totals, and
#   exit 0 (the probe); without it the first failures make the test fail.
set -uo pipefail
T=$1
REPORT=${3:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
command -v python3 >/dev/null || { echo "FAIL: python3 is needed to write the damaged inputs" >&2; exit 1; }

# 1. A valid labelled stream (60 documents, two topics) and a model of it.
for i in $(seq 1 60); do
  if ((i % 2)); then echo -e "sports\tgoal match team w$((i % 7)) score goal"; else echo -e "tech\tcode linux kernel w$((i % 5)) bug"; fi
done >"$dir/base.tsv"
"$T" convert -q --format tsv --in "$dir/base.tsv" --out "$dir/base.pb" || { echo "FAIL: convert" >&2; exit 1; }
# The same without frame checksums (format 1): damage reaches the decoder.
"$T" convert -q --no-frame-checksum --format tsv --in "$dir/base.tsv" --out "$dir/base1.pb" ||
  { echo "FAIL: convert" >&2; exit 1; }
"$T" train -q --in "$dir/base.pb" --out "$dir/base.trib" --select off --loss nll || { echo "FAIL: train" >&2; exit 1; }
"$T" train -q --in "$dir/base.pb" --out "$dir/lda.trib" --family lda --topics 2 --loss nll || { echo "FAIL: train lda" >&2; exit 1; }

# 2. The inputs, written by Python (the standard library only).
if ! python3 - "$dir" <<'PY'
import math, os, struct, sys
out = sys.argv[1]
base = open(os.path.join(out, "base.pb"), "rb").read()
model = open(os.path.join(out, "base.trib"), "rb").read()
os.makedirs(os.path.join(out, "in"))
os.makedirs(os.path.join(out, "model"))
def put(name, data, where="in"):
    with open(os.path.join(out, where, name), "wb") as f:
        f.write(data)
# Damaged copies of the valid stream, with (format 2) and without (format 1)
# frame checksums: flips at offsets spread over the file by a fixed stride
# (a mask that depends on the case), flips inside the header frame, cuts.
def read_varint(b, i):
    x = s = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return x, i
MASKS = [0x01, 0x80, 0xFF, 0x10, 0x7F, 0x40, 0x02, 0x08]
for fmt, data, flips, header_flips, cuts in [("2", base, 60, 15, 12),
                                             ("1", open(os.path.join(out, "base1.pb"), "rb").read(), 90, 45, 12)]:
    n = len(data)
    hlen, hstart = read_varint(data, 0)
    for i in range(flips):
        b = bytearray(data)
        b[(i * 7919 + 3) % n] ^= MASKS[i % len(MASKS)]
        put("f%s_flip%03d.pb" % (fmt, i), bytes(b))
    for i in range(header_flips):
        b = bytearray(data)
        b[hstart + (i * 37) % hlen] ^= MASKS[(i // 3) % len(MASKS)]
        put("f%s_hflip%03d.pb" % (fmt, i), bytes(b))
    for i in range(cuts):
        put("f%s_cut%03d.pb" % (fmt, i), data[: (i * 104729 + 1) % n])
# Damaged snapshots (inspect, topics, eval).
m = len(model)
for i in range(8):
    b = bytearray(model)
    b[(i * 7919 + 5) % m] ^= 0x20
    put("flip%02d.trib" % i, bytes(b), "model")
for i in range(4):
    put("cut%02d.trib" % i, model[: (i * 104729 + 7) % m], "model")

# A minimal protobuf encoder for the targeted cases.
def varint(x):
    o = bytearray()
    while True:
        b = x & 0x7F
        x >>= 7
        if x:
            o.append(b | 0x80)
        else:
            o.append(b)
            return bytes(o)
def key(field, wire):
    return varint(field << 3 | wire)
def ld(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return key(field, 2) + varint(len(payload)) + payload
def uv(field, x):
    return key(field, 0) + varint(x)
def packed_doubles(field, xs):
    return ld(field, b"".join(struct.pack("<d", x) for x in xs))
def packed_varints(field, xs):
    return ld(field, b"".join(varint(x) for x in xs))
def frame(msg):
    return varint(len(msg)) + msg
def schema(vocab=(), classes=(), hashed_dim=0, features=(), open_classes=False):
    s = b"".join(ld(1, v) for v in vocab) + (uv(2, hashed_dim) if hashed_dim else b"")
    s += b"".join(ld(3, c) for c in classes) + (uv(4, 1) if open_classes else b"")
    for name, kind, cats in features:
        s += ld(5, ld(1, name) + uv(2, kind) + b"".join(ld(3, c) for c in cats))
    return s
def header(sch, count, magic="tributary.stream", version=1):
    return frame(ld(1, magic) + uv(2, version) + ld(3, sch) + uv(4, count))
def doc(id_, label=None, ids=(), counts=(), reals=(), cats=(), tokens=(), weight=None):
    d = ld(1, id_)
    if label is not None:
        d += ld(2, label)
    if ids:
        d += packed_varints(3, ids)
    if counts:
        d += packed_doubles(4, counts)
    d += b"".join(ld(5, t) for t in tokens)
    if reals:
        d += packed_doubles(6, reals)
    if cats:
        d += packed_varints(7, cats)
    if weight is not None:
        d += key(8, 1) + struct.pack("<d", weight)
    return frame(d)
V = ["goal", "match", "team", "code", "linux", "kernel"]
C = ["sports", "tech"]
def text(docs, **kw):
    return header(schema(V, C, **kw), len(docs)) + b"".join(docs)
good = [doc("g%d" % i, C[i % 2], [i % 3 + 3 * (i % 2)], [1.0]) for i in range(6)]
cases = {
    "unlabelled.pb": text([doc("u%d" % i, None, [i % 6], [2.0]) for i in range(6)]),
    "half_unlabelled.pb": text(good + [doc("u0", None, [1], [1.0])]),
    "count_nan.pb": text(good + [doc("bad", "tech", [3], [math.nan])]),
    "count_neg.pb": text(good + [doc("bad", "tech", [3], [-5.0])]),
    "count_inf.pb": text(good + [doc("bad", "tech", [3], [math.inf])]),
    "count_huge.pb": text(good + [doc("bad", "tech", [3, 3], [1e308, 1e308])]),
    "count_1e300.pb": text(good + [doc("big", "tech", [3], [1e300])]),
    "count_len.pb": text(good + [doc("bad", "tech", [3, 4], [1.0])]),
    "term_range.pb": text(good + [doc("bad", "tech", [60], [1.0])]),
    "label_unknown.pb": text(good + [doc("bad", "weather", [1], [1.0])]),
    "weight_nan.pb": text(good + [doc("bad", "tech", [1], [1.0], weight=math.nan)]),
    "empty_doc.pb": text(good + [doc("bad", "tech")]),
    "dup_vocab.pb": header(schema(V + ["goal"], C), 1) + good[0],
    "empty_term.pb": header(schema(V + [""], C), 1) + good[0],
    "dup_class.pb": header(schema(V, C + ["tech"]), 1) + good[0],
    "bad_magic.pb": header(schema(V, C), 1, magic="not.a.stream") + good[0],
    "bad_version.pb": header(schema(V, C), 1, version=9) + good[0],
    "no_docs.pb": header(schema(V, C), 0),
    "no_classes.pb": header(schema(V), 6) + b"".join(doc("n%d" % i, None, [i], [1.0]) for i in range(6)),
    "hashed_and_vocab.pb": header(schema(V, C, hashed_dim=64), 1) + good[0],
    "hashed_1m.pb": header(schema((), C, hashed_dim=1 << 20), 2) + doc("h0", "tech", [5], [1.0]) + doc("h1", "sports", [9], [1.0]),
    "cat_no_categories.pb": header(schema(V, C, features=[("colour", 1, [])]), 1) + good[0],
    "doc_count_huge.pb": header(schema(V, C), 1 << 62) + b"".join(good),
    "empty_file.pb": b"",
    "garbage.pb": b"\x05hello world, not a stream at all",
    "second_header.pb": text(good) + header(schema(V, C), 1),
}
R = [("x", 0, []), ("y", 0, [])]
real_docs = lambda bad: b"".join(doc("r%d" % i, C[i % 2], reals=[float(i), 1.0]) for i in range(6)) + doc("bad", "tech", reals=bad)
cases["real_nan.pb"] = header(schema((), C, features=R), 7) + real_docs([math.nan, 1.0])
cases["real_inf.pb"] = header(schema((), C, features=R), 7) + real_docs([1.0, math.inf])
cases["real_short.pb"] = header(schema((), C, features=R), 7) + real_docs([1.0])
cases["real_big.pb"] = header(schema((), C, features=R), 7) + real_docs([1e308, -1e308])
for name, data in cases.items():
    put("t_" + name, data)
# A header whose hashed_dim (2^24, the most a schema may have) asks for
# hundreds of megabytes: run under a small address space (ulimit -v), where
# the allocation fails at once.
os.makedirs(os.path.join(out, "huge"))
put("hashed_2e24.pb", header(schema((), C, hashed_dim=1 << 24), 1) + doc("h0", "tech", [5], [1.0]), "huge")
PY
then
  echo "FAIL: writing the inputs" >&2
  exit 1
fi
touch "$dir/in/t_unreadable.pb" && chmod 000 "$dir/in/t_unreadable.pb"
mkdir "$dir/in/t_directory.pb"

runs=0 refusals=0 unnamed=0 crashes=0
declare -a bad_lines=()
# check NAME MUST_NAME CMD...: runs CMD; a refusal must mention MUST_NAME.
check() {
  local name=$1 must=$2
  shift 2
  local err rc
  err=$(timeout 60 "$@" 2>&1 >/dev/null | tr -d '\000')
  rc=$?
  runs=$((runs + 1))
  ((rc == 0)) && return 0
  refusals=$((refusals + 1))
  [[ -n "${ERROR_SOURCES_LOG:-}" ]] && printf '%s\t%s\t%s\n' "$name" "$rc" "$(echo "$err" | grep -m1 'error:')" >>"$ERROR_SOURCES_LOG"
  local why=
  if ((rc > 2)); then
    crashes=$((crashes + 1))
    why="exit status $rc"
  elif [[ "$err" != *"$must"* ]]; then
    why="does not name $must"
  elif [[ "$err" == *"internal error"* || "$err" == *"error: std::"* ]]; then
    why="an internal error"
  else
    return 0
  fi
  unnamed=$((unnamed + 1))
  bad_lines+=("$name: $why: $(echo "$err" | grep -m1 'error:' | cut -c1-300)")
}

M=$dir/m.trib
i=0
for f in "$dir"/in/*.pb; do
  b=$(basename "$f")
  i=$((i + 1))
  check "train $b" "$f" "$T" train -q --in "$f" --out "$M" --epochs 2
  targeted=0
  case $b in t_*) targeted=1 ;; esac
  if ((targeted || i % 8 == 0)); then
    check "eval $b" "$f" "$T" eval --model "$dir/base.trib" --in "$f"
  fi
  if ((targeted || i % 16 == 0)); then
    check "predict $b" "$f" "$T" predict --model "$dir/base.trib" --in "$f" --out "$dir/pred.jsonl"
  fi
  if ((targeted)); then
    check "train --loss nll $b" "$f" "$T" train -q --in "$f" --out "$M" --loss nll --select off
    check "prequential $b" "$f" "$T" prequential -q --in "$f" --loss nll
  fi
done
for f in "$dir"/model/*.trib; do
  b=$(basename "$f")
  check "inspect $b" "$f" "$T" inspect --model "$f"
  check "topics $b" "$f" "$T" topics --model "$f"
  check "eval --model $b" "$f" "$T" eval --model "$f" --in "$dir/base.pb"
done
H=$dir/huge/hashed_2e24.pb
# Under AddressSanitizer (which reserves terabytes of shadow address space
# and cannot start under a small ulimit -v) the same runs go without the
# limit: the allocation then succeeds, or ASan's allocator refuses it.
limit=150000
# GCC links ASan's runtime as libasan.so; clang links it statically (the
# program then defines __asan_init itself).
ldd "$T" 2>/dev/null | grep libasan >/dev/null && limit=unlimited  # no -q: pipefail
nm "$T" 2>/dev/null | grep -w __asan_init >/dev/null && limit=unlimited
check "train $H ($limit KB)" "$H" bash -c 'ulimit -v '$limit' && exec "$@"' - "$T" train -q --in "$H" --out "$M" --loss nll --select off
check "prequential $H ($limit KB)" "$H" bash -c 'ulimit -v '$limit' && exec "$@"' - "$T" prequential -q --in "$H" --loss nll
check "eval $H ($limit KB)" "$H" bash -c 'ulimit -v '$limit' && exec "$@"' - "$T" eval --model "$dir/base.trib" --in "$H"
check "topics non-latent" "$dir/base.trib" "$T" topics --model "$dir/base.trib"
check "eval lda on real features" "$dir/in/t_real_nan.pb" "$T" eval --model "$dir/lda.trib" --in "$dir/in/t_real_nan.pb"
check "eval on hashed stream" "$dir/in/t_hashed_1m.pb" "$T" eval --model "$dir/base.trib" --in "$dir/in/t_hashed_1m.pb"
check "missing stream" "$dir/nope.pb" "$T" train -q --in "$dir/nope.pb" --out "$M"
check "missing model" "$dir/nope.trib" "$T" eval --model "$dir/nope.trib" --in "$dir/base.pb"
check "convert missing" "$dir/nope.tsv" "$T" convert -q --format tsv --in "$dir/nope.tsv" --out "$dir/c.pb"
printf 'sports\t\ntech\tcode\n\tno label\n' >"$dir/bad.tsv"
check "convert bad tsv" "$dir/bad.tsv" "$T" convert -q --format tsv --in "$dir/bad.tsv" --out "$dir/c.pb"
printf '1 1:nan\n' >"$dir/bad.svm"
check "convert bad svmlight" "$dir/bad.svm" "$T" convert -q --format svmlight --in "$dir/bad.svm" --out "$dir/c.pb"
# Errors about flags name the flag or the plugin.
B=$dir/base.pb
check "unknown family" "nosuchfamily" "$T" train -q --in "$B" --out "$M" --family nosuchfamily
check "unknown loss" "nosuchloss" "$T" train -q --in "$B" --out "$M" --loss nosuchloss
check "--opt without =" "--opt" "$T" train -q --in "$B" --out "$M" --opt prior
check "--opt unknown key" "nosuchkey" "$T" train -q --in "$B" --out "$M" --opt nosuchkey=1
check "--opt bad value" "prior" "$T" train -q --in "$B" --out "$M" --opt prior=-3
check "--loss-opt bad value" "margin" "$T" train -q --in "$B" --out "$M" --loss hinge --loss-opt margin=abc
check "--topics on multinomial" "topics" "$T" train -q --in "$B" --out "$M" --topics 3
# A family that refuses the file's schema: the file is named.
check "gaussian on text" "$B" "$T" train -q --in "$B" --out "$M" --family gaussian
check "lda on real features" "$dir/in/t_real_nan.pb" "$T" train -q --in "$dir/in/t_real_nan.pb" --out "$M" --family lda --topics 2 --loss nll
check "unwritable --out" "$dir/no/such/dir/m.trib" "$T" train -q --in "$B" --out "$dir/no/such/dir/m.trib" --select off --loss nll

echo "error_sources: $runs runs, $refusals refusals, $unnamed without their source, $crashes crashes"
if [[ "$REPORT" == --report ]]; then
  for l in "${bad_lines[@]}"; do echo "  $l"; done
  exit 0
fi
if ((unnamed > 0)); then
  for l in "${bad_lines[@]:0:40}"; do echo "FAIL: $l" >&2; done
  exit 1
fi
echo PASS
