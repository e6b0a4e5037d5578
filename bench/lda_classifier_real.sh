#!/usr/bin/env bash
# Figure 4 of the sdEM paper on a real corpus: accuracy of the 2-topic LDA
# classifier (family lda-classifier) trained by sdEM with the NLL, NCLL and
# hinge losses, over several seeds (mean, min, max), on Debian's fortunes
# (39 categories, 12,130 train / 3,033 test quotes) or the King James Bible
# (10 genres of 5-verse chunks).
#
#   bench/lda_classifier_real.sh [fortunes|bible]
#
# Environment (defaults in brackets):
#   TRIBUTARY   the program                       [build/bin/tributary]
#   SEEDS       training seeds                    [1 2 3 4 5]
#   EPOCHS      shuffled passes                   [3]
#   PRIOR       words-per-topic prior eta         [1]
#   TOPICS      topics per class                  [2]
#   LAMBDA      lambda of NCLL and hinge          [1e-3]  (NLL keeps lambda = 1: batch MAP)
#   MARGINS     hinge margins to run (nats)       [1 5]
#   EVERY       keep every EVERY-th quote/chunk   [1]     (6: the size of tests/lda_classifier_real_test.cc)
#   OPTS        more family options, e.g. "--opt share_word_topic=0"
#   WORK        scratch directory                 [mktemp -d]
set -euo pipefail
CORPUS=${1:-fortunes}
HERE=$(cd "$(dirname "$0")/.." && pwd)
T=${TRIBUTARY:-$HERE/build/bin/tributary}
SEEDS=${SEEDS:-1 2 3 4 5}
EPOCHS=${EPOCHS:-3}
PRIOR=${PRIOR:-1}
TOPICS=${TOPICS:-2}
LAMBDA=${LAMBDA:-1e-3}
MARGINS=${MARGINS:-1 5}
EVERY=${EVERY:-1}
OPTS=${OPTS:-}
WORK=${WORK:-$(mktemp -d)}
[ -x "$T" ] || { echo "no program at $T (build first or set TRIBUTARY)" >&2; exit 1; }

case "$CORPUS" in
  fortunes) python3 "$HERE/scripts/fortunes_to_tsv.py" --seed 1 --train "$WORK/all_train.tsv" --test "$WORK/all_test.tsv" ;;
  bible) python3 "$HERE/scripts/bible_to_tsv.py" --seed 1 --train "$WORK/all_train.tsv" --test "$WORK/all_test.tsv" ;;
  *) echo "unknown corpus '$CORPUS' (fortunes or bible)" >&2; exit 2 ;;
esac
for s in train test; do
  awk -v e="$EVERY" '(NR - 1) % e == 0' "$WORK/all_$s.tsv" > "$WORK/$s.tsv"
  "$T" convert -q --format tsv --in "$WORK/$s.tsv" --out "$WORK/$s.pb"
done
echo "corpus $CORPUS: $(wc -l < "$WORK/train.tsv") train, $(wc -l < "$WORK/test.tsv") test, $(cut -f1 "$WORK/train.tsv" | sort -u | wc -l) classes"
echo "settings: topics=$TOPICS prior=$PRIOR epochs=$EPOCHS lambda(ncll,hinge)=$LAMBDA $OPTS"

declare -A ACC F1 SECS
run() {  # name loss extra-args...
  local name=$1 loss=$2
  shift 2
  for seed in $SEEDS; do
    local m="$WORK/$name.$seed.trib" t0 t1
    t0=$(date +%s.%N)
    "$T" train -q --family lda-classifier --opt topics="$TOPICS" --prior "$PRIOR" --epochs "$EPOCHS" --shuffle \
      --seed "$seed" --loss "$loss" "$@" $OPTS --in "$WORK/train.pb" --out "$m"
    t1=$(date +%s.%N)
    read -r a f < <("$T" eval --json --model "$m" --in "$WORK/test.pb" |
      python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["accuracy"], d["macro_f1"])')
    ACC[$name]+="$a "
    F1[$name]+="$f "
    SECS[$name]+="$(echo "$t1 - $t0" | bc) "
    echo "  $name seed $seed: accuracy $a macro-F1 $f" >&2
  done
}
run "NLL-LDA" nll
run "NCLL-LDA" ncll --lambda "$LAMBDA"
NAMES=("NLL-LDA" "NCLL-LDA")
for mg in $MARGINS; do
  run "Hinge-LDA (margin $mg)" hinge --lambda "$LAMBDA" --loss-opt margin="$mg"
  NAMES+=("Hinge-LDA (margin $mg)")
done

echo
echo "| model | accuracy % mean | min | max | macro-F1 % mean | train s/run |"
echo "|---|---|---|---|---|---|"
for n in "${NAMES[@]}"; do
  python3 - "$n" "${ACC[$n]}" "${F1[$n]}" "${SECS[$n]}" <<'PY'
import sys
name, acc, f1, secs = sys.argv[1], *[list(map(float, a.split())) for a in sys.argv[2:]]
m = lambda v: sum(v) / len(v)
print("| %s | %.2f | %.2f | %.2f | %.2f | %.1f |" % (name, 100 * m(acc), 100 * min(acc), 100 * max(acc), 100 * m(f1), m(secs)))
PY
done
