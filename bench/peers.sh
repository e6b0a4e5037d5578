#!/usr/bin/env bash
# Peer comparison on the same synthetic data, measured in one run:
#   tributary  train --family multinomial --loss ncll (one pass), eval
#   fastText   fasttext supervised -thread 1 -epoch 1 (defaults otherwise: dim 100, softmax), fasttext test
#   sklearn    MultinomialNB / SGDClassifier partial_fit one document per call (bench/peers_sklearn.py)
# and the documents/s ratios tributary / peer. Installs fasttext and python3-sklearn with apt-get when
# missing (as root; --no-install to refuse). Data: bench/gen_synthetic.py (cached in --work).
#
# Usage: bench/peers.sh [--bin build/bin/tributary] [--docs 1000000] [--vocabs "10000 1000000"]
#                       [--work DIR] [--sklearn-docs 200000] [--sklearn-seconds 10] [--no-install]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
BIN=${TRIBUTARY_BIN:-$REPO/build/bin/tributary}
DOCS=1000000
VOCABS="10000 1000000"
WORK=${TMPDIR:-/tmp}/tributary-bench
SK_DOCS=200000
SK_SECONDS=10
SEED=20140101
INSTALL=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --docs) DOCS=$2; shift 2 ;;
    --vocabs) VOCABS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --sklearn-docs) SK_DOCS=$2; shift 2 ;;
    --sklearn-seconds) SK_SECONDS=$2; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "peers.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "peers.sh: no program at $BIN (build it or pass --bin)" >&2; exit 1; }
mkdir -p "$WORK"

# ---- tools -------------------------------------------------------------------
find_sklearn_python() {
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import sklearn' >/dev/null 2>&1; then
      command -v "$py"; return 0
    fi
  done
  return 1
}
need=()
command -v fasttext >/dev/null 2>&1 || need+=(fasttext)
find_sklearn_python >/dev/null || need+=(python3-sklearn)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ]; then
    echo "installing ${need[*]} with apt-get" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
  else
    echo "peers.sh: missing ${need[*]} (apt-get install ${need[*]})" >&2; exit 1
  fi
fi
PY=$(find_sklearn_python)
[ -x /usr/bin/time ] || { echo "peers.sh: needs GNU time (/usr/bin/time)" >&2; exit 1; }

# timed CMD...: runs CMD, stdout/stderr to $WORK/last.out/.err; sets WALL and CPU (user + sys seconds).
timed() {
  /usr/bin/time -o "$WORK/last.time" -f "%e %U %S" "$@" >"$WORK/last.out" 2>"$WORK/last.err" || {
    echo "FAILED: $*" >&2; cat "$WORK/last.err" >&2; exit 1; }
  read -r WALL U S <"$WORK/last.time"
  CPU=$(awk -v u="$U" -v s="$S" 'BEGIN { printf "%.2f", u + s }')
}
rate() { awk -v n="$1" -v t="$2" 'BEGIN { if (t > 0) printf "%.0f", n / t; else print "inf" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "-" }'; }

# ---- machine -------------------------------------------------------------------
lscpu_field() { lscpu | awk -F: -v k="$1" '$1 == k { sub(/^[ \t]+/, "", $2); print $2 }'; }
echo "# Tributary vs peers (one thread each)"
echo "date      $(date '+%Y-%m-%d %H:%M:%S %Z')"
echo "machine   $(lscpu_field 'Model name'); $(lscpu_field 'CPU(s)') CPUs ($(lscpu_field 'Core(s) per socket') core(s)/socket, $(lscpu_field 'Thread(s) per core') thread(s)/core); L2 $(lscpu_field 'L2 cache'), L3 $(lscpu_field 'L3 cache'); hypervisor $(lscpu_field 'Hypervisor vendor')"
echo "source    $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo ?)$(git -C "$REPO" status --porcelain 2>/dev/null | grep -q . && echo ' (+ uncommitted changes)')"
echo "tools     $BIN; fasttext $(dpkg-query -W -f='${Version}' fasttext 2>/dev/null || echo '?'); $($PY -c 'import sklearn, sys; print("scikit-learn", sklearn.__version__, "on python", sys.version.split()[0])')"
echo "data      $DOCS documents, 8-12 tokens (mean 10), 45 classes, seed $SEED; scikit-learn per-document runs: first $SK_DOCS documents, at most ${SK_SECONDS} s each"
echo "load avg  $(cut -d' ' -f1-3 /proc/loadavg) (start)"

