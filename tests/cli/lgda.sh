#!/usr/bin/env bash
# Latent generalized Dirichlet allocation (family lgda, EP per document)
# through the command-line program with its defaults: an unlabelled TSV whose
# documents mix four topics of 25 words each (proportions drawn from a
# generalized Dirichlet by its sticks), then train / eval / topics / infer /
# plugins --options:
#  - held-out document-completion perplexity below 80 (a uniform model's: 100;
#    the true model's ~60-70) and within 5 % of lda's (CVB0) on the same stream;
#  - topics lists 4 topics, each one's 10 most probable words from one true topic;
#  - infer prints 4 topic proportions per document that sum to 1;
#  - match=logs (the thesis's eq. 88-89) trains too; bad options are refused naming the option.
# Usage: lgda.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir" <<'EOF'
import random, sys
d = sys.argv[1]
rng = random.Random(3)
words = [["t%dz%d" % (k, i) for i in range(25)] for k in range(4)]
sticks = [(0.8, 2.0), (0.6, 1.0), (1.2, 1.5)]
def doc():
    theta, rest = [], 1.0
    for a, b in sticks:
        v = rng.betavariate(a, b)
        theta.append(rest * v)
        rest *= 1 - v
    theta.append(rest)
    return " ".join(rng.choice(words[rng.choices(range(4), theta)[0]]) for _ in range(50))
for name, n in (("train", 2000), ("test", 300)):
    with open("%s/%s.tsv" % (d, name), "w") as f:
        for _ in range(n):
            f.write("none\t%s\n" % doc())
EOF
$T convert -q --format tsv --no-live --in "$dir/train.tsv" --out "$dir/train.pb"
$T convert -q --format tsv --no-live --in "$dir/test.tsv" --out "$dir/test.pb"
ppl() { $T eval --json --model "$1" --in "$dir/test.pb" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["perplexity"])'; }
$T train -q --family lda --loss nll --topics 4 --in "$dir/train.pb" --out "$dir/lda.trib"
$T train -q --family lgda --loss nll --topics 4 --in "$dir/train.pb" --out "$dir/m.trib"
p=$(ppl "$dir/m.trib")
q=$(ppl "$dir/lda.trib")
echo "held-out perplexity: lgda $p, lda $q"
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$p') < 80 and float('$p') <= 1.05 * float('$q') else 1)" ||
  { echo "FAIL: lgda perplexity $p (lda $q)" >&2; exit 1; }
$T topics --json --model "$dir/m.trib" | /usr/bin/python3 -c '
import json, sys
topics = json.load(sys.stdin)["topics"]
assert len(topics) == 4, len(topics)
for t in topics:
    terms = [x["term"] if isinstance(x, dict) else x[0] for x in t["terms"]][:10]
    owners = {w.split("z")[0] for w in terms}
    assert len(owners) == 1, terms
print("topics: 4, each one true topic")'
$T infer --model "$dir/m.trib" --in "$dir/test.pb" --out "$dir/infer.jsonl"
/usr/bin/python3 - "$dir/infer.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 300, len(rows)
for r in rows:
    p = r["proportions"]
    assert len(p) == 4, p
    assert abs(sum(p) - 1) < 1e-6 and min(p) >= 0, p
print("infer: 300 documents, 4 proportions each, summing to 1")
EOF
$T train -q --family lgda --loss nll --topics 4 --opt match=logs --opt learn_prior=1 --in "$dir/train.pb" --out "$dir/logs.trib"
p=$(ppl "$dir/logs.trib")
echo "match=logs learn_prior=1: perplexity $p"
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$p') < 80 else 1)" || { echo "FAIL: match=logs perplexity $p" >&2; exit 1; }
$T plugins --options lgda | grep -q "match" || { echo "FAIL: no option table" >&2; exit 1; }
if $T train -q --family lgda --loss nll --opt match=mean --in "$dir/train.pb" --out "$dir/bad.trib" 2>"$dir/err"; then
  echo "FAIL: a bad match was accepted" >&2
  exit 1
fi
grep -q "match" "$dir/err" || { echo "FAIL: the refusal does not name the option:" >&2; cat "$dir/err" >&2; exit 1; }
echo "PASS"
