#!/usr/bin/env bash
# What the defaults cost: `train --loss L` with no tuning flag (the Trainer:
# candidates on held-out training documents, shuffled passes, early stopping;
# lib/include/tributary/trainer.h) against one sdEM learner, one pass, in
# arrival order (`--select off`, the program's behaviour before the Trainer)
# on the benchmark corpus (bench/gen_synthetic.py: 1,000,000 documents of ~10
# tokens, 45 classes, 10,000 terms) and, with --real, Debian's fortunes.
# Reported, from one run of this script on this machine: the median wall
# seconds of REPS interleaved runs of each (single, defaults on every core,
# defaults on one thread, alternating, so that a noisy neighbour hits all of
# them alike), the ratios, and sdEM updates per second (every candidate's steps
# counted), whose ratio says whether the learner itself got slower.
# Usage: bench/defaults_throughput.sh BUILD_DIR [DOCS] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:?usage: defaults_throughput.sh BUILD_DIR [DOCS]}
DOCS=${2:-1000000}
REPS=${3:-5}
T=$B/bin/tributary
W=${TRIB_BENCH_DIR:-/tmp/tributary-defaults-throughput}
mkdir -p "$W"
PY=/usr/bin/python3
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ ! -s "$W/synth.pb" ]]; then
  $PY bench/gen_synthetic.py --docs "$DOCS" --vocab 10000 --out "$W/synth.tsv"
  $T convert -q --format tsv --in "$W/synth.tsv" --out "$W/synth.pb"
fi
if [[ ! -s "$W/fortunes.pb" ]]; then
  $PY scripts/fortunes_to_tsv.py --train "$W/fortunes.tsv" --test "$W/fortunes_test.tsv" 2>/dev/null
  $T convert -q --format tsv --in "$W/fortunes.tsv" --out "$W/fortunes.pb"
fi
secs() { local s e; s=$(date +%s.%N); "$@"; e=$(date +%s.%N); echo "$e - $s" | bc; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
printf '| corpus | loss | one learner, one pass: s | docs/s | defaults: s | defaults, 1 thread: s | updates | updates/s | wall ratio | 1-thread ratio | updates/s ratio | kept |\n'
printf '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n'
for corpus in synth fortunes; do
  for loss in ncll hinge; do
    one=() def=() def1=()
    for ((r = 0; r < REPS; r++)); do
      one+=("$(secs $T train -q --select off --family multinomial --loss $loss --in "$W/$corpus.pb" --out "$W/one.trib")")
      def+=("$(secs $T train -q --family multinomial --loss $loss --in "$W/$corpus.pb" --out "$W/def.trib")")
      def1+=("$(secs $T train -q --threads 1 --family multinomial --loss $loss --in "$W/$corpus.pb" --out "$W/def1.trib")")
    done
    s1=$(median "${one[@]}") s2=$(median "${def[@]}") s3=$(median "${def1[@]}")
    $T inspect --json --model "$W/one.trib" > "$W/one.json"
    $T inspect --json --model "$W/def.trib" > "$W/def.json"
    cmp -s <($T inspect --json --model "$W/def1.trib" | grep -v '"path"') <(grep -v '"path"' "$W/def.json") ||
      echo "note: the 1-thread model differs from the $(nproc)-thread one" >&2
    $PY - "$corpus" "$loss" "$s1" "$s2" "$s3" "$W/one.json" "$W/def.json" <<'PY'
import json, sys
corpus, loss, s1, s2, s3, one, dfl = sys.argv[1:]
s1, s2, s3 = float(s1), float(s2), float(s3)
o, d = json.load(open(one)), json.load(open(dfl))
docs = o["updates"]
t = d["training"]
updates = t["document_updates"]
print(f"| {corpus} | {loss} | {s1:.2f} | {docs/s1:,.0f} | {s2:.2f} | {s3:.2f} | {updates:,} | {updates/s2:,.0f} | "
      f"{s2/s1:.2f}x | {s3/s1:.2f}x | {(updates/s2)/(docs/s1):.2f} | {t['kept']} |")
PY
  done
done
