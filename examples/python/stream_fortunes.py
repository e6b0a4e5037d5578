#!/usr/bin/env python3
"""Streams a real corpus (Debian's fortunes, apt install fortunes) through
Tributary from Python, notebook-style: an online classifier learned one
document at a time with its prequential learning curve, a scikit-learn
pipeline, and an online topic model with its topics.

    /usr/bin/python3 -m venv --system-site-packages V
    V/bin/pip install --no-build-isolation .          # from the repository root
    V/bin/python examples/python/stream_fortunes.py --out /tmp/fortunes-demo

Writes curve.png and topics.png to --out, and prints what it measured.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import tributary

HERE = os.path.dirname(os.path.abspath(__file__))


def read_tsv(path):
    xs, ys = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            y, x = line.rstrip("\n").split("\t", 1)
            xs.append(x)
            ys.append(y)
    return xs, ys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=tempfile.mkdtemp(prefix="tributary-demo-"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    train, test = os.path.join(args.out, "train.tsv"), os.path.join(args.out, "test.tsv")
    # The same stratified split as the program's demo (scripts/fortunes_to_tsv.py).
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "..", "..", "scripts", "fortunes_to_tsv.py"),
                    "--train", train, "--test", test], check=True)
    xs, ys = read_tsv(train)
    tx, ty = read_tsv(test)

    # 1. An online classifier, tested then trained on each document in
    #    arrival order (prequential), with the library's defaults.
    clf = tributary.Classifier()  # multinomial naive Bayes, NCLL loss, open vocabulary and classes
    curve = tributary.prequential(clf, xs, ys, every=500)
    print("prequential accuracy over %d documents: %.3f" % (curve["documents"], curve["accuracy"]))
    print("held-out accuracy: %.3f" % np.mean(np.array(clf.predict_many(tx)) == np.array(ty)))
    print("p(class | 'the computer crashed again'):",
          sorted(clf.predict_proba_one("the computer crashed again").items(), key=lambda kv: -kv[1])[:3])
    generative = tributary.prequential(tributary.Classifier(loss="nll"), xs, ys, every=500)
    tributary.plot.learning_curve({"ncll": curve, "nll (generative)": generative},
                                  path=os.path.join(args.out, "curve.png"))
    clf.save(os.path.join(args.out, "classifier.trib"))  # `tributary eval --model ...` reads it

    # 2. scikit-learn: the library's tokenizer in a CountVectorizer, and fit
    #    with `tributary train`'s defaults (settings chosen on held-out
    #    training documents).
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.pipeline import Pipeline
    from tributary.sklearn import SdemClassifier

    pipe = Pipeline([("vec", CountVectorizer(analyzer=tributary.tokenize)), ("clf", SdemClassifier())])
    pipe.fit(xs, ys)
    print("Pipeline(CountVectorizer, SdemClassifier) held-out accuracy: %.3f"
          % np.mean(pipe.predict(tx) == np.array(ty)))

    # 3. An online topic model over the same stream.
    tm = tributary.TopicModel(k=8)
    tm.learn_many(xs)
    print("topic model perplexity on the test documents (document completion): %.0f" % tm.perplexity(tx))
    for k, topic in enumerate(tm.topics(top=8)):
        print("topic %d: %s" % (k, " ".join(w for w, _ in topic)))
    tributary.plot.topics(tm, top=10, path=os.path.join(args.out, "topics.png"))
    print("pictures:", os.path.join(args.out, "curve.png"), os.path.join(args.out, "topics.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
