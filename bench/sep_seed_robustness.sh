#!/usr/bin/env bash
# How often does each engine / damping setting find the clusters? A small
# synthetic stream with three well-separated clusters (the stream of
# tests/sep_cli_test.cc: 36 terms, 12 own terms per cluster, 40 tokens a
# document with Dirichlet(0.5) proportions over the own terms and 10% noise,
# 450 documents), trained with each setting for seeds 1..SEEDS, evaluated on
# the training documents (clustering accuracy after the Hungarian mapping).
# Prints one Markdown row per setting: accuracies per seed and how many
# seeds merged two clusters (accuracy < 0.9). bench/SEP_RESULTS.md §4.
#
#   bench/sep_seed_robustness.sh [BUILD_DIR]     SEEDS=8 by default
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$HERE/$BUILD ;; esac
T=$BUILD/bin/tributary
[ -x "$T" ] || { echo "no program at $T" >&2; exit 1; }
SEEDS=${SEEDS:-8}
W=$(mktemp -d /tmp/sep_seeds.XXXXXX)
trap 'rm -rf "$W"' EXIT
python3 - "$W/train.tsv" <<'EOF'
import random, sys
r = random.Random(1)
with open(sys.argv[1], "w") as f:
    for i in range(450):
        k = r.randrange(3)
        prop = [r.gammavariate(0.5, 1) + 1e-12 for _ in range(12)]
        toks = [f"w{r.randrange(36) if r.random() < 0.1 else k * 12 + r.choices(range(12), weights=prop)[0]}"
                for _ in range(40)]
        f.write(f"c{k}\t{' '.join(toks)}\n")
EOF
"$T" convert --format tsv --in "$W/train.tsv" --out "$W/train.pb" 2>/dev/null
SETTINGS=${SETTINGS:-"sep emsd-mixture
sep edcm-mixture
adf emsd-mixture
ep edcm-mixture --epochs 3
ep emsd-mixture --epochs 3
sep emsd-mixture --damping 0.001
sep emsd-mixture --damping 0.01
sep emsd-mixture --n 2000
sep emsd-mixture --n 2000 --opt burn_in=45
sep emsd-mixture --opt integration=montecarlo
ep emsd-mixture --epochs 2 --damping 0.5
ep emsd-mixture --epochs 4 --damping 0.5
ep edcm-mixture --epochs 2 --damping 0.5
ep emsd-mixture --epochs 2 --damping 0.5 --opt burn_in=0"}
echo "| setting (--components 3, N = 450) | accuracy per seed 1..$SEEDS | merged (< 0.9) |"
echo "|---|---|---:|"
while read -r engine family rest; do
  [ -n "$engine" ] || continue
  accs="" merged=0
  for s in $(seq 1 "$SEEDS"); do
    # shellcheck disable=SC2086
    if ! "$T" train -q --engine "$engine" --family "$family" $rest --components 3 --seed "$s" --in "$W/train.pb" \
      --out "$W/m.trib" 2> "$W/err.txt"; then
      accs="$accs error" merged=$((merged + 1))
      echo "  $engine $family $rest seed $s: $(tail -c 300 "$W/err.txt")" >&2
      continue
    fi
    a=$("$T" eval --json --model "$W/m.trib" --in "$W/train.pb" |
      python3 -c 'import json, sys; print("%.2f" % json.load(sys.stdin)["accuracy"])')
    accs="$accs $a"
    if python3 -c "import sys; sys.exit(0 if $a < 0.9 else 1)"; then merged=$((merged + 1)); fi
  done
  echo "| \`--engine $engine --family $family $rest\` |$accs | $merged/$SEEDS |"
done <<< "$SETTINGS"
