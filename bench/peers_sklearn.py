#!/usr/bin/env python3
"""scikit-learn peers for bench/peers.sh, on a TSV from gen_synthetic.py.

Reads the first --max-docs documents into a CSR matrix (term counts; vocabulary from the data; not timed),
then times, each for at most --seconds (the documents/s are over the documents processed in that time):
  * MultinomialNB.partial_fit, one document per call (online naive Bayes, as tributary trains it);
  * SGDClassifier(loss="log_loss").partial_fit, one document per call (online logistic regression,
    the discriminative counterpart of NCLL);
  * SGDClassifier(loss="hinge").partial_fit, one document per call;
  * MultinomialNB.partial_fit on all documents in one call, and MultinomialNB.predict on all of them
    (batch, vectorised: the best case for scikit-learn, for reference).
Prints one `name docs docs_per_s` line per measurement.
"""
import argparse
import sys
import time

import numpy as np
import scipy.sparse as sp
import sklearn
from sklearn.linear_model import SGDClassifier
from sklearn.naive_bayes import MultinomialNB


def load(path, max_docs):
    vocab, classes = {}, {}
    indptr, indices, data, labels = [0], [], [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            if n >= max_docs:
                break
            label, _, text = line.rstrip("\n").partition("\t")
            counts = {}
            for tok in text.split():
                j = vocab.setdefault(tok, len(vocab))
                counts[j] = counts.get(j, 0) + 1
            for j in sorted(counts):
                indices.append(j)
                data.append(float(counts[j]))
            indptr.append(len(indices))
            labels.append(classes.setdefault(label, len(classes)))
    X = sp.csr_matrix((np.array(data), np.array(indices, dtype=np.int64), np.array(indptr, dtype=np.int64)),
                      shape=(len(labels), len(vocab)))
    return X, np.array(labels), np.arange(len(classes))


def per_document(model, X, y, classes, seconds):
    rows = [X[i] for i in range(X.shape[0])]  # slicing is not timed
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    for i in range(len(rows)):
        model.partial_fit(rows[i], y[i:i + 1], classes=classes)
        n += 1
        if (n & 7) == 0 and time.perf_counter() > deadline:
            break
    return n, n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsv", required=True)
    ap.add_argument("--max-docs", type=int, default=200000)
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    t0 = time.perf_counter()
    X, y, classes = load(a.tsv, a.max_docs)
    print("# scikit-learn %s, numpy %s: %d documents, %d terms, %d classes (loaded in %.1f s, not timed)" %
          (sklearn.__version__, np.__version__, X.shape[0], X.shape[1], len(classes), time.perf_counter() - t0))
    sys.stdout.flush()
    n, r = per_document(MultinomialNB(), X, y, classes, a.seconds)
    print("sklearn_mnb_partial_fit_per_doc %d %.1f" % (n, r))
    sys.stdout.flush()
    n, r = per_document(SGDClassifier(loss="log_loss"), X, y, classes, a.seconds)
    print("sklearn_sgd_logloss_partial_fit_per_doc %d %.1f" % (n, r))
    sys.stdout.flush()
    n, r = per_document(SGDClassifier(loss="hinge"), X, y, classes, a.seconds)
    print("sklearn_sgd_hinge_partial_fit_per_doc %d %.1f" % (n, r))
    sys.stdout.flush()
    nb = MultinomialNB()
    t0 = time.perf_counter()
    nb.partial_fit(X, y, classes=classes)
    print("sklearn_mnb_partial_fit_batch %d %.1f" % (X.shape[0], X.shape[0] / (time.perf_counter() - t0)))
    t0 = time.perf_counter()
    pred = nb.predict(X)
    print("sklearn_mnb_predict_batch %d %.1f" % (X.shape[0], X.shape[0] / (time.perf_counter() - t0)))
    print("# batch MultinomialNB training-set accuracy %.4f" % float(np.mean(pred == y)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
