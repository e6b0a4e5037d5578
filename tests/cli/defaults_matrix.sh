#!/usr/bin/env bash
# Every family with every discriminative loss, through `train` with no tuning
# flags (the defaults' candidate search), on a small labelled bag-of-words
# stream: it trains (and the model predicts), or it refuses with a message
# that names the family and says why - never a refusal of an option the
# program added itself (slda used to get "unknown option 'prior'" from the
# defaults' prior grid).
# Usage: defaults_matrix.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
/usr/bin/python3 - "$dir" <<'PY'
import random, sys
rng = random.Random(11)
words = [["c%dw%d" % (c, i) for i in range(20)] for c in range(3)]
with open(sys.argv[1] + "/train.tsv", "w") as f:
    for i in range(240):
        c = i % 3
        toks = [rng.choice(words[c] if rng.random() < 0.7 else words[rng.randrange(3)]) for _ in range(25)]
        f.write("k%d\t%s\n" % (c, " ".join(toks)))
PY
"$T" convert -q --format tsv --in "$dir/train.tsv" --out "$dir/train.pb"
trained=0
for family in multinomial lda-classifier slda lda multinomial-mixture emsd-mixture edcm-mixture lgda mmnb gaussian; do
  for loss in ncll hinge; do
    if "$T" train -q --family "$family" --loss "$loss" --in "$dir/train.pb" --out "$dir/m.trib" >"$dir/out" 2>&1; then
      "$T" predict --model "$dir/m.trib" --in "$dir/train.pb" --out "$dir/p.jsonl" ||
        fail "$family/$loss trained but its model does not predict"
      [[ $(wc -l <"$dir/p.jsonl") -eq 240 ]] || fail "$family/$loss: $(wc -l <"$dir/p.jsonl") predictions, expected 240"
      trained=$((trained + 1))
    else
      msg=$(cat "$dir/out")
      grep -q "family '$family'\|family plugin '$family'" "$dir/out" || fail "$family/$loss refused without naming the family: $msg"
      if grep -q "unknown option" "$dir/out"; then fail "$family/$loss: the defaults gave an option the family refuses: $msg"; fi
    fi
  done
done
# The classifiers train with both losses (multinomial, lda-classifier, slda).
[[ $trained -ge 6 ]] || fail "only $trained family/loss pairs trained, expected at least 6"
echo "defaults matrix: $trained pairs trained, the others refused by name"
