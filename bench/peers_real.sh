#!/usr/bin/env bash
# Side-by-side single-core comparison with fastText on REAL short documents, same tokens, same passes:
#   corpora   Debian's fortunes (scripts/fortunes_to_tsv.py: 39 classes, ~12k train / 3k test documents) and
#             the KJV bible, one verse per document (scripts/bible_to_tsv.py --verses 1: 10 genres,
#             ~25k train / 6k test)
#   tributary train --family multinomial --loss ncll|hinge --select off --epochs E (one thread), eval
#   fastText  fasttext supervised -thread 1 -epoch E (defaults otherwise: dim 100, softmax, lr 0.1),
#             and the same with -dim 10; fasttext test
# The corpora are small, so for timing the training file is repeated K times (the same K copies for both
# tools, ~--docs documents) and the test file likewise (~--test-docs); a run is then a few seconds. The
# accuracy of those timed models is reported, and also the accuracy of E epochs on the original training
# file (x1). documents/s = documents x epochs / seconds. Each configuration runs --reps times,
# interleaved with the others; the best is kept. Train: whole process wall clock (/usr/bin/time: reading
# the input, building the model, writing it) is the primary figure; tributary's own clock (its training
# loop, printed on stderr) is given too. Prediction: (eval of the repeated test file) - (eval of a
# 1-document file), which removes process start and model load, for both tools.
#
# Same tokens. fastText splits on whitespace and tributary tokenizes text itself (NFKC_Casefold, runs of
# letters/digits, docs/tokenizer.md). bench/tokenize_for_fasttext.py applies tributary's rules (a Python
# port) to each TSV and writes (a) the fastText file `__label__<label> tok tok ...` and (b) a TSV whose
# text is those tokens joined by single spaces; tributary converts (b), and every token tokenizes to
# itself, so both tools read literally the same tokens. Before measuring, the script checks against
# tributary's own tokenizer, and stops if any check fails:
#   1. the vocabulary of the RAW training TSV converted by tributary (listed with `topics --json` of a
#      one-component multinomial-mixture) is exactly the set of distinct tokens in the fastText file;
#   2. the converted pre-tokenized TSV has the same number of terms;
#   3. a multinomial model trained (1 pass, no shuffle) on the raw stream and on the pre-tokenized stream
#      has the same statistics digest (`inspect`: stats_digest), i.e. every document has the same
#      term counts;
#   4. fastText's dictionary has that many words + 1 (its end-of-line token </s>).
#
# Usage: bench/peers_real.sh [--bin build/bin/tributary] [--corpora "fortunes bible"] [--docs 500000]
#                            [--test-docs 500000] [--epochs 5] [--reps 3] [--no-dim10] [--work DIR]
#                            [--no-install]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
BIN=${TRIBUTARY_BIN:-$REPO/build/bin/tributary}
CORPORA="fortunes bible"
DOCS=500000
TEST_DOCS=500000
EPOCHS=5
REPS=3
DIM10=1
WORK=${TMPDIR:-/tmp}/tributary-bench-real
INSTALL=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --corpora) CORPORA=$2; shift 2 ;;
    --docs) DOCS=$2; shift 2 ;;
    --test-docs) TEST_DOCS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --no-dim10) DIM10=0; shift ;;
    --work) WORK=$2; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "peers_real.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "peers_real.sh: no program at $BIN (build it or pass --bin)" >&2; exit 1; }
mkdir -p "$WORK"
export LC_ALL=C
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# ---- tools -------------------------------------------------------------------
need=()
command -v fasttext >/dev/null 2>&1 || need+=(fasttext)
[ -x /usr/bin/time ] || need+=(time)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ]; then
    echo "installing ${need[*]} with apt-get" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
  else
    echo "peers_real.sh: missing ${need[*]} (apt-get install ${need[*]})" >&2; exit 1
  fi
fi

# timed CMD...: runs CMD, stdout/stderr to $WORK/last.out/.err; sets WALL and CPU (user + sys seconds).
timed() {
  /usr/bin/time -o "$WORK/last.time" -f "%e %U %S" "$@" >"$WORK/last.out" 2>"$WORK/last.err" || {
    echo "FAILED: $*" >&2; cat "$WORK/last.err" >&2; exit 1; }
  read -r WALL U S <"$WORK/last.time"
  CPU=$(awk -v u="$U" -v s="$S" 'BEGIN { printf "%.2f", u + s }')
}
rate() { awk -v n="$1" -v t="$2" 'BEGIN { if (t > 0) printf "%.0f", n / t; else print "inf" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a != "-") printf "%.2f", a / b; else print "-" }'; }
minf() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 < a + 0) print b; else print a }'; }
maxf() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 > a + 0) print b; else print a }'; }
repeat_file() {  # repeat_file SRC K DST
  local i; : >"$3.tmp"
  for ((i = 0; i < $2; i++)); do cat "$1" >>"$3.tmp"; done
  mv "$3.tmp" "$3"
}
die() { echo "peers_real.sh: $*" >&2; exit 1; }

