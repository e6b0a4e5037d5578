#!/usr/bin/env bash
# Supervised LDA (family slda) through the command-line program with its
# defaults: a labelled TSV of three classes whose documents mix the class's
# two topics (six topics of 30 words each, 20 % of every document from any
# topic), then train / eval / infer / topics / inspect / plugins --options:
#  - held-out accuracy >= 0.9 with every classifier (cvb0-2, the default;
#    cvb0-1; MAP estimation and classifier);
#  - inspect shows the latent schedule (ABI 1.8 random_start: the topics
#    start at random) although the outputs are the classes;
#  - infer prints K topic proportions per document that sum to 1 (supervised
#    dimensionality reduction), topics lists K topics;
#  - bad options are refused naming the option.
# Usage: slda.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir" <<'EOF'
import random, sys
d = sys.argv[1]
rng = random.Random(5)
words = [["w%dz%d" % (k, i) for i in range(30)] for k in range(6)]
def doc(c):
    out = []
    for _ in range(40):
        k = rng.randrange(6) if rng.random() < 0.2 else 2 * c + rng.randrange(2)
        out.append(rng.choice(words[k]))
    return " ".join(out)
for name, n in (("train", 1500), ("test", 300)):
    with open("%s/%s.tsv" % (d, name), "w") as f:
        for _ in range(n):
            c = rng.randrange(3)
            f.write("class%d\t%s\n" % (c, doc(c)))
EOF
$T convert -q --format tsv --no-live --in "$dir/train.tsv" --out "$dir/train.pb"
$T convert -q --format tsv --no-live --in "$dir/test.tsv" --out "$dir/test.pb"
for opts in "" "--opt classifier=cvb0-1" "--opt train=map --opt classifier=map"; do
  # shellcheck disable=SC2086
  $T train -q --family slda --loss nll --topics 6 $opts --in "$dir/train.pb" --out "$dir/m.trib"
  acc=$($T eval --json --model "$dir/m.trib" --in "$dir/test.pb" |
        /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["accuracy"])')
  echo "slda [$opts]: held-out accuracy $acc"
  /usr/bin/python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.9 else 1)" ||
    { echo "FAIL: slda [$opts] accuracy $acc < 0.9" >&2; exit 1; }
done
$T train -q --family slda --loss nll --topics 6 --in "$dir/train.pb" --out "$dir/m.trib"
$T inspect --json --model "$dir/m.trib" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["outputs_kind"] == "classes", j["outputs_kind"]
assert j["schedule"] == "rho_t = (256 + t)^-0.7", "not the latent schedule: " + j["schedule"]
assert j["vocabulary_size"] == 180, j["vocabulary_size"]
print("inspect: outputs are the classes, schedule polynomial")'
$T infer --model "$dir/m.trib" --in "$dir/test.pb" --out "$dir/infer.jsonl"
/usr/bin/python3 - "$dir/infer.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 300, len(rows)
for r in rows:
    p = r["proportions"]
    assert len(p) == 6, p
    assert abs(sum(p) - 1) < 1e-6 and min(p) >= 0, p
print("infer: 300 documents, 6 proportions each, summing to 1")
EOF
n=$($T topics --json --model "$dir/m.trib" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["topics"]))')
[ "$n" = 6 ] || { echo "FAIL: topics lists $n topics, expected 6" >&2; exit 1; }
$T plugins --options slda | grep -q "classifier" || { echo "FAIL: no option table" >&2; exit 1; }
if $T train -q --family slda --loss nll --opt classifier=cvb0-3 --in "$dir/train.pb" --out "$dir/bad.trib" 2>"$dir/err"; then
  echo "FAIL: a bad classifier was accepted" >&2
  exit 1
fi
grep -q "classifier" "$dir/err" || { echo "FAIL: the refusal does not name the option:" >&2; cat "$dir/err" >&2; exit 1; }
echo "PASS"
