#!/usr/bin/env bash
# Open vocabularies from the command line (issue 14): `convert
# --open-vocabulary` writes documents that name their words, `train` grows
# the model's vocabulary as they come, the model predicts documents full of
# words it has never seen, and what cannot work is refused with a reason
# (both ways of reading unknown words at once, svmlight input, a family that
# cannot grow its vocabulary, prior=log).
# Usage: open_vocabulary.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# refused NAME SUBSTRING COMMAND...: the command must fail, saying SUBSTRING.
refused() {
  local name=$1 want=$2
  shift 2
  if "$@" >"$dir/out.txt" 2>&1; then fail "$name: accepted"; fi
  grep -qF -- "$want" "$dir/out.txt" || fail "$name: expected '$want', got: $(cat "$dir/out.txt")"
}

printf 'pets\tthe cat sat on the mat\nnoise\tdogs bark loudly at night\npets\tcats purr and sleep\nnoise\tthe band plays loudly\n' >"$dir/train.tsv"
printf 'pets\tcat zebra quokka sleep\nnoise\tbark aardvark loudly\nnoise\tnarwhal\n' >"$dir/test.tsv"
"$T" convert -q --format tsv --open-vocabulary --in "$dir/train.tsv" --out "$dir/train.pb"
"$T" convert -q --format tsv --open-vocabulary --in "$dir/test.tsv" --out "$dir/test.pb"
"$T" train -q --in "$dir/train.pb" --out "$dir/m.trib" --family multinomial --loss ncll
"$T" inspect --model "$dir/m.trib" --json | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)
assert m["vocabulary"] == "open", m
# the, cat, sat, on, mat, dogs, bark, loudly, at, night, cats, purr, and,
# sleep, band, plays
assert m["vocabulary_size"] == 16, m["vocabulary_size"]
' || fail "the model should have learned the 16 words of the training text"
# Every test document is predicted, the one made only of unseen words too
# (from the class prior); the words it knows decide the others.
"$T" predict --model "$dir/m.trib" --in "$dir/test.pb" >"$dir/pred.jsonl"
/usr/bin/python3 - "$dir/pred.jsonl" <<'PY' || fail "predictions of documents with unseen words"
import json, sys
p = [json.loads(l) for l in open(sys.argv[1])]
assert len(p) == 3, p
assert p[0]["predicted"] == "pets" and p[1]["predicted"] == "noise", p
PY
# The model does not learn while predicting.
"$T" inspect --model "$dir/m.trib" --json | grep -q '"vocabulary_size":16' || fail "predict changed the model"

refused "both modes" "expected one of them" \
  "$T" convert --format tsv --open-vocabulary --hashed-dim 64 --in "$dir/train.tsv" --out "$dir/x.pb"
refused "svmlight" "applies to tsv (text) input only" \
  "$T" convert --format svmlight --open-vocabulary --in "$dir/train.tsv" --out "$dir/x.pb"
refused "lda" "family 'lda' cannot learn an open vocabulary" \
  "$T" train -q --in "$dir/train.pb" --out "$dir/x.trib" --family lda --loss nll
refused "lda hint" "--hashed-dim" "$T" train -q --in "$dir/train.pb" --out "$dir/x.trib" --family lda --loss nll
refused "prior=log" "prior=log" \
  "$T" train -q --in "$dir/train.pb" --out "$dir/x.trib" --family multinomial --prior log
echo "open_vocabulary: OK"