# ---- machine -------------------------------------------------------------------
lscpu_field() { lscpu | awk -F: -v k="$1" '$1 == k { sub(/^[ \t]+/, "", $2); print $2 }'; }
echo "# Tributary vs fastText on real short documents (one thread each, $EPOCHS epochs)"
echo
echo "date      $(date '+%Y-%m-%d %H:%M:%S %Z')"
echo "machine   $(lscpu_field 'Model name'); $(lscpu_field 'CPU(s)') CPUs ($(lscpu_field 'Core(s) per socket') core(s)/socket, $(lscpu_field 'Thread(s) per core') thread(s)/core); L2 $(lscpu_field 'L2 cache'), L3 $(lscpu_field 'L3 cache'); hypervisor $(lscpu_field 'Hypervisor vendor')"
echo "source    $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo ?)$(git -C "$REPO" status --porcelain 2>/dev/null | grep -q . && echo ' (+ uncommitted changes)'); binary $BIN ($(date -r "$BIN" '+%Y-%m-%d %H:%M'), $("$BIN" --version 2>/dev/null | head -1))"
echo "tools     fasttext $(dpkg-query -W -f='${Version}' fasttext 2>/dev/null || echo '?')"
echo "settings  --docs $DOCS --test-docs $TEST_DOCS --epochs $EPOCHS --reps $REPS (best of $REPS, interleaved)"
echo "load avg  $(cut -d' ' -f1-3 /proc/loadavg) (start)"

TABLE=$WORK/table.md
: >"$TABLE"
RATIOS=$WORK/ratios.md
: >"$RATIOS"
LOADS=""

