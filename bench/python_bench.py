#!/usr/bin/env python3
"""Python package speed against the program, measured in one run.

Run with the venv's interpreter after `pip install --no-build-isolation .`:
    V/bin/python bench/python_bench.py --program build/bin/tributary [--repeat 5]

Corpus: Debian's fortunes training split (scripts/fortunes_to_tsv.py), its
documents repeated --repeat times. Compared, one learner (NCLL, n = 10000,
arrival order) everywhere:
  - the program: `tributary train --select off --epochs 1 --n 10000` on the
    converted stream (its own documents/s, learning only, as it prints);
  - learn_many(texts) (tokenized in C++), learn_many(dicts term -> count)
    and learn_file(stream): documents/s, and the ratio to the program;
  - learn_one per call: microseconds per document, against learn_many's and
    against scikit-learn's MultinomialNB.partial_fit on one document (River
    is not packaged in Debian 12).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

import tributary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def best_of(n, fn):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", default=os.path.join(ROOT, "build", "bin", "tributary"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    d = tempfile.mkdtemp()
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "fortunes_to_tsv.py"), "--train",
                    os.path.join(d, "train.tsv"), "--test", os.path.join(d, "test.tsv")], check=True,
                   capture_output=True)
    xs, ys = [], []
    for line in open(os.path.join(d, "train.tsv"), encoding="utf-8"):
        y, x = line.rstrip("\n").split("\t", 1)
        xs.append(x)
        ys.append(y)
    xs, ys = xs * a.repeat, ys * a.repeat
    tsv = os.path.join(d, "rep.tsv")
    with open(tsv, "w", encoding="utf-8") as f:
        for x, y in zip(xs, ys):
            f.write(y + "\t" + x + "\n")
    pb = os.path.join(d, "rep.pb")
    subprocess.run([a.program, "convert", "--format", "tsv", "--open-vocabulary", "--in", tsv, "--out", pb],
                   check=True, capture_output=True)
    n = len(xs)
    rates = []
    for _ in range(a.runs):
        r = subprocess.run([a.program, "train", "--in", pb, "--out", os.path.join(d, "m.trib"), "--select", "off",
                            "--epochs", "1", "--n", "10000"], check=True, capture_output=True, text=True)
        rates.append(float(re.search(r"\(([0-9.e+]+) documents/s\)", r.stderr).group(1)))
    program = max(rates)
    dicts = [{} for _ in xs]
    for x, dd in zip(xs, dicts):
        for w in tributary.tokenize(x):
            dd[w] = dd.get(w, 0) + 1
    rows = []
    for name, fn in [("learn_many(texts)", lambda: tributary.Classifier().learn_many(xs, ys)),
                     ("learn_many(dicts)", lambda: tributary.Classifier().learn_many(dicts, ys)),
                     ("learn_file(stream)", lambda: tributary.Classifier().learn_file(pb))]:
        rows.append((name, n / best_of(a.runs, fn)))
    m = 20000
    def one():
        c = tributary.Classifier()
        for x, y in zip(xs[:m], ys[:m]):
            c.learn_one(x, y)
    per_one = best_of(a.runs, one) / m * 1e6
    per_many = best_of(a.runs, lambda: tributary.Classifier().learn_many(xs[:m], ys[:m])) / m * 1e6
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.naive_bayes import MultinomialNB
    vec = CountVectorizer(analyzer=tributary.tokenize).fit(xs[:m])
    X = vec.transform(xs[:m])
    classes = sorted(set(ys))
    k = 2000
    def sk_one():
        nb = MultinomialNB()
        for i in range(k):
            nb.partial_fit(X[i], [ys[i]], classes=classes)
    per_sk = best_of(a.runs, sk_one) / k * 1e6
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True,
                         text=True).stdout.strip()
    print("machine: %s, %d cores; Python %s; %d documents (fortunes train x %d), best of %d runs"
          % (cpu, os.cpu_count(), sys.version.split()[0], n, a.repeat, a.runs))
    print("%-22s %12s %8s" % ("", "documents/s", "ratio"))
    print("%-22s %12.0f %8s" % ("program train", program, "1.00"))
    for name, r in rows:
        print("%-22s %12.0f %8.2f" % (name, r, r / program))
    print("learn_one: %.1f us/document; learn_many: %.1f us/document (per-call overhead %.1f us); "
          "sklearn MultinomialNB.partial_fit on one document: %.1f us (%.0fx learn_one)"
          % (per_one, per_many, per_one - per_many, per_sk, per_sk / per_one))
    return 0


if __name__ == "__main__":
    sys.exit(main())
