#!/usr/bin/env bash
# `train --distributed` with the same flags as one process (issue 40): the
# defaults (NCLL, --select auto: the candidates' search shared among the
# ranks) and one learner (--select off) over a training file sorted by
# category (a backfill), on Debian's fortunes (39 categories). Prints, per
# setting, the held-out accuracy (the test split, never used for a choice),
# the model's stats digest (equal digests: bit-identical models) and the wall
# time of the whole command.
#
# Usage: bench/distributed_defaults.sh [--bin build/bin/tributary] [--seeds "1 2"] [--work DIR]
# Needs fortunes, Debian's python3, Open MPI (scripts/install_deps.sh).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
BIN=$REPO/build/bin/tributary
SEEDS="1 2"
WORK=${TMPDIR:-/tmp}/tributary-distributed-defaults
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "distributed_defaults.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "distributed_defaults.sh: no program at $BIN" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "distributed_defaults.sh: mpirun missing (apt-get install openmpi-bin)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$WORK"
cd "$WORK"
/usr/bin/python3 "$REPO/scripts/fortunes_to_tsv.py" --seed 1 --train train.tsv --test test.tsv 2>/dev/null
LC_ALL=C sort -s -t "$(printf '\t')" -k1,1 train.tsv > sorted.tsv
for s in train sorted test; do "$BIN" convert -q --format tsv --in "$s.tsv" --out "$s.pb"; done

acc() { "$BIN" eval --json --model "$1" --in test.pb | /usr/bin/python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["accuracy"])'; }
digest() { "$BIN" inspect --json --model "$1" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["stats_digest"])'; }
wall() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
MPI="mpirun --oversubscribe --bind-to none -np 2"

echo "# train --distributed with the same flags as one process"
echo "date      $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine   $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(nproc) CPUs"
echo "source    $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
echo "| setting | file | seed | processes | accuracy | stats digest | wall s |"
echo "|---|---|---|---|---|---|---|"
for seed in $SEEDS; do
  for file in train sorted; do
    common="train -q --loss ncll --seed $seed --in $file.pb"
    w1=$(wall "$BIN" $common --out d1.trib)
    w2=$(wall $MPI "$BIN" $common --distributed --out d2.trib)
    echo "| defaults | $file | $seed | 1 | $(acc d1.trib) | $(digest d1.trib) | $w1 |"
    echo "| defaults | $file | $seed | 2 ranks | $(acc d2.trib) | $(digest d2.trib) | $w2 |"
  done
  common="train -q --select off --epochs 4 --loss ncll --seed $seed --in sorted.pb"
  w1=$(wall "$BIN" $common --out o1.trib)
  w2=$(wall $MPI "$BIN" $common --distributed --out o2.trib)
  wt=$(wall "$BIN" $common --threads 2 --out t2.trib)
  echo "| --select off, 4 passes | sorted | $seed | 1 | $(acc o1.trib) | $(digest o1.trib) | $w1 |"
  echo "| --select off, 4 passes | sorted | $seed | 2 ranks | $(acc o2.trib) | $(digest o2.trib) | $w2 |"
  echo "| --select off, 4 passes | sorted | $seed | 2 threads | $(acc t2.trib) | $(digest t2.trib) | $wt |"
done
