#!/usr/bin/env bash
# Unsupervised 2-component clustering of real text by SEP / EP count mixtures
# against the maximum-likelihood mixture of multinomials (bench/SEP_RESULTS.md).
#
#   bench/sep_real_corpus.sh [BUILD_DIR]            BUILD_DIR default: build
#
# Corpora (Debian packages, nothing is downloaded):
#   bible     King James Bible chapters labelled OT / NT
#             (scripts/bible_testaments.py; 1,189 chapters, 260 NT)
#   fortunes  two categories of Debian fortunes (FORTUNE_CATS, default
#             "computers politics"; scripts/fortunes_to_tsv.py)
# For each corpus, model and seed:
#   same    train on every document, evaluate on the same documents (the
#           thesis's protocol for unsupervised clustering)
#   heldout train on a stratified 80% split, evaluate on the other 20%
# `tributary eval --json` maps clusters to labels by the Hungarian method:
# accuracy, macro precision, macro recall. The table gives mean [min, max]
# over the seeds, mean training wall time (train only), and how often the
# model was degenerate: its smaller cluster holds < 5% of the documents. The majority-class baseline is
# printed under each table. Documents left without terms (a fortune of
# punctuation only, or of stop words only) are skipped by train and eval
# (--skip-bad).
#
# Environment:
#   CORPORA="bible fortunes"  SEEDS="1 2 3"  STOP_WORDS=0|1 (convert --stop-words)
#   MODELS   newline-separated "name|train arguments" (default: the four
#            models below); EXTRA_MODELS is appended to them
#   KEEP=1   keep the work directory (printed)
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$HERE/$BUILD ;; esac
T=$BUILD/bin/tributary
[ -x "$T" ] || { echo "no program at $T (build tributary_cli and the mixture plugins first)" >&2; exit 1; }
CORPORA=${CORPORA:-bible fortunes}
SEEDS=${SEEDS:-1 2 3}
STOP_WORDS=${STOP_WORDS:-0}
FORTUNE_CATS=${FORTUNE_CATS:-computers politics}
DEFAULT_MODELS="SEP emsd-mixture|--engine sep --family emsd-mixture --components 2
EP edcm-mixture|--engine ep --family edcm-mixture --components 2
SEP edcm-mixture|--engine sep --family edcm-mixture --components 2
ML multinomial-mixture (5 epochs)|--family multinomial-mixture --loss nll --components 2 --epochs 5"
MODELS=${MODELS:-$DEFAULT_MODELS}
[ -z "${EXTRA_MODELS:-}" ] || MODELS="$MODELS"$'\n'"$EXTRA_MODELS"
W=$(mktemp -d /tmp/sep_real_corpus.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "work directory: $W" >&2; else trap 'rm -rf "$W"' EXIT; fi
CONV=(--format tsv)
[ "$STOP_WORDS" = 1 ] && CONV+=(--stop-words)

prepare() {  # prepare CORPUS -> $W/CORPUS/{all,train,test}.pb
  local c=$1 d=$W/$1
  mkdir -p "$d"
  case $c in
    bible)
      python3 "$HERE/scripts/bible_testaments.py" --out "$d/all.tsv" --books "$d/books.txt" --train "$d/train.tsv" \
        --test "$d/test.tsv" --seed 1 2>/dev/null ;;
    fortunes)
      python3 "$HERE/scripts/fortunes_to_tsv.py" --train "$d/ftrain.tsv" --test "$d/ftest.tsv" --seed 1 2>/dev/null
      local pat
      pat=$(echo "$FORTUNE_CATS" | tr ' ' '\n' | awk 'NF {printf "%s^%s$", (n++ ? "|" : ""), $1}')
      awk -F'\t' -v p="$pat" '$1 ~ p' "$d/ftrain.tsv" > "$d/train.tsv"
      awk -F'\t' -v p="$pat" '$1 ~ p' "$d/ftest.tsv" > "$d/test.tsv"
      cat "$d/train.tsv" "$d/test.tsv" > "$d/all.tsv" ;;
    *) echo "unknown corpus $c" >&2; exit 2 ;;
  esac
  for s in all train test; do
    "$T" convert "${CONV[@]}" --in "$d/$s.tsv" --out "$d/$s.pb" 2>/dev/null
  done
}

