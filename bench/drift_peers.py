#!/usr/bin/env python3
"""Peers on a drift stream (bench/drift.sh): scikit-learn's online learners,
test-then-train in mini-batches, and an oracle retrained on the recent past.

Reads one label<TAB>text stream (bench/drift_streams.py), tokenized as
`tributary convert --format tsv` does (scripts/tsv_to_svmlight.py), counted
over the vocabulary of the whole stream (CountVectorizer: the peers know
every word from the start, which only helps them). For every model, each mini-batch of --batch documents is first
predicted with the model as it is, then learned (partial_fit): prequential
accuracy. The oracle is LogisticRegression (liblinear, C=1) refitted every
--every documents on the last --window documents (it has seen the change as
soon as its window has).

Prints one JSON object per model: {"model", "seconds", "curve": [window
accuracy per --every documents], "documents"}.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression, PassiveAggressiveClassifier, SGDClassifier
from sklearn.naive_bayes import MultinomialNB

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from tsv_to_svmlight import tokenize  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--every", type=int, default=500)
    ap.add_argument("--window", type=int, default=2000)
    ap.add_argument("--models", default="sgd_log,passive_aggressive,multinomial_nb,oracle_lr")
    a = ap.parse_args()
    labels, texts = [], []
    with open(a.inp, encoding="utf-8") as f:
        for line in f:
            y, _, x = line.rstrip("\n").partition("\t")
            labels.append(y)
            texts.append(x)
    classes = sorted(set(labels))
    index = {c: i for i, c in enumerate(classes)}
    y = np.array([index[c] for c in labels])
    X = CountVectorizer(analyzer=tokenize).fit_transform(texts).tocsr()
    n = len(y)
    warnings.simplefilter("ignore")
    for name in a.models.split(","):
        start = time.time()
        right = np.zeros(n, dtype=bool)
        if name == "oracle_lr":
            model = None
            for lo in range(0, n, a.every):
                hi = min(n, lo + a.every)
                if model is not None:
                    right[lo:hi] = model.predict(X[lo:hi]) == y[lo:hi]
                past = slice(max(0, hi - a.window), hi)
                if len(set(y[past])) >= 2:
                    model = LogisticRegression(solver="liblinear", C=1.0).fit(X[past], y[past])
        else:
            model = {"sgd_log": lambda: SGDClassifier(loss="log_loss", random_state=1),
                     "passive_aggressive": lambda: PassiveAggressiveClassifier(random_state=1),
                     "multinomial_nb": lambda: MultinomialNB()}[name]()
            fitted = False
            for lo in range(0, n, a.batch):
                hi = min(n, lo + a.batch)
                if fitted:
                    right[lo:hi] = model.predict(X[lo:hi]) == y[lo:hi]
                model.partial_fit(X[lo:hi], y[lo:hi], classes=np.arange(len(classes)))
                fitted = True
        curve = [float(right[lo:min(n, lo + a.every)].mean()) for lo in range(0, n, a.every)]
        print(json.dumps({"model": name, "seconds": time.time() - start, "documents": n, "curve": curve}))


if __name__ == "__main__":
    main()
