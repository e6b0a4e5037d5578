#!/usr/bin/env bash
# Defaults and arrival order on a real corpus (the Bible's ten genres, Debian
# bible-kjv): `train --family multinomial --loss L` with no other flag, on the
# training stream in random, class-grouped and canonical (time) order, from a
# file and as one pass from standard input. Asserts what issue 11 promises:
#  - file, any order: the better of NCLL and hinge >= NLL's accuracy;
#  - standard input, one pass, any order: the better of NCLL and hinge >= NLL - 1 point;
#  - no collapse: the kept NCLL / hinge model predicts at least as many distinct
#    classes on the test split as NLL does (the old defaults predicted one).
# The test split is only evaluated; every choice is made on the training stream.
# Usage: defaults_orders.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
SRC=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
PY=/usr/bin/python3
$PY "$SRC/scripts/bible_to_tsv.py" --train "$dir/random.tsv" --test "$dir/test.tsv" 2>/dev/null
$PY "$SRC/scripts/bible_to_tsv.py" --order canonical --train "$dir/time.tsv" --test "$dir/test2.tsv" 2>/dev/null
cmp -s "$dir/test.tsv" "$dir/test2.tsv" || { echo "FAIL: the canonical order changed the test split" >&2; exit 1; }
sort -s -t$'\t' -k1,1 "$dir/random.tsv" > "$dir/grouped.tsv"
for o in random grouped time test; do $T convert -q --format tsv --in "$dir/$o.tsv" --out "$dir/$o.pb"; done
acc() {  # model -> accuracy and the number of distinct predicted classes
  $T eval --json --model "$1" --in "$dir/test.pb" | $PY -c 'import json,sys; print(json.load(sys.stdin)["accuracy"])'
}
classes() {
  $T predict --model "$1" --in "$dir/test.pb" | $PY -c 'import json,sys; print(len({json.loads(l)["predicted"] for l in sys.stdin}))'
}
nll=""
fail=0
for o in random grouped time; do
  for input in file stdin; do
    declare -A a=()
    for l in nll ncll hinge; do
      if [[ $input == file ]]; then
        $T train -q --family multinomial --loss $l --in "$dir/$o.pb" --out "$dir/m.trib"
      else
        cat "$dir/$o.pb" | $T train -q --family multinomial --loss $l --in - --out "$dir/m.trib"
      fi
      a[$l]=$(acc "$dir/m.trib")
      k=$(classes "$dir/m.trib")
      if [[ $l == nll ]]; then
        knll=$k
      elif [[ $k -lt $knll ]]; then
        echo "FAIL: $o/$input/$l predicts $k distinct classes, NLL $knll" >&2
        fail=1
      fi
    done
    slack=0
    [[ $input == stdin ]] && slack=0.01
    echo "$o $input: nll ${a[nll]} ncll ${a[ncll]} hinge ${a[hinge]}"
    $PY -c "import sys; sys.exit(0 if max(${a[ncll]}, ${a[hinge]}) >= ${a[nll]} - $slack else 1)" ||
      { echo "FAIL: $o/$input: best of NCLL/hinge below NLL - $slack" >&2; fail=1; }
    unset a
  done
done
exit $fail
