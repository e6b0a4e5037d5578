#!/usr/bin/env python3
"""Synthetic labelled text for the throughput benchmarks (bench/e2e_throughput.sh, bench/peers.sh).

Writes `label<TAB>tokens` lines (the TSV that `tributary convert --format tsv` reads), one document a line:
  * --classes classes, labels c0 .. c{K-1}, uniformly;
  * 8 .. 12 tokens a document (mean 10), drawn with replacement;
  * each token comes with probability 0.4 from its class's 200 "topic" words, otherwise uniformly from
    the whole vocabulary, so the classes are learnable;
  * token ids are first drawn in [0, 2^31) and then reduced modulo --vocab, so two runs with the same
    --seed and different --vocab produce the same documents (same labels, lengths and draws), only the
    vocabulary differs. Tokens are spelled w<id>.

Plain python3 (no numpy), deterministic for a given seed.
"""
import argparse
import random
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=200000)
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--classes", type=int, default=45)
    ap.add_argument("--seed", type=int, default=20140101)
    ap.add_argument("--format", choices=["tsv", "fasttext"], default="tsv",
                    help="fasttext: '__label__c<k> tokens' lines (fastText supervised input)")
    ap.add_argument("--out", default="-")
    ap.add_argument("--stats", action="store_true", help="print 'docs=N distinct_terms=M' on stderr")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    topic = [[rng.randrange(1 << 31) for _ in range(200)] for _ in range(a.classes)]
    out = sys.stdout if a.out == "-" else open(a.out, "w", encoding="utf-8")
    rnd, rr, V = rng.random, rng.randrange, a.vocab
    buf = []
    seen = set() if a.stats else None
    for _ in range(a.docs):
        k = rr(a.classes)
        tk = topic[k]
        toks = []
        for _ in range(rr(8, 13)):
            base = tk[rr(200)] if rnd() < 0.4 else rr(1 << 31)
            toks.append("w%d" % (base % V))
            if seen is not None:
                seen.add(base % V)
        if a.format == "tsv":
            buf.append("c%d\t%s\n" % (k, " ".join(toks)))
        else:
            buf.append("__label__c%d %s\n" % (k, " ".join(toks)))
        if len(buf) >= 10000:
            out.write("".join(buf))
            buf.clear()
    out.write("".join(buf))
    if out is not sys.stdout:
        out.close()
    if seen is not None:
        print("docs=%d distinct_terms=%d" % (a.docs, len(seen)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
