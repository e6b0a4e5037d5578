#!/usr/bin/env bash
# Text piped in as it arrives (issue 14, item 1): how fast documents get from
# a source into the model, against the learner reading a converted file.
#   file      train --in F.pb (the live conversion saved to a file)
#   stdin     the same stream piped: cat F.pb | train --in -
#   live      the text itself: cat F.tsv | convert --in - --out - | train --in -
#             (tokenizing, hashing, one flushed write per document, a pipe)
# Each is `train` with its defaults for a stream of unknown length (NCLL, the
# streaming candidates, n = 10000 given to the file runs so that all three
# learn the same model). documents/s = documents / wall seconds of the whole
# pipeline, best of REPS runs. Corpus: Debian's fortunes (scripts/
# fortunes_to_tsv.py training split), repeated COPIES times.
#
# Usage: bench/live_sources.sh OUT.md BUILD_DIR   (COPIES=10 REPS=3)
set -euo pipefail
OUT=$1
B=$(cd "$2" && pwd)
T=$B/bin/tributary
COPIES=${COPIES:-10}
REPS=${REPS:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/live_sources.XXXXXX")
trap 'rm -rf "$dir"' EXIT

/usr/bin/python3 "$here/scripts/fortunes_to_tsv.py" --train "$dir/one.tsv" --test "$dir/test.tsv" 2>/dev/null
for ((i = 0; i < COPIES; i++)); do cat "$dir/one.tsv"; done >"$dir/train.tsv"
docs=$(wc -l <"$dir/train.tsv")
cat "$dir/train.tsv" | "$T" convert -q --format tsv --in - --out "$dir/train.pb"

best() {  # command...: the best wall time of REPS runs, seconds
  local b=
  for ((r = 0; r < REPS; r++)); do
    local s e
    s=$(date +%s.%N)
    bash -c "$*"
    e=$(date +%s.%N)
    b=$(/usr/bin/python3 -c "import sys; t=$e-$s; b='$b'; print(t if not b else min(t, float(b)))")
  done
  echo "$b"
}
file=$(best "'$T' train -q --in '$dir/train.pb' --epochs 1 --n 10000 --out '$dir/file.trib'")
stdin=$(best "cat '$dir/train.pb' | '$T' train -q --in - --out '$dir/stdin.trib'")
live=$(best "cat '$dir/train.tsv' | '$T' convert -q --format tsv --in - --out - | '$T' train -q --in - --out '$dir/live.trib'")
digest() { "$T" inspect --model "$1" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["stats_digest"])'; }
same=no
[[ $(digest "$dir/file.trib") == $(digest "$dir/live.trib") && $(digest "$dir/file.trib") == $(digest "$dir/stdin.trib") ]] && same=yes
rate() { /usr/bin/python3 -c "print('%.0f' % ($docs / $1))"; }
ratio() { /usr/bin/python3 -c "print('%.2f' % ($2 / $1))"; }
{
  echo "## Live sources: $(date -u +%Y-%m-%d), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo
  echo "$docs documents (fortunes training split x $COPIES), best of $REPS; the three models equal by digest: $same."
  echo
  echo "| source | seconds | documents/s | vs file |"
  echo "|---|---|---|---|"
  echo "| file (train --in F.pb) | $(printf %.2f "$file") | $(rate "$file") | 1.00 |"
  echo "| stdin (cat F.pb \| train --in -) | $(printf %.2f "$stdin") | $(rate "$stdin") | $(ratio "$stdin" "$file") |"
  echo "| live text (cat F.tsv \| convert \| train --in -) | $(printf %.2f "$live") | $(rate "$live") | $(ratio "$live" "$file") |"
} | tee -a "$OUT"
