#!/usr/bin/env bash
# Documents/s of one learner spread over threads (train --threads T) and over
# MPI ranks (mpirun -np N tributary train --distributed), against one thread,
# measured in one run on real short documents: Debian's fortunes (39
# categories), the training split repeated --copies times so that a run lasts
# seconds, 5 shuffled passes, multinomial naive Bayes. Also the held-out
# accuracy of each (the test split, once), and for the ranks the bytes and the
# time rank 0 spent in MPI_Allreduce (the program's own report).
#
# Usage: bench/parallel.sh [--bin build/bin/tributary] [--copies 20] [--reps 3]
#                          [--losses "ncll hinge nll"] [--work DIR]
# Needs fortunes, python3 (Debian's), Open MPI (scripts/install_deps.sh).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
BIN=$REPO/build/bin/tributary
COPIES=20
REPS=3
LOSSES="ncll hinge nll"
WORK=${TMPDIR:-/tmp}/tributary-parallel
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --copies) COPIES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --losses) LOSSES=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "parallel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "parallel.sh: no program at $BIN" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "parallel.sh: mpirun missing (apt-get install openmpi-bin)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$WORK"

# ---- data ------------------------------------------------------------------
if [ ! -s "$WORK/train.pb" ]; then
  /usr/bin/python3 "$REPO/scripts/fortunes_to_tsv.py" --seed 1 --train "$WORK/train1.tsv" --test "$WORK/test.tsv" 2>/dev/null
  : >"$WORK/train.tsv"
  for _ in $(seq "$COPIES"); do cat "$WORK/train1.tsv" >>"$WORK/train.tsv"; done
  "$BIN" convert -q --format tsv --in "$WORK/train.tsv" --out "$WORK/train.pb"
  "$BIN" convert -q --format tsv --in "$WORK/test.tsv" --out "$WORK/test.pb"
fi
DOCS=$(wc -l <"$WORK/train.tsv")
EPOCHS=5

lscpu_field() { lscpu | awk -F: -v k="$1" '$1 == k { sub(/^[ \t]+/, "", $2); print $2 }'; }
echo "# One learner on threads and MPI ranks"
echo "date      $(date '+%Y-%m-%d %H:%M:%S %Z')"
echo "machine   $(lscpu_field 'Model name'); $(lscpu_field 'CPU(s)') CPUs; $(free -g | awk '/Mem:/ {print $2}') GiB"
echo "source    $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo ?)$(git -C "$REPO" status --porcelain 2>/dev/null | grep -q . && echo ' (+ uncommitted changes)')"
echo "mpi       $(mpirun --version 2>/dev/null | head -1)"
echo "data      fortunes training split x $COPIES = $DOCS documents, $EPOCHS shuffled passes, default --sync-every"
echo

# run NAME CMD...: best-of-REPS wall time of the whole process -> WALL[NAME];
# the program's report line -> LINE[NAME].
declare -A WALL LINE ACC
run() {
  local name=$1; shift
  local best=""
  for _ in $(seq "$REPS"); do
    /usr/bin/time -o "$WORK/t" -f "%e" "$@" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
    local w; w=$(cat "$WORK/t")
    if [ -z "$best" ] || awk -v a="$w" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$w
      LINE[$name]=$(grep -E "^trained" "$WORK/err" | tail -1)
    fi
  done
  WALL[$name]=$best
  ACC[$name]=$("$BIN" eval --json --model "$WORK/m.trib" --in "$WORK/test.pb" | /usr/bin/python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["accuracy"])')
}

for loss in $LOSSES; do
  common=(train --select off --loss "$loss" --epochs $EPOCHS --in "$WORK/train.pb" --out "$WORK/m.trib")
  echo "load average before $loss: $(cut -d' ' -f1-3 /proc/loadavg)"
  run "$loss threads=1" "$BIN" "${common[@]}"
  run "$loss threads=2" "$BIN" "${common[@]}" --threads 2
  for n in 1 2 4; do
    run "$loss ranks=$n" mpirun --oversubscribe --bind-to none -np "$n" "$BIN" "${common[@]}" --distributed
  done
  base=${WALL["$loss threads=1"]}
  printf "\n| %-5s | setting | wall s (best of %s) | documents/s | speed-up | test accuracy |\n|---|---|---|---|---|---|\n" "$loss" "$REPS"
  for s in "threads=1" "threads=2" "ranks=1" "ranks=2" "ranks=4"; do
    k="$loss $s"
    awk -v l="$loss" -v s="$s" -v w="${WALL[$k]}" -v b="$base" -v n="$DOCS" -v e="$EPOCHS" -v a="${ACC[$k]}" \
      'BEGIN { printf "| %s | %s | %.2f | %.0f | %.2fx | %s |\n", l, s, w, n * e / w, b / w, a }'
  done
  echo
  for s in "ranks=2" "ranks=4"; do echo "  $loss $s: ${LINE["$loss $s"]}"; done
  echo
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
