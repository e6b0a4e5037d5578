#!/usr/bin/env bash
# The run-time-dispatched kernels (tributary/simd.h: the frozen table's sums,
# Canonicalize's rank sort, the metrics' exp, LDA's CVB0 sweeps) give the same
# bits at every instruction-set level: `train`, `eval` and `predict` capped
# by TRIBUTARY_SIMD at sse2, avx2 and avx512 write byte-identical models and
# output. Text of 12 classes, documents of 3 to 150 tokens (the rank sort's
# 8..128 and std::sort's longer documents), the test file converted with a
# vocabulary of its own (its ids reach the model remapped, unsorted), long
# enough that eval builds the frozen table before its first document. A CPU
# without a level runs the one below it: the comparison then covers the
# levels it has.
# A second text of 70 classes (the frozen table's sums in chunks of up to
# eight vectors, at every width) trains and evaluates the same way.
# Usage: simd_levels.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
/usr/bin/python3 - "$dir" <<'PY'
import random, sys
r = random.Random(7)
words = ["w%d" % i for i in range(3000)]
def doc(c):
    n = r.choice([3, 6, 12, 30, 60, 150])
    return " ".join(words[int(r.paretovariate(1.1)) % 3000] if r.random() < 0.6
                    else words[(c * 250 + r.randrange(250)) % 3000] for _ in range(n))
for name, n in (("train", 3000), ("test", 800)):
    with open("%s/%s.tsv" % (sys.argv[1], name), "w") as f:
        for i in range(n):
            c = r.randrange(12)
            f.write("c%d\t%s\n" % (c, doc(c)))
# 70 classes: the frozen sums' chunks of eight vectors and their rest at every width.
with open("%s/wide.tsv" % sys.argv[1], "w") as f:
    for i in range(1500):
        c = r.randrange(12)
        f.write("k%d\t%s\n" % (c * 6 + r.randrange(6) if c < 11 else 66 + r.randrange(4), doc(c)))
PY
$T convert -q --format tsv --in "$dir/train.tsv" --out "$dir/train.pb"
$T convert -q --format tsv --in "$dir/test.tsv" --out "$dir/test.pb"
$T convert -q --format tsv --in "$dir/wide.tsv" --out "$dir/wide.pb"
for level in sse2 avx2 avx512; do
  export TRIBUTARY_SIMD=$level
  $T train -q --family multinomial --loss ncll --select off --epochs 2 --in "$dir/train.pb" --out "$dir/m_$level.trib"
  $T train -q --family lda --loss nll --topics 20 --in "$dir/train.pb" --out "$dir/l_$level.trib"
  $T eval --json --model "$dir/m_sse2.trib" --in "$dir/test.pb" >"$dir/eval_m_$level.json"
  $T eval --json --model "$dir/l_sse2.trib" --in "$dir/test.pb" >"$dir/eval_l_$level.json"
  $T predict --model "$dir/m_sse2.trib" --in "$dir/test.pb" --out "$dir/predict_$level.jsonl"
  $T train -q --family multinomial --loss ncll --select off --in "$dir/wide.pb" --out "$dir/w_$level.trib"
  $T eval --json --model "$dir/w_sse2.trib" --in "$dir/wide.pb" >"$dir/eval_w_$level.json"
done
unset TRIBUTARY_SIMD
for f in m l w; do
  for level in avx2 avx512; do
    cmp -s "$dir/${f}_sse2.trib" "$dir/${f}_$level.trib" || fail "model $f trained at $level differs from sse2's"
    cmp -s "$dir/eval_${f}_sse2.json" "$dir/eval_${f}_$level.json" ||
      fail "eval of model $f at $level: $(cat "$dir/eval_${f}_$level.json") vs sse2 $(cat "$dir/eval_${f}_sse2.json")"
  done
done
for level in avx2 avx512; do
  cmp -s "$dir/predict_sse2.jsonl" "$dir/predict_$level.jsonl" || fail "predict at $level differs from sse2's"
done
# The comparison must be of something: the models learned, the output is whole.
acc=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["accuracy"])' "$dir/eval_m_sse2.json")
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$acc') > 0.5 else 1)" || fail "accuracy $acc: the model learned nothing"
[[ $(wc -l <"$dir/predict_sse2.jsonl") == 800 ]] || fail "predict wrote $(wc -l <"$dir/predict_sse2.jsonl") lines, expected 800"
grep -q '"perplexity":[0-9]' "$dir/eval_l_sse2.json" || fail "lda eval without a perplexity: $(cat "$dir/eval_l_sse2.json")"
echo "simd levels: identical models, eval and predict at sse2, avx2 and avx512 (accuracy $acc)"
