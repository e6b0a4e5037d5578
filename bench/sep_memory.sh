#!/usr/bin/env bash
# Peak memory of `tributary train --engine sep` against `--engine ep` on
# growing synthetic count streams (bench/SEP_RESULTS.md).
#
#   bench/sep_memory.sh [BUILD_DIR] [SIZES...]     BUILD_DIR default: build
#                                                  SIZES default: 1000 10000 100000
#
# Streams: 3 latent classes, 30 tokens a document (half from the class's 100
# topic words, half uniform over 2,000 words), written as TSV by an inline
# Python generator (fixed seed; the smaller streams are prefixes of the larger
# ones) and converted with `--hashed-dim 4096`, so every stream has the same
# vocabulary and the model the same size. Each stream is trained with
# `--family emsd-mixture --components 2` by SEP and by EP (one pass), under
# /usr/bin/time -v: Maximum resident set size, wall time, and the snapshot's
# size. SEP holds nothing per document; EP holds one site per document.
# Downloads nothing. Work files go to a temporary directory (kept with
# KEEP=1).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
shift || true
case $BUILD in /*) ;; *) BUILD=$HERE/$BUILD ;; esac
T=$BUILD/bin/tributary
[ -x "$T" ] || { echo "no program at $T (build tributary_cli and the emsd-mixture plugin first)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 1; }
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(1000 10000 100000)
W=$(mktemp -d /tmp/sep_memory.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$W"' EXIT

gen() {  # gen N OUT
  python3 - "$1" "$2" <<'EOF'
import random, sys
n, out = int(sys.argv[1]), sys.argv[2]
rng = random.Random(20240601)
V, K, TOPIC, LEN = 2000, 3, 100, 30
topic = [[rng.randrange(V) for _ in range(TOPIC)] for _ in range(K)]
with open(out, "w") as f:
    for _ in range(n):
        k = rng.randrange(K)
        toks = [topic[k][rng.randrange(TOPIC)] if rng.random() < 0.5 else rng.randrange(V) for _ in range(LEN)]
        f.write("c%d\t%s\n" % (k, " ".join("w%d" % t for t in toks)))
EOF
}

echo "| documents | engine | max RSS (MiB) | snapshot (bytes) | train wall (s) |"
echo "|---:|---|---:|---:|---:|"
for n in "${SIZES[@]}"; do
  gen "$n" "$W/s$n.tsv"
  "$T" convert --format tsv --hashed-dim 4096 --in "$W/s$n.tsv" --out "$W/s$n.pb" 2>/dev/null
  for engine in sep ep; do
    /usr/bin/time -v -o "$W/time.txt" "$T" train --engine "$engine" --family emsd-mixture --components 2 \
      --seed 1 --quiet --in "$W/s$n.pb" --out "$W/m_${engine}_$n.trib"
    rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$W/time.txt")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$W/time.txt")
    secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
    bytes=$(stat -c %s "$W/m_${engine}_$n.trib")
    printf "| %d | %s | %.1f | %d | %.2f |\n" "$n" "$engine" "$(echo "$rss_kb / 1024" | bc -l)" "$bytes" "$secs"
  done
done
