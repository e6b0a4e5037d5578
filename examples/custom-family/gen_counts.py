#!/usr/bin/env python3
"""Writes a labelled TSV (label<TAB>text) drawn from a Poisson naive Bayes model.

Four classes over a vocabulary of 40 words w0..w39, every count independent
Poisson:
  short  every word at rate 0.25              (about 10 tokens per document)
  long   every word at rate 0.625             (the same proportions, 2.5x longer)
  red    rate 0.25, words w0..w5 at rate 1.5
  blue   rate 0.25, words w6..w11 at rate 1.5
"short" and "long" differ only in length: a multinomial (which models the
proportions of a document's words, not their number) cannot tell them apart,
Poisson naive Bayes can. Usage: gen_counts.py --seed S --n N --out F.tsv
"""
import argparse
import math
import random

VOCAB = 40
BASE = 0.25


def rates(label):
    r = [BASE] * VOCAB
    if label == "long":
        r = [2.5 * BASE] * VOCAB
    elif label == "red":
        for w in range(0, 6):
            r[w] = 1.5
    elif label == "blue":
        for w in range(6, 12):
            r[w] = 1.5
    return r


def poisson(rng, lam):
    # Knuth's method: fine for the small rates used here.
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    labels = ["short", "long", "red", "blue"]
    with open(args.out, "w") as f:
        for i in range(args.n):
            label = labels[i % len(labels)]
            tokens = []
            for w, lam in enumerate(rates(label)):
                tokens += ["w%d" % w] * poisson(rng, lam)
            if not tokens:  # an empty document carries no evidence; keep one token
                tokens = ["w%d" % rng.randrange(VOCAB)]
            rng.shuffle(tokens)
            f.write("%s\t%s\n" % (label, " ".join(tokens)))


if __name__ == "__main__":
    main()
