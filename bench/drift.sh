#!/usr/bin/env bash
# Drift benchmark (issue 39): one pass over real corpora whose labels or
# classes change at known points, through `tributary prequential --in -` (a
# pipe, program defaults: the live learner) and `--select off` (today's
# single learner), against scikit-learn's SGDClassifier(log_loss),
# PassiveAggressiveClassifier and MultinomialNB with partial_fit on
# mini-batches of 100 (test-then-train), and LogisticRegression refitted on
# the last 2,000 documents every 500 (an oracle that knows the recent past).
#
#   bench/drift.sh BUILD_DIR [corpus ...]    corpora: bible fortunes (default: both)
#
# Corpora (Debian packages; all documents of the corpus, train and test
# splits together, in one seeded random order):
#   bible     King James Bible, one verse per document, 10 genres (scripts/bible_to_tsv.py --verses 1)
#   fortunes  Debian fortunes, 39 categories (scripts/fortunes_to_tsv.py)
# Streams (bench/drift_streams.py): stationary, swap (a tenth of the classes
# swap labels at the middle), gradual (the same swap mixed in by a sigmoid of
# width 1,000), recurring (swapped at a third, back at two thirds), newclass
# (a fifth of the classes appear at the middle), prior (the second half only
# from the larger half of the classes).
# Nothing is tuned here: every learner runs with its defaults.
# Output: a markdown table on stdout (bench/drift_report.py), runs in
# $WORK/results.jsonl, plots in $WORK/plots/.
# Environment: TRIB_BENCH_DIR  work directory [/tmp/tributary-drift]
set -euo pipefail
usage() { echo "usage: $0 BUILD_DIR [bible|fortunes ...]" >&2; exit 2; }
(($# >= 1)) || usage
HERE=$(cd "$(dirname "$0")/.." && pwd -P)
BUILD=$(cd "$1" && pwd) || usage
shift
CORPORA=("$@")
((${#CORPORA[@]})) || CORPORA=(bible fortunes)
T=$BUILD/bin/tributary
PY=/usr/bin/python3
WORK=${TRIB_BENCH_DIR:-/tmp/tributary-drift}
mkdir -p "$WORK/plots"
: >"$WORK/results.jsonl"
log() { echo "drift: $*" >&2; }
bash "$HERE/scripts/install_deps.sh" --demo >&2
EVERY=500
for corpus in "${CORPORA[@]}"; do
  d=$WORK/$corpus
  mkdir -p "$d"
  case "$corpus" in
    bible) $PY "$HERE/scripts/bible_to_tsv.py" --verses 1 --seed 1 --train "$d/a.tsv" --test "$d/b.tsv" ;;
    fortunes) $PY "$HERE/scripts/fortunes_to_tsv.py" --seed 1 --train "$d/a.tsv" --test "$d/b.tsv" ;;
    *) usage ;;
  esac
  cat "$d/a.tsv" "$d/b.tsv" >"$d/all.tsv"
  for kind in stationary swap gradual recurring newclass prior; do
    info=$($PY "$HERE/bench/drift_streams.py" --in "$d/all.tsv" --kind $kind --seed 1 --out "$d/$kind.tsv" 2>&1)
    "$T" convert -q --format tsv --in "$d/$kind.tsv" --out "$d/$kind.pb"
    for sel in auto off; do
      learner=$([[ $sel == auto ]] && echo "tributary (defaults: live learner)" || echo "tributary --select off")
      start=$(date +%s%N)
      cat "$d/$kind.pb" | "$T" prequential -q --json --select $sel --every $EVERY --in - >"$d/$kind.$sel.json"
      secs=$(( ($(date +%s%N) - start) / 1000000 ))e-3
      $PY - "$d/$kind.$sel.json" "$corpus" "$kind" "$learner" "$info" "$secs" "$EVERY" >>"$WORK/results.jsonl" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
info = json.loads(sys.argv[5])
curve = [p["window_accuracy"] for p in j["curve"]]
alarms = [a for p in j["curve"] for a in p.get("alarms", [])] if "live" in j else None
print(json.dumps({"corpus": sys.argv[2], "kind": sys.argv[3], "learner": sys.argv[4], "every": int(sys.argv[7]),
                  "changes": info["changes"], "documents": j["documents"], "curve": curve, "alarms": alarms,
                  "seconds": float(sys.argv[6]),
                  "served": j.get("live", {}).get("served")}))
PYEOF
    done
    log "$corpus $kind: tributary done; peers"
    $PY "$HERE/bench/drift_peers.py" --in "$d/$kind.tsv" --every $EVERY | $PY -c '
import json, sys
info = json.loads(sys.argv[3])
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"corpus": sys.argv[1], "kind": sys.argv[2], "learner": "sklearn " + r["model"], "every": 500,
                      "changes": info["changes"], "documents": r["documents"], "curve": r["curve"], "alarms": None,
                      "seconds": r["seconds"]}))' "$corpus" "$kind" "$info" >>"$WORK/results.jsonl"
  done
done
$PY "$HERE/bench/drift_report.py" "$WORK/results.jsonl" --plots "$WORK/plots"
log "plots in $WORK/plots"