for corpus in $CORPORA; do
  d=$WORK/$corpus
  mkdir -p "$d"
  echo
  echo "## $corpus"
  # ---- data ----------------------------------------------------------------
  case "$corpus" in
    fortunes) "$PY" "$REPO/scripts/fortunes_to_tsv.py" --train "$d/train.tsv" --test "$d/test.tsv" 2>"$d/split.log" ;;
    bible) "$PY" "$REPO/scripts/bible_to_tsv.py" --verses 1 --train "$d/train.tsv" --test "$d/test.tsv" 2>"$d/split.log" ;;
    *) die "unknown corpus $corpus (fortunes or bible)" ;;
  esac
  for s in train test; do
    "$PY" "$HERE/tokenize_for_fasttext.py" --in "$d/$s.tsv" --tsv-out "$d/$s.tok.tsv" --ft-out "$d/$s.ft" 2>"$d/$s.tok.stats"
  done
  ntrain=$(sed -n 's/^documents=\([0-9]*\).*/\1/p' "$d/train.tok.stats")
  ntest=$(sed -n 's/^documents=\([0-9]*\).*/\1/p' "$d/test.tok.stats")
  vocab=$(sed -n 's/.*distinct_tokens=\([0-9]*\).*/\1/p' "$d/train.tok.stats")
  ntok=$(sed -n 's/.* tokens=\([0-9]*\).*/\1/p' "$d/train.tok.stats")
  nclass=$(cut -f1 "$d/train.tsv" | sort -u | wc -l)
  echo "data      $ntrain train / $ntest test documents, $nclass classes, $vocab distinct training tokens, $(awk -v a="$ntok" -v b="$ntrain" 'BEGIN { printf "%.1f", a / b }') tokens per training document"

  # ---- same-token checks ---------------------------------------------------
  "$BIN" convert -q --format tsv --in "$d/train.tsv" --out "$d/raw.pb"
  "$BIN" convert --format tsv --in "$d/train.tok.tsv" --out "$d/train.pb" 2>"$d/convert.log"
  "$BIN" convert -q --format tsv --in "$d/test.tok.tsv" --out "$d/test.pb"
  terms_tok=$(sed -n 's/.*, \([0-9]*\) terms,.*/\1/p' "$d/convert.log")
  "$BIN" train -q --family multinomial-mixture --components 1 --loss nll --select off --in "$d/raw.pb" --out "$d/vocab.trib"
  "$BIN" topics --model "$d/vocab.trib" --top 1000000000 --json |
    "$PY" -c 'import json, sys; [print(t["term"]) for t in json.load(sys.stdin)["topics"][0]["terms"]]' | sort >"$d/vocab.tributary"
  cut -d' ' -f2- "$d/train.ft" | tr ' ' '\n' | grep -v '^$' | sort -u >"$d/vocab.fasttext"
  cmp -s "$d/vocab.tributary" "$d/vocab.fasttext" ||
    die "$corpus: tributary's vocabulary of the raw TSV ($(wc -l <"$d/vocab.tributary") terms) differs from the fastText tokens ($(wc -l <"$d/vocab.fasttext")): diff $d/vocab.tributary $d/vocab.fasttext"
  [ "$terms_tok" = "$vocab" ] || die "$corpus: the pre-tokenized TSV converts to $terms_tok terms, not $vocab"
  digests=""
  for s in raw train; do
    "$BIN" train -q --family multinomial --loss ncll --select off --epochs 1 --no-shuffle --in "$d/$s.pb" --out "$d/digest_$s.trib"
    digests="$digests $("$BIN" inspect --json --model "$d/digest_$s.trib" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["stats_digest"])')"
  done
  read -r dg_raw dg_tok <<<"$digests"
  [ "$dg_raw" = "$dg_tok" ] || die "$corpus: models of the raw and pre-tokenized streams differ ($dg_raw, $dg_tok)"

  # ---- accuracy of E epochs on the original training file (x1) --------------
  for loss in ncll hinge; do
    "$BIN" train -q --family multinomial --loss "$loss" --select off --epochs "$EPOCHS" --in "$d/train.pb" --out "$d/x1_$loss.trib"
    "$BIN" eval --json --model "$d/x1_$loss.trib" --in "$d/test.pb" >"$d/x1_$loss.json"
  done
  dims="100"; [ "$DIM10" = 1 ] && dims="100 10"
  for dim in $dims; do
    fasttext supervised -input "$d/train.ft" -output "$d/x1_ft$dim" -thread 1 -epoch "$EPOCHS" -dim "$dim" >"$d/x1_ft$dim.log" 2>&1
    ftwords=$(tr '\r' '\n' <"$d/x1_ft$dim.log" | sed -n 's/^Number of words: *\([0-9]*\).*/\1/p' | tail -1)
    [ "$ftwords" = "$((vocab + 1))" ] || die "$corpus: fastText's dictionary has $ftwords words, expected $vocab + 1 (</s>)"
    fasttext test "$d/x1_ft$dim.bin" "$d/test.ft" >"$d/x1_ft$dim.test"
  done
  echo "same tokens: checked (vocabulary sets equal, $vocab terms; statistics digests equal $dg_raw; fastText $((vocab + 1)) words incl. </s>)"

  # ---- repeated files for timing ---------------------------------------------
  K=$(( (DOCS + ntrain - 1) / ntrain ))
  KT=$(( (TEST_DOCS + ntest - 1) / ntest ))
  repeat_file "$d/train.tok.tsv" "$K" "$d/rep.tsv"
  repeat_file "$d/train.ft" "$K" "$d/rep.ft"
  repeat_file "$d/test.tok.tsv" "$KT" "$d/test_rep.tsv"
  repeat_file "$d/test.ft" "$KT" "$d/test_rep.ft"
  head -n 1 "$d/test.tok.tsv" >"$d/one.tsv"
  head -n 1 "$d/test.ft" >"$d/one.ft"
  timed "$BIN" convert --format tsv --in "$d/rep.tsv" --out "$d/rep.pb"
  conv_wall=$WALL
  "$BIN" convert -q --format tsv --in "$d/test_rep.tsv" --out "$d/test_rep.pb"
  "$BIN" convert -q --format tsv --in "$d/one.tsv" --out "$d/one.pb"
  NREP=$((ntrain * K)); NTREP=$((ntest * KT)); UPD=$((NREP * EPOCHS))
  echo "timing    training file x$K = $NREP documents x $EPOCHS epochs = $UPD document updates; test file x$KT = $NTREP documents; tributary convert of the training file: $conv_wall s ($(rate "$NREP" "$conv_wall") documents/s, not included below)"

  # ---- timed runs, interleaved -------------------------------------------------
  declare -A best_train=() best_cpu=() best_prog=() best_eval=() best_one=() acc=()
  for ((r = 1; r <= REPS; r++)); do
    LOADS="$LOADS $(cut -d' ' -f1 /proc/loadavg)"
    for loss in ncll hinge; do
      timed "$BIN" train --family multinomial --loss "$loss" --select off --epochs "$EPOCHS" --in "$d/rep.pb" --out "$d/t_$loss.trib"
      best_train[t_$loss]=$(minf "${best_train[t_$loss]:-}" "$WALL")
      best_cpu[t_$loss]=$(minf "${best_cpu[t_$loss]:-}" "$CPU")
      prog=$(tr '\r' '\n' <"$WORK/last.err" | sed -n 's/.*(\([0-9.e+]*\) documents\/s).*/\1/p' | tail -1 | awk '{ printf "%.0f", $1 }')
      best_prog[t_$loss]=$(maxf "${best_prog[t_$loss]:-}" "$prog")
    done
    for dim in $dims; do
      timed fasttext supervised -input "$d/rep.ft" -output "$d/ft$dim" -thread 1 -epoch "$EPOCHS" -dim "$dim"
      best_train[ft$dim]=$(minf "${best_train[ft$dim]:-}" "$WALL")
      best_cpu[ft$dim]=$(minf "${best_cpu[ft$dim]:-}" "$CPU")
    done
    for loss in ncll hinge; do
      timed "$BIN" eval --json --model "$d/t_$loss.trib" --in "$d/test_rep.pb"
      best_eval[t_$loss]=$(minf "${best_eval[t_$loss]:-}" "$WALL")
      acc[t_$loss]=$(sed -n 's/.*"accuracy":\([0-9.]*\).*/\1/p' "$WORK/last.out")
      timed "$BIN" eval --json --model "$d/t_$loss.trib" --in "$d/one.pb"
      best_one[t_$loss]=$(minf "${best_one[t_$loss]:-}" "$WALL")
    done
    for dim in $dims; do
      timed fasttext test "$d/ft$dim.bin" "$d/test_rep.ft"
      best_eval[ft$dim]=$(minf "${best_eval[ft$dim]:-}" "$WALL")
      acc[ft$dim]=$(awk '/^P@1/ { print $2 }' "$WORK/last.out")
      timed fasttext test "$d/ft$dim.bin" "$d/one.ft"
      best_one[ft$dim]=$(minf "${best_one[ft$dim]:-}" "$WALL")
    done
  done

  # ---- rows --------------------------------------------------------------------
  declare -A train_rate=() cpu_rate=() eval_rate=()
  row() {  # key, name, x1 accuracy
    local k=$1 name=$2 acc1=$3 prog="-" secs
    train_rate[$k]=$(rate "$UPD" "${best_train[$k]}")
    cpu_rate[$k]=$(rate "$UPD" "${best_cpu[$k]}")
    secs=$(awk -v a="${best_eval[$k]}" -v b="${best_one[$k]}" 'BEGIN { printf "%.2f", a - b }')
    eval_rate[$k]=$(rate "$((NTREP - 1))" "$secs")
    [ -n "${best_prog[$k]:-}" ] && prog=${best_prog[$k]}
    printf '| %s | %s | %s s | %s | %s | %s | %s s | %s | %s | %s |\n' "$corpus" "$name" "${best_train[$k]}" \
      "${train_rate[$k]}" "${cpu_rate[$k]}" "$prog" "$secs" "${eval_rate[$k]}" \
      "$(awk -v a="${acc[$k]}" 'BEGIN { printf "%.4f", a }')" "$(awk -v a="$acc1" 'BEGIN { printf "%.4f", a }')" | tee -a "$TABLE"
  }
  echo
  echo "| corpus | learner | train s | train docs/s (process wall) | train docs/s (process CPU) | train docs/s (tributary's clock) | predict s (minus load) | predict docs/s | accuracy (timed models, x$K) | accuracy (x1, $EPOCHS epochs) |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for loss in ncll hinge; do
    row "t_$loss" "tributary multinomial $loss" "$(sed -n 's/.*"accuracy":\([0-9.]*\).*/\1/p' "$d/x1_$loss.json")"
  done
  for dim in $dims; do
    row "ft$dim" "fasttext dim $dim" "$(awk '/^P@1/ { print $2 }' "$d/x1_ft$dim.test")"
  done
  echo
  echo "ratios tributary / fastText (documents/s; > 1: tributary faster):"
  for loss in ncll hinge; do
    for dim in $dims; do
      printf '| %s | tributary %s / fasttext dim %s | %s | %s | %s |\n' "$corpus" "$loss" "$dim" \
        "$(ratio "${train_rate[t_$loss]}" "${train_rate[ft$dim]}")" "$(ratio "${cpu_rate[t_$loss]}" "${cpu_rate[ft$dim]}")" \
        "$(ratio "${eval_rate[t_$loss]}" "${eval_rate[ft$dim]}")" | tee -a "$RATIOS"
    done
  done
  unset best_train best_cpu best_prog best_eval best_one acc train_rate cpu_rate eval_rate
done
echo
echo "load avg  $(cut -d' ' -f1-3 /proc/loadavg) (end); 1-minute load at the start of each repetition:$LOADS"
echo
echo "## all corpora"
echo
echo "| corpus | learner | train s | train docs/s (process wall) | train docs/s (process CPU) | train docs/s (tributary's clock) | predict s (minus load) | predict docs/s | accuracy (timed models) | accuracy (x1, $EPOCHS epochs) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
cat "$TABLE"
echo
echo "| corpus | ratio tributary / fastText (documents/s) | train (process wall) | train (process CPU) | predict (wall minus load) |"
echo "|---|---|---:|---:|---:|"
cat "$RATIOS"