RESULTS=$W/results.jsonl
: > "$RESULTS"
for c in $CORPORA; do
  prepare "$c"
  while IFS='|' read -r name args; do
    [ -n "$name" ] || continue
    for seed in $SEEDS; do
      for proto in same heldout; do
        if [ $proto = same ]; then tr=$W/$c/all.pb; te=$W/$c/all.pb; else tr=$W/$c/train.pb; te=$W/$c/test.pb; fi
        m=$W/$c/model.trib
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086
        if ! "$T" train $args --seed "$seed" --skip-bad --quiet --in "$tr" --out "$m" 2> "$W/err.txt"; then
          echo "train failed: $c / $name / seed $seed / $proto: $(head -c 300 "$W/err.txt")" >&2
          continue
        fi
        t1=$(date +%s.%N)
        if ! "$T" eval --model "$m" --in "$te" --skip-bad --json > "$W/eval.json" 2> "$W/err.txt"; then
          echo "eval failed: $c / $name / seed $seed / $proto: $(head -c 300 "$W/err.txt")" >&2
          continue
        fi
        if [ $proto = same ] && [ -f "$W/$c/books.txt" ]; then  # clusters by book (the Bible)
          "$T" predict --model "$m" --in "$te" --skip-bad 2>/dev/null |
            python3 -c 'import json, sys; print(json.dumps([json.loads(l)["predicted"] for l in sys.stdin]))' \
            > "$W/$c/pred-$(echo "$name" | md5sum | cut -c1-8)-$seed.json"
        fi
        python3 - "$W/eval.json" "$c" "$name" "$seed" "$proto" "$(echo "$t1 - $t0" | bc -l)" >> "$RESULTS" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(json.dumps({"corpus": sys.argv[2], "model": sys.argv[3], "seed": int(sys.argv[4]), "proto": sys.argv[5],
                  "secs": float(sys.argv[6]), "accuracy": j["accuracy"], "precision": j["precision"],
                  "recall": j["recall"], "sizes": j["cluster_sizes"],
                  # SEP families: approximate log evidence per document (eval's log E_q[p(x | theta)]);
                  # others (ML mixture): the plug-in log-likelihood per document.
                  "evidence": j.get("log_evidence_per_document") or j.get("log_likelihood_per_document"),
                  "evidence_kind": "evidence" if j.get("log_evidence_per_document") is not None else "plug-in"}))
EOF
      done
    done
  done <<< "$MODELS"
done

python3 - "$RESULTS" "$W" <<'EOF'
import collections, json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
work = sys.argv[2]
def stat(v):
    return f"{100 * sum(v) / len(v):.1f} [{100 * min(v):.1f}, {100 * max(v):.1f}]"
