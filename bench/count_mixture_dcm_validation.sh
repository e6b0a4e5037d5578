#!/usr/bin/env bash
# likelihood=dcm against the default likelihood on real text, decided on a
# validation split of the training files (bench/COUNT_MIXTURE_TABLE3.md,
# section 8): bench/sep_real_corpus.sh's corpora (KJV OT / NT; fortunes
# "computers" / "politics"), its training files (the 80 % stratified split,
# seed 1) split again, stratified 80 / 20 (random.Random(7)); train on the
# 80 %, evaluate on the 20 %; stop words removed; seeds 1-8; emsd-mixture
# (edcm-mixture gives the same numbers at the default fixed scale).
#   bash bench/count_mixture_dcm_validation.sh BUILD_DIR
set -euo pipefail
# The models compared, "name|train arguments" a line (default: the section 8
# comparison); MODELS="..." replaces them (bench/COUNT_MIXTURE_TABLE3.md
# section 9 runs revive=split against revive=off).
DEFAULT_MODELS='default, 1 pass|--engine sep --family emsd-mixture --components 2
likelihood=dcm, 1 pass|--engine sep --family emsd-mixture --components 2 --opt likelihood=dcm
default, 5 passes shuffled|--engine sep --family emsd-mixture --components 2 --epochs 5 --shuffle
likelihood=dcm, 5 passes shuffled|--engine sep --family emsd-mixture --components 2 --epochs 5 --shuffle --opt likelihood=dcm'
MODELS=${MODELS:-$DEFAULT_MODELS}
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:?usage: count_mixture_dcm_validation.sh BUILD_DIR}
T=$BUILD/bin/tributary
W=$(mktemp -d /tmp/dcm_validation.XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W"
python3 "$HERE/scripts/bible_testaments.py" --out b_all.tsv --books b_books.txt --train b_train.tsv \
  --test b_test.tsv --seed 1 2>/dev/null
python3 "$HERE/scripts/fortunes_to_tsv.py" --train f_ftrain.tsv --test f_ftest.tsv --seed 1 2>/dev/null
awk -F'\t' '$1 ~ /^computers$|^politics$/' f_ftrain.tsv > f_train.tsv
for c in b f; do
  python3 - "$c" <<'PY'
import collections, random, sys
c = sys.argv[1]
by = collections.defaultdict(list)
for l in open(f"{c}_train.tsv"):
    if "\t" in l:
        by[l.split("\t", 1)[0]].append(l)
rng = random.Random(7)
tr, va = [], []
for k, ls in sorted(by.items()):
    rng.shuffle(ls)
    n = len(ls) // 5
    va += ls[:n]
    tr += ls[n:]
open(f"{c}_vtrain.tsv", "w").writelines(tr)
open(f"{c}_valid.tsv", "w").writelines(va)
PY
  for s in vtrain valid; do "$T" convert --format tsv --stop-words --in "${c}_$s.tsv" --out "${c}_$s.pb" 2>/dev/null; done
done
: > res.jsonl
while IFS='|' read -r name args; do
  for c in b f; do
    for seed in 1 2 3 4 5 6 7 8; do
      t0=$(date +%s.%N)
      # shellcheck disable=SC2086
      "$T" train $args --seed "$seed" --skip-bad --quiet --in "${c}_vtrain.pb" --out m.trib
      t1=$(date +%s.%N)
      "$T" eval --model m.trib --in "${c}_valid.pb" --skip-bad --json > e.json 2>/dev/null
      python3 -c "import json; j = json.load(open('e.json')); print(json.dumps(dict(c='$c', m='$name', seed=$seed,
secs=$t1 - $t0, acc=j['accuracy'], p=j['precision'], r=j['recall'])))" >> res.jsonl
    done
  done
done <<< "$MODELS"
python3 - <<'PY'
import collections, json
rows = [json.loads(l) for l in open("res.jsonl")]
g = collections.OrderedDict()
for r in rows:
    g.setdefault((r["c"], r["m"]), []).append(r)
print("| corpus | model | accuracy % | precision % | recall % | train s |")
print("|---|---|---|---|---|---:|")
for (c, m), rs in sorted(g.items()):
    def f(k):
        v = [100 * r[k] for r in rs]
        return f"{sum(v) / len(v):.1f} [{min(v):.1f}, {max(v):.1f}]"
    print(f"| {'bible' if c == 'b' else 'fortunes'} | {m} | {f('acc')} | {f('p')} | {f('r')} | "
          f"{sum(r['secs'] for r in rs) / len(rs):.2f} |")
PY
