#!/usr/bin/env bash
# Fast LDA / DLDA against the standard variational step (Shan & Banerjee 2010
# §5.3, §6; the paper's Tables 11 and 13: accuracy and time of DLDA vs Fast
# DLDA with k = t topics) on real labelled corpora from Debian packages:
#   bible10   the KJV (bible-kjv), 10-verse chunks, 10 genres (scripts/bible_to_tsv.py --verses 10)
#   bible1    the same, one verse per document
#   fortunes  Debian's fortunes, 39 categories (scripts/fortunes_to_tsv.py)
# For each: `tributary train --family lda --opt discriminative=1` with
# inference=vi (DLDA) and inference=fast (Fast DLDA), K = the number of
# classes (the paper's k = t; not tuned), the loss nll (the paper's
# variational EM, online) and the program's defaults otherwise; then the
# unsupervised LDA (inference vi / fast, the same K) for held-out
# perplexity; and the product's default classifier (multinomial, ncll) for
# context. Time: CPU seconds (user + sys) of the `train` and `eval`
# processes on core 0 (taskset), the fastest of REPEATS runs.
#   bash bench/dlda_real.sh [build-dir] [repeats]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
REPEATS=${2:-2}
T=$BUILD/bin/tributary
PY=/usr/bin/python3
command -v bible >/dev/null || apt-get install -y bible-kjv
[ -d /usr/share/games/fortunes ] || apt-get install -y fortunes
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# Runs a command REPEATS times on core 0; prints the fastest CPU seconds.
cpu() {
  $PY - "$REPEATS" "$@" <<'EOF'
import resource, subprocess, sys
best = float("inf")
for _ in range(int(sys.argv[1])):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["taskset", "-c", "0"] + sys.argv[2:], check=True, stdout=subprocess.DEVNULL)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    best = min(best, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
print("%.3f" % best)
EOF
}
field() { $PY -c 'import json,sys; v = json.load(sys.stdin).get(sys.argv[1]); print("-" if v is None else "%.4f" % v)' "$1"; }

echo "| corpus | model | K | train CPU s | eval CPU s | accuracy | macro F1 | perplexity |"
echo "|---|---|---|---|---|---|---|---|"
for corpus in bible10 bible1 fortunes; do
  d=$W/$corpus
  mkdir -p "$d"
  case $corpus in
    bible10) $PY "$ROOT/scripts/bible_to_tsv.py" --verses 10 --train "$d/train.tsv" --test "$d/test.tsv" 2>/dev/null ;;
    bible1) $PY "$ROOT/scripts/bible_to_tsv.py" --verses 1 --train "$d/train.tsv" --test "$d/test.tsv" 2>/dev/null ;;
    fortunes) $PY "$ROOT/scripts/fortunes_to_tsv.py" --train "$d/train.tsv" --test "$d/test.tsv" 2>/dev/null ;;
  esac
  $T convert --format tsv --in "$d/train.tsv" --out "$d/train.pb" --quiet
  $T convert --format tsv --in "$d/test.tsv" --out "$d/test.pb" --quiet
  K=$(cut -f1 "$d/train.tsv" | sort -u | wc -l)
  run() {  # name, train args...
    local name=$1
    shift
    local tc ec json
    tc=$(cpu "$T" train "$@" --in "$d/train.pb" --out "$d/m.trib" --quiet)
    ec=$(cpu "$T" eval --model "$d/m.trib" --in "$d/test.pb" --json)
    json=$("$T" eval --model "$d/m.trib" --in "$d/test.pb" --json)
    echo "| $corpus | $name | $K | $tc | $ec | $(echo "$json" | field accuracy) | $(echo "$json" | field macro_f1) | $(echo "$json" | field perplexity) |"
  }
  for inf in vi fast; do
    label=$([ $inf = vi ] && echo "DLDA (inference=vi)" || echo "Fast DLDA (inference=fast)")
    run "$label" --family lda --loss nll --topics "$K" --opt inference=$inf --opt discriminative=1
  done
  for inf in vi fast; do
    label=$([ $inf = vi ] && echo "LDA, unsupervised (inference=vi)" || echo "Fast LDA, unsupervised (inference=fast)")
    run "$label" --family lda --loss nll --topics "$K" --opt inference=$inf
  done
  run "multinomial NB, ncll (the product's default classifier)" --family multinomial --loss ncll
done
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); tributary $(git -C "$ROOT" rev-parse --short HEAD)"
