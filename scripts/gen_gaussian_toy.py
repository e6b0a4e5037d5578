#!/usr/bin/env python3
"""Writes the toy data of sdEM section 4.1 (Masegosa et al. 2014) in svmlight format.

    pi(y = -1) = pi(y = +1) = 0.5
    x | y = -1  ~  N(0, sd 3)
    x | y = +1  ~  0.8 N(-5, sd 0.1) + 0.2 N(5, sd 0.1)

One line per sample: "-1 1:<x>" or "1 1:<x>" (a single dense real feature,
index 1). Standard library only; the same --seed always gives the same file.

Example (train and test sets of the paper's size):
    gen_gaussian_toy.py --seed 1 --n 30000 --out toy_train.svm
    gen_gaussian_toy.py --seed 2 --n 30000 --out toy_test.svm
"""
import argparse
import random
import sys


def sample(rng):
    """Returns (label, x) for one draw of the toy distribution."""
    if rng.random() < 0.5:
        return -1, rng.gauss(0.0, 3.0)
    centre = -5.0 if rng.random() < 0.8 else 5.0
    return 1, rng.gauss(centre, 0.1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=2014, help="random seed (default 2014)")
    parser.add_argument("--n", type=int, default=30000, help="number of samples (default 30000)")
    parser.add_argument("--out", required=True, help="output file ('-' for standard output)")
    args = parser.parse_args(argv)
    if args.n < 0:
        parser.error("--n must be >= 0, got %d" % args.n)
    rng = random.Random(args.seed)
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="ascii")
    try:
        for _ in range(args.n):
            label, x = sample(rng)
            out.write("%d 1:%.17g\n" % (label, x))
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
