#!/usr/bin/env bash
# Latent generalized Dirichlet allocation by EP (family lgda; thesis ch. 4)
# against LDA (family lda: its default CVB0 and the mean-field VI the thesis
# compares with) on real corpora from Debian packages, the shapes of the
# thesis's Figure 4 and Table 7:
#   bible10    the KJV (bible-kjv), 10-verse chunks, 10 genres
#   prophets   bible10's two related genres, major- vs minor-prophets (the
#              thesis's money-fx vs interest: a binary task of related categories)
#   fortunes   Debian's fortunes, 39 categories
# Figure 4 (evidence against iterations): the held-out documents' mean
# log-evidence estimate after E passes over the training file (each E a run
# of its own; the vocabulary is the training file's, so every row scores the
# same tokens): LGDA's EP estimate (eq. 93) and LDA-VI's lower bound (ELBO),
# as the thesis plots them (an estimate against a bound: the bound is below
# log p(x) by construction), plus held-out document-completion perplexity,
# which is comparable across all models.
# Table 7 (topic proportions as features): each model's proportions of the
# training and test documents (tributary infer) feed a logistic regression
# (LIBLINEAR -s 0, C chosen by its own 5-fold cross-validation on the training
# documents: -C); accuracy on the test file. The thesis's LASSO and Reuters
# split are not available; the shape (LGDA-EP vs LDA at K = 15 and 30; binary
# related classes at K = 15) is. Every model runs with the program's defaults
# but its number of topics. CPU seconds of train on core 0.
#   bash bench/lgda_real.sh [build-dir]
# Environment: PASSES [1 2 4 8], KS [15 30], CORPORA [bible10 fortunes].
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
PASSES=${PASSES:-1 2 4 8}
KS=${KS:-15 30}
CORPORA=${CORPORA:-bible10 fortunes}
T=$BUILD/bin/tributary
PY=/usr/bin/python3
command -v bible >/dev/null || apt-get install -y bible-kjv
[ -d /usr/share/games/fortunes ] || apt-get install -y fortunes
command -v liblinear-train >/dev/null || apt-get install -y liblinear-tools
W=${WORK:-$(mktemp -d)}
[ -n "${WORK:-}" ] || trap 'rm -rf "$W"' EXIT

