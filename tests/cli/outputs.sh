#!/usr/bin/env bash
# Outputs that never lie (issue 41, items 4 and 5): `--out` replaces only a
# regular file or a new path (as root, `train --out /dev/null` used to
# replace the device with a regular file), and every failed write - a full
# disk, here /dev/full - is an error with exit 1, for files given by --out
# and for standard output (predict, eval --json and inspect exited 0 with
# their output cut).
# Usage: outputs.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# refused NAME SUBSTRING COMMAND...: the command must exit 1, saying SUBSTRING.
refused() {
  local name=$1 want=$2 rc=0
  shift 2
  "$@" >"$dir/out.txt" 2>&1 || rc=$?
  [[ $rc -eq 1 ]] || fail "$name: exit $rc, expected 1: $(head -c 300 "$dir/out.txt")"
  grep -qF -- "$want" "$dir/out.txt" || fail "$name: expected '$want', got: $(head -c 300 "$dir/out.txt")"
}
# refused_stdout NAME SUBSTRING COMMAND...: the same with standard output on a full disk.
refused_stdout() {
  local name=$1 want=$2 rc=0
  shift 2
  "$@" >/dev/full 2>"$dir/err.txt" || rc=$?
  [[ $rc -eq 1 ]] || fail "$name: exit $rc, expected 1: $(head -c 300 "$dir/err.txt")"
  grep -qF -- "$want" "$dir/err.txt" || fail "$name: expected '$want', got: $(head -c 300 "$dir/err.txt")"
}

[[ -c /dev/full ]] || fail "/dev/full is missing"
for i in $(seq 1 200); do
  printf 'pets\tthe cat sat on the mat number %d\nnoise\tdogs bark loudly at night number %d\n' "$i" "$i"
done >"$dir/train.tsv"
"$T" convert -q --format tsv --in "$dir/train.tsv" --out "$dir/train.pb"
"$T" train -q --family multinomial --loss ncll --select off --in "$dir/train.pb" --out "$dir/m.trib"

mkfifo "$dir/fifo"
refused "train --out FIFO" "expected a regular file or a new path" \
  "$T" train -q --family multinomial --loss ncll --select off --in "$dir/train.pb" --out "$dir/fifo"
[[ -p "$dir/fifo" ]] || fail "the FIFO was replaced"
refused "train --out DIR" "expected a regular file or a new path" \
  "$T" train -q --family multinomial --loss ncll --select off --in "$dir/train.pb" --out "$dir"
refused "train --out /dev/null" "expected a regular file or a new path" \
  "$T" train -q --family multinomial --loss ncll --select off --in "$dir/train.pb" --out /dev/null
[[ -c /dev/null ]] || fail "/dev/null is no longer a character device"
if ls "$dir" | grep -q '\.tmp\.'; then fail "a temporary file was left: $(ls "$dir")"; fi

refused "predict --out /dev/full" "writing '/dev/full' failed" \
  "$T" predict --model "$dir/m.trib" --in "$dir/train.pb" --out /dev/full
refused "infer-like pb output to /dev/full" "/dev/full" \
  "$T" predict --model "$dir/m.trib" --in "$dir/train.pb" --format pb --out /dev/full
refused_stdout "predict > /dev/full" "failed" "$T" predict --model "$dir/m.trib" --in "$dir/train.pb"
refused_stdout "eval --json > /dev/full" "writing standard output failed" \
  "$T" eval --model "$dir/m.trib" --in "$dir/train.pb" --json
refused_stdout "inspect > /dev/full" "writing standard output failed" "$T" inspect --model "$dir/m.trib"

# The same commands with room to write succeed and write whole lines.
"$T" predict --model "$dir/m.trib" --in "$dir/train.pb" --out "$dir/p.jsonl"
[[ $(wc -l <"$dir/p.jsonl") -eq 400 ]] || fail "predict wrote $(wc -l <"$dir/p.jsonl") lines, expected 400"
"$T" eval --model "$dir/m.trib" --in "$dir/train.pb" --json >"$dir/e.json"
/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$dir/e.json"
echo "outputs: OK"
