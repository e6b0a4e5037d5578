#!/usr/bin/env bash
# Numbers given on the command line are checked, never silently replaced
# (issue 41 item 8): `--n nan`, `0`, `-1` and `inf` used to be replaced by
# the default (or, for inf, to give a model that predicts exactly 0).
# Usage: numeric_flags.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
for i in $(seq 1 20); do printf 'a\tapples and pears %d\nb\tbolts and nuts %d\n' "$i" "$i"; done >"$dir/t.tsv"
"$T" convert -q --format tsv --in "$dir/t.tsv" --out "$dir/t.pb"
for n in nan 0 -1 inf 1e13; do
  for cmd in "train -q --in $dir/t.pb --out $dir/m.trib" "serve --data-dir $dir/data"; do
    if $T $cmd --n "$n" >"$dir/out.txt" 2>&1; then fail "$cmd --n $n: accepted"; fi
    grep -qF "expected a finite effective data-set size n in [1, 1e12], found $n" "$dir/out.txt" ||
      fail "$cmd --n $n: $(head -c 300 "$dir/out.txt")"
  done
done
[[ ! -e "$dir/m.trib" && ! -e "$dir/data" ]] || fail "something was written for a refused n"
"$T" train -q --in "$dir/t.pb" --out "$dir/m.trib" --n 1e12
"$T" inspect --model "$dir/m.trib" --json | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)
assert m["effective_size"] == 1e12, m["effective_size"]
'
echo "numeric_flags: OK"
