#!/usr/bin/env bash
# Online LDA: `tributary train --family lda` (sdEM, one document per step) with
# each local step (cvb0, vi, gibbs, fast: LDA_INFERENCE to choose) against gensim's LdaModel (one pass,
# chunksize 256) on the King James Bible (Debian bible-kjv), 10-verse chunks
# as documents: the same train/test split, vocabulary, K and
# document-completion perplexity, everything on one core (core 0).
#   bash bench/lda_vs_gensim.sh [build-dir] [topics] [repeats]
#
# Time: CPU time (user + sys), the fastest of `repeats` runs on each side (the
# machine may be shared: CPU time does not count the time spent waiting for a
# core). gensim: the LdaModel(...) training call (its initialisation included,
# reading the corpus not). tributary: the whole `train` process (start-up,
# plugin loading, random start, reading the stream, learning, writing the
# snapshot), and "training" = that minus the same process on a stream of the
# same schema with one document (start-up, start and snapshot cost the same
# there). Wall-clock figures are printed too. Ratios are computed from the
# numbers of this run. Schedule: LDA_SCHEDULE (default: none, i.e. the
# program's default for latent families, rho_t = (256 + t)^-0.7).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
K=${2:-20}
REPEATS=${3:-3}
T=$BUILD/bin/tributary
PY=/usr/bin/python3   # Debian's python, where python3-gensim lives
if ! $PY -c 'import gensim' 2>/dev/null; then apt-get install -y python3-gensim; fi
command -v bible >/dev/null || apt-get install -y bible-kjv
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
$PY "$ROOT/scripts/bible_to_tsv.py" --verses 10 --train "$W/train.tsv" --test "$W/test.tsv" 2>/dev/null
$T convert --format tsv --in "$W/train.tsv" --out "$W/train.pb" --quiet
$T convert --format tsv --in "$W/test.tsv" --out "$W/test.pb" --quiet
# The first two frames of the stream: its header (schema, vocabulary) and one
# document, cut from a copy without frame checksums (a checksummed stream has
# a CRC after every frame, which this cut does not parse).
$T convert --format tsv --in "$W/train.tsv" --out "$W/nocrc.pb" --no-frame-checksum --quiet
$PY - "$W/nocrc.pb" "$W/one.pb" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
pos = 0
for _ in range(2):
    n = shift = 0
    while True:
        c = data[pos]; pos += 1; n |= (c & 0x7F) << shift; shift += 7
        if c < 0x80:
            break
    pos += n
open(sys.argv[2], "wb").write(data[:pos])
EOF
NDOCS=$(wc -l < "$W/train.tsv")
echo "documents: $NDOCS train, $(wc -l < "$W/test.tsv") test; K = $K; fastest of $REPEATS runs"
read -r -a SCHED <<< "${LDA_SCHEDULE:-}"

# Runs a command REPEATS times on core 0; prints "cpu_seconds wall_seconds" of the fastest.
# The measuring process pins itself and its children inherit the core: a
# `taskset` in front would add its own exec and loading (~0.7 ms of CPU here)
# to what is charged to tributary.
measure() {
  $PY - "$REPEATS" "$@" <<'EOF'
import os, resource, subprocess, sys, time
os.sched_setaffinity(0, {0})
best = (float("inf"), float("inf"))
for _ in range(int(sys.argv[1])):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    subprocess.run(sys.argv[2:], check=True, stdout=subprocess.DEVNULL)
    w1 = time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    best = min(best, (cpu, w1 - w0))
print("%.4f %.4f" % best)
EOF
}

results=()
for inf in ${LDA_INFERENCE:-cvb0 vi gibbs fast}; do
  args=(train --family lda --loss nll --topics "$K" "${SCHED[@]}" --opt "inference=$inf" --quiet)
  read -r full_cpu full_wall < <(measure "$T" "${args[@]}" --in "$W/train.pb" --out "$W/lda.trib")
  read -r one_cpu one_wall < <(measure "$T" "${args[@]}" --in "$W/one.pb" --out "$W/one.trib")
  ppl=$("$T" eval --model "$W/lda.trib" --in "$W/test.pb" --json |
    $PY -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["perplexity"])')
  results+=("$inf $full_cpu $full_wall $one_cpu $one_wall $ppl")
done
gensim=$(taskset -c 0 $PY "$ROOT/bench/lda_gensim.py" --train "$W/train.tsv" --test "$W/test.tsv" --topics "$K" \
  --repeat "$REPEATS")
echo "gensim: $gensim"
$PY - "$NDOCS" "$gensim" "${results[@]}" <<'EOF'
import json, sys
n = int(sys.argv[1])
g = json.loads(sys.argv[2])
gd = g["documents"] / g["train_cpu_seconds"]
print("| model | docs/s (CPU, training) | docs/s (CPU, whole process) | docs/s (wall, whole process) "
      "| x gensim (training / whole) | perplexity | vs gensim |")
print("|---|---|---|---|---|---|---|")
for row in sys.argv[3:]:
    inf, fc, fw, oc, ow, ppl = row.split()
    fc, fw, oc, ppl = float(fc), float(fw), float(oc), float(ppl)
    train = (n - 1) / max(fc - oc, 1e-9)
    print("| tributary lda, inference=%s | %.0f | %.0f | %.0f | %.1fx / %.1fx | %.2f | %+.1f %% |" % (
        inf, train, n / fc, n / fw, train / gd, (n / fc) / gd, ppl, 100 * (ppl / g["perplexity"] - 1)))
print("| gensim %s LdaModel(chunksize=256, passes=1) | %.0f | - | %.0f (training call) | 1 | %.2f | 0 |" % (
    __import__("gensim").__version__, gd, g["documents"] / g["train_seconds"], g["perplexity"]))
EOF