cpu_train() {  # CPU seconds of one `train` on core 0
  $PY - "$@" <<'EOF'
import resource, subprocess, sys
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
subprocess.run(["taskset", "-c", "0"] + sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.2f" % ((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)))
EOF
}
evalj() { "$T" eval --model "$1" --in "$2" --json | $PY -c 'import json,sys; j = json.load(sys.stdin); print("%.2f %.1f" % (j["log_likelihood_per_document"], j["perplexity"]))'; }

# Proportions (tributary infer, in input order) + labels (the TSV's first
# column) -> svmlight; then LIBLINEAR; prints test accuracy.
classify() {  # model train.tsv train.pb test.tsv test.pb
  local m=$1
  "$T" infer --model "$m" --in "$3" --out "$W/tr.jsonl"
  "$T" infer --model "$m" --in "$5" --out "$W/te.jsonl"
  $PY - "$2" "$W/tr.jsonl" "$W/tr.svm" "$4" "$W/te.jsonl" "$W/te.svm" <<'EOF'
import json, sys
labels = {}
for tsv, js, out in ((sys.argv[1], sys.argv[2], sys.argv[3]), (sys.argv[4], sys.argv[5], sys.argv[6])):
    ys = [l.split("\t", 1)[0] for l in open(tsv)]
    rows = [json.loads(l) for l in open(js)]
    assert len(ys) == len(rows), (tsv, len(ys), len(rows))
    with open(out, "w") as f:
        for y, r in zip(ys, rows):
            c = labels.setdefault(y, len(labels) + 1)
            f.write("%d %s\n" % (c, " ".join("%d:%.6g" % (i + 1, p) for i, p in enumerate(r["proportions"]))))
EOF
  local c
  c=$(liblinear-train -s 0 -C "$W/tr.svm" 2>/dev/null | sed -n 's/^Best C = \([^ ]*\).*/\1/p' | tail -1)
  liblinear-train -q -s 0 -c "${c:-1}" "$W/tr.svm" "$W/lr.model"
  liblinear-predict "$W/te.svm" "$W/lr.model" "$W/lr.pred" | sed -n 's/^Accuracy = \([0-9.]*\)%.*/\1/p'
}

models=("lgda|LGDA-EP (defaults)|--family lgda"
        "lgdal|LGDA-EP, learn_prior=1 (eq. 95)|--family lgda --opt learn_prior=1"
        "ldavi|LDA, VI (the thesis's baseline)|--family lda --opt inference=vi"
        "lda|LDA, CVB0 (lda's default)|--family lda")

for corpus in $CORPORA; do
  d=$W/$corpus
  mkdir -p "$d"
  case $corpus in
    bible10) $PY "$ROOT/scripts/bible_to_tsv.py" --verses 10 --train "$d/train.tsv" --test "$d/test.tsv" 2>/dev/null ;;
    fortunes) $PY "$ROOT/scripts/fortunes_to_tsv.py" --train "$d/train.tsv" --test "$d/test.tsv" 2>/dev/null ;;
    *) echo "unknown corpus $corpus" >&2; exit 2 ;;
  esac
  tasks=("$corpus")
  if [ "$corpus" = bible10 ]; then
    mkdir -p "$W/prophets"
    grep -E '^(major|minor)-prophets	' "$d/train.tsv" >"$W/prophets/train.tsv"
    grep -E '^(major|minor)-prophets	' "$d/test.tsv" >"$W/prophets/test.tsv"
    tasks+=(prophets)
  fi
  for task in "${tasks[@]}"; do
    for f in train test; do "$T" convert --format tsv --in "$W/$task/$f.tsv" --out "$W/$task/$f.pb" --quiet; done
  done
  n=$(wc -l <"$d/train.tsv")
  echo
  echo "### $corpus: $n training documents, $(wc -l <"$d/test.tsv") test documents"
  echo
  echo "Figure 4's shape: held-out mean log-evidence estimate (LGDA: EP, eq. 93; LDA-VI: the ELBO) / document-completion perplexity after E passes over the training file (shuffled), K = ${KS%% *}"
  echo
  echo "| passes | LGDA-EP evidence | LGDA-EP perplexity | LDA-VI ELBO | LDA-VI perplexity | LDA-CVB0 perplexity |"
  echo "|---|---|---|---|---|---|"
  k=${KS%% *}
  for e in $PASSES; do
    row="| $e"
    for spec in "--family lgda" "--family lda --opt inference=vi" "--family lda"; do
      # shellcheck disable=SC2086
      "$T" train --quiet $spec --loss nll --topics "$k" --epochs "$e" --in "$d/train.pb" --out "$d/p.trib"
      read -r ll pp <<<"$(evalj "$d/p.trib" "$d/test.pb")"
      case $spec in *inference=vi*|*lgda*) row="$row | $ll | $pp" ;; *) row="$row | $pp" ;; esac
    done
    echo "$row |"
  done
  echo
  echo "Table 7's shape: test accuracy (%) of a logistic regression on the topic proportions; train CPU s in brackets"
  echo
  header="| task | K"
  for mdl in "${models[@]}"; do name=${mdl#*|}; header="$header | ${name%%|*}"; done
  echo "$header |"
  echo "|---|---|---|---|---|---|"
  for task in "${tasks[@]}"; do
    ks=$KS
    [ "$task" = prophets ] && ks=${KS%% *}
    for k in $ks; do
      row="| $task | $k"
      for mdl in "${models[@]}"; do
        spec=${mdl##*|}
        # shellcheck disable=SC2086
        sec=$(cpu_train "$T" train --quiet $spec --loss nll --topics "$k" --in "$W/$task/train.pb" --out "$W/$task/m.trib")
        acc=$(classify "$W/$task/m.trib" "$W/$task/train.tsv" "$W/$task/train.pb" "$W/$task/test.tsv" "$W/$task/test.pb")
        row="$row | $acc ($sec s)"
      done
      echo "$row |"
    done
  done
done
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); tributary $(git -C "$ROOT" rev-parse --short HEAD)"