for corpus in dict.fromkeys(r["corpus"] for r in rows):
    for proto in ("same", "heldout"):
        sel = [r for r in rows if r["corpus"] == corpus and r["proto"] == proto]
        if not sel:
            continue
        what = "train = evaluate on all documents" if proto == "same" else "train on 80%, evaluate on the held-out 20%"
        print(f"\n**{corpus}**, {what} ({len(set(r['seed'] for r in sel))} seeds)\n")
        print("| model | accuracy % | precision % | recall % | train s | degenerate (< 5%) | cluster sizes (first seed) "
              "| log p / doc | best-evidence seed: accuracy / precision / recall % |")
        print("|---|---|---|---|---:|---:|---|---:|---|")
        by = collections.OrderedDict()
        for r in sel:
            by.setdefault(r["model"], []).append(r)
        for model, rs in by.items():
            degenerate = sum(1 for r in rs if min(r["sizes"]) < 0.05 * sum(r["sizes"]))
            # Model selection without labels: the seed whose model gives the evaluated documents the
            # highest approximate log evidence (plug-in log-likelihood for the ML mixture).
            best = max(rs, key=lambda r: r["evidence"] if r["evidence"] is not None else float("-inf"))
            ev = [r["evidence"] for r in rs if r["evidence"] is not None]
            evs = f"{sum(ev) / len(ev):.2f} ({rs[0]['evidence_kind']})" if ev else "-"
            print(f"| {model} | {stat([r['accuracy'] for r in rs])} | {stat([r['precision'] for r in rs])} | "
                  f"{stat([r['recall'] for r in rs])} | {sum(r['secs'] for r in rs) / len(rs):.2f} | "
                  f"{degenerate}/{len(rs)} | {rs[0]['sizes']} | {evs} | seed {best['seed']}: "
                  f"{100 * best['accuracy']:.1f} / {100 * best['precision']:.1f} / {100 * best['recall']:.1f} |")
        if sel and len({r["seed"] for r in sel}) > 1:
            print("\nper seed (accuracy %, log p / doc):\n")
            for model, rs in by.items():
                cells = ", ".join(f"{r['seed']}: {100 * r['accuracy']:.1f} / {r['evidence']:.2f}"
                                  for r in sorted(rs, key=lambda r: r["seed"]) if r["evidence"] is not None)
                print(f"* {model}: {cells}")
        # The Bible: where the best-evidence run of each model puts each group of books.
        books = f"{work}/{corpus}/books.txt"
        if proto == "same" and os.path.exists(books):
            import hashlib
            book = [l.strip() for l in open(books)]
            groups = [("Law", "Ge Exo Lev Num Deu"), ("History", "Josh Jdgs Ruth 1Sm 2Sm 1Ki 2Ki 1Chr 2Chr Ezra Neh Est"),
                      ("Poetry", "Job Psa Prv Eccl SSol"), ("Major prophets", "Isa Jer Lam Eze Dan"),
                      ("Minor prophets", "Hos Joel Amos Obad Jonah Mic Nahum Hab Zep Hag Zec Mal"),
                      ("Gospels, Acts", "Mat Mark Luke John Acts"),
                      ("Epistles", "Rom 1Cor 2Cor Gal Eph Phi Col 1Th 2Th 1Tim 2Tim Titus Phmn Heb Jas 1Pet 2Pet 1Jn 2Jn 3Jn Jude"),
                      ("Revelation", "Rev")]
            print("\nchapters per cluster by group of books, best-evidence seed of each model "
                  "(cluster 0 / cluster 1; the OT groups are the first five):\n")
            print("| model (seed) | " + " | ".join(g for g, _ in groups) + " |")
            print("|---|" + "---:|" * len(groups))
            for model, rs in by.items():
                best = max(rs, key=lambda r: r["evidence"] if r["evidence"] is not None else float("-inf"))
                h = hashlib.md5((model + "\n").encode()).hexdigest()[:8]
                pf = f"{work}/{corpus}/pred-{h}-{best['seed']}.json"
                if not os.path.exists(pf):
                    continue
                pred = json.load(open(pf))
                if len(pred) != len(book):
                    continue  # documents skipped: the lines no longer match
                names = sorted(set(pred))
                cells = []
                for _, members in groups:
                    ms = set(members.split())
                    cnt = collections.Counter(p for p, b in zip(pred, book) if b in ms)
                    cells.append(" / ".join(str(cnt[n]) for n in names))
                print(f"| {model} ({best['seed']}) | " + " | ".join(cells) + " |")
        # Majority baseline on the evaluated documents.
        path = f"{work}/{corpus}/{'all' if proto == 'same' else 'test'}.tsv"
        labels = collections.Counter(l.split("\t", 1)[0] for l in open(path) if "\t" in l)
        top, n = labels.most_common(1)[0]
        total = sum(labels.values())
        print(f"\nmajority class ({top}: {n} of {total}, classes {dict(labels)}): accuracy {100 * n / total:.1f} %, "
              f"macro precision {100 * n / total / len(labels):.1f} %, macro recall {100 / len(labels):.1f} %")
EOF