for V in $VOCABS; do
  tsv=$WORK/synth_d${DOCS}_v${V}_s${SEED}.tsv
  if [ ! -s "$tsv" ] || [ ! -s "$tsv.stats" ]; then
    python3 "$HERE/gen_synthetic.py" --docs "$DOCS" --vocab "$V" --seed "$SEED" --stats --out "$tsv.tmp" 2>"$tsv.stats"
    mv "$tsv.tmp" "$tsv"
  fi
  ft=${tsv%.tsv}.ft
  [ -s "$ft" ] && [ "$ft" -nt "$tsv" ] || sed 's/^\([^\t]*\)\t/__label__\1 /' "$tsv" >"$ft"
  pb=${tsv%.tsv}.pb
  echo
  echo "## vocabulary $V ($(sed -n 's/.*distinct_terms=\([0-9]*\).*/\1/p' "$tsv.stats") distinct terms)"

  # tributary
  timed "$BIN" convert --format tsv --in "$tsv" --out "$pb"
  conv_wall=$WALL
  timed "$BIN" train --family multinomial --loss ncll --in "$pb" --out "$WORK/peer_model.trib"
  trib_rate=$(sed -n 's/.*(\([0-9.e+]*\) documents\/s).*/\1/p' "$WORK/last.err" | awk '{ printf "%.0f", $1 }')
  train_secs=$(sed -n 's/.* in \([0-9.e+]*\) s (.*/\1/p' "$WORK/last.err")
  trib_cpu_rate=$(rate "$DOCS" "$CPU")  # whole process: model creation and snapshot write included
  trib_text_rate=$(awk -v n="$DOCS" -v a="$conv_wall" -v b="$train_secs" 'BEGIN { printf "%.0f", n / (a + b) }')
  timed "$BIN" eval --model "$WORK/peer_model.trib" --in "$pb" --json
  trib_eval_rate=$(rate "$DOCS" "$WALL")
  trib_acc=$(sed -n 's/.*"accuracy":\([0-9.]*\).*/\1/p' "$WORK/last.out")
  rm -f "$WORK/peer_model.trib"
  printf '%-44s %10s docs/s  (program rate; %s by process CPU time; %s from text incl. convert)\n' \
    "tributary train ncll (1 pass)" "$trib_rate" "$trib_cpu_rate" "$trib_text_rate"
  printf '%-44s %10s docs/s  (wall, incl. model load; training-set accuracy %s)\n' \
    "tributary eval" "$trib_eval_rate" "$trib_acc"

  # fastText
  timed fasttext supervised -input "$ft" -output "$WORK/peer_ft" -thread 1 -epoch 1
  ft_rate=$(rate "$DOCS" "$WALL")
  ft_cpu_rate=$(rate "$DOCS" "$CPU")
  ft_wps=$(tr '\r' '\n' <"$WORK/last.err" | sed -n 's/.*words\/sec\/thread: *\([0-9]*\).*/\1/p' | tail -1)
  timed fasttext test "$WORK/peer_ft.bin" "$ft"
  ft_test_rate=$(rate "$DOCS" "$WALL")
  ft_acc=$(awk '/^P@1/ { print $2 }' "$WORK/last.out")
  rm -f "$WORK/peer_ft.bin" "$WORK/peer_ft.vec"
  printf '%-44s %10s docs/s  (process wall, from text; %s by CPU time; %s words/s/thread)\n' \
    "fasttext supervised -thread 1 -epoch 1" "$ft_rate" "$ft_cpu_rate" "${ft_wps:-?}"
  printf '%-44s %10s docs/s  (process wall, incl. model load; P@1 %s)\n' "fasttext test" "$ft_test_rate" "$ft_acc"

  # scikit-learn
  "$PY" "$HERE/peers_sklearn.py" --tsv "$tsv" --max-docs "$SK_DOCS" --seconds "$SK_SECONDS" >"$WORK/sk.out"
  grep '^#' "$WORK/sk.out" || true
  while read -r name n r; do
    printf '%-44s %10.0f docs/s  (%s documents)\n' "$name" "$r" "$n"
  done < <(grep -v '^#' "$WORK/sk.out")

  echo "ratios (tributary / peer, documents/s):"
  printf '  train: tributary ncll / fasttext supervised        %6sx (program rate / process wall), %6sx (process CPU), %6sx (both from text, wall)\n' \
    "$(ratio "$trib_rate" "$ft_rate")" "$(ratio "$trib_cpu_rate" "$ft_cpu_rate")" "$(ratio "$trib_text_rate" "$ft_rate")"
  while read -r name n r; do
    case "$name" in
      *predict*) printf '  eval:  tributary eval / %-40s %6sx\n' "$name" "$(ratio "$trib_eval_rate" "$r")" ;;
      *) printf '  train: tributary ncll / %-40s %6sx\n' "$name" "$(ratio "$trib_rate" "$r")" ;;
    esac
  done < <(grep -v '^#' "$WORK/sk.out")
  printf '  eval:  tributary eval / fasttext test                %6sx\n' "$(ratio "$trib_eval_rate" "$ft_test_rate")"
done
echo
echo "load avg  $(cut -d' ' -f1-3 /proc/loadavg) (end)"
