#!/usr/bin/env bash
# Synthetic topic recovery at the issue's size (K = 10 topics ~ Dir(0.1) over
# 1,000 terms, theta ~ Dir(0.1), 100 tokens per document, 20,000 documents,
# n = 20,000): mean L1 between learned and true topics after Hungarian
# matching, after 1,000, 5,000 and 20,000 documents, per model seed and local
# step (BM_LdaRecovery in bench/lda_bench.cc; tests/lda_family_test.cc runs
# the first 5,000 documents for seeds 1-4 on every test run).
#   bash bench/lda_recovery.sh [build-dir]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
"$BUILD/bin/lda_bench" --benchmark_filter=BM_LdaRecovery --benchmark_format=json 2>/dev/null |
  /usr/bin/python3 -c '
import json, sys
rows = json.load(sys.stdin)["benchmarks"]
inference = ["cvb0", "vi", "gibbs"]
print("| local step | schedule | model seed | L1 @1,000 | L1 @5,000 | L1 @20,000 | docs/s |")
print("|---|---|---|---|---|---|---|")
bad = 0
for r in rows:
    seed, docs, inf, tau0, kappa = (int(x) for x in r["name"].split("/")[1:6])
    sched = "(%d + t)^-%.2g" % (tau0, kappa / 100) if tau0 else "1/(1+t)"
    l1 = r["L1_%d" % docs]
    bad += l1 >= 0.2
    print("| %s | %s | %d | %.3f | %.3f | %.3f | %.0f |" % (inference[inf], sched, seed, r["L1_1000"], r["L1_5000"],
                                                            l1, r["docs_per_s"]))
print("\n%d of %d runs end at mean L1 >= 0.2" % (bad, len(rows)))
'
