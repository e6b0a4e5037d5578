#!/usr/bin/env python3
"""Convert a train/test pair of label<TAB>text files to svmlight for LIBLINEAR.

Uses the same tokenizer as `tributary convert --format tsv` (lowercase runs of
letters and digits; bytes >= 0x80 count as letters), a vocabulary built on the
training file only (test terms unseen in training are dropped, as Tributary's
models do), and class ids 1..K in order of first appearance in training.
Unlabelled lines are skipped; a test label unseen in training gets a new id.
"""
import argparse


def tokenize(text):
    out, cur = [], []
    for ch in text.encode("utf-8"):
        c = chr(ch)
        if ch >= 0x80 or c.isascii() and c.isalnum():
            cur.append(ch if ch >= 0x80 else ord(c.lower()))
        elif cur:
            out.append(bytes(cur).decode("utf-8", "replace"))
            cur = []
    if cur:
        out.append(bytes(cur).decode("utf-8", "replace"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--train-out", required=True)
    ap.add_argument("--test-out", required=True)
    a = ap.parse_args()
    vocab, labels = {}, {}

    def convert(src, dst, grow):
        with open(src, encoding="utf-8", errors="replace") as f, open(dst, "w") as g:
            for line in f:
                label, tab, text = line.rstrip("\n").partition("\t")
                if not tab or not label:
                    continue
                if label not in labels:
                    labels[label] = len(labels) + 1
                counts = {}
                for t in tokenize(text):
                    idx = vocab.get(t)
                    if idx is None:
                        if not grow:
                            continue
                        idx = vocab[t] = len(vocab) + 1
                    counts[idx] = counts.get(idx, 0) + 1
                feats = " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))
                g.write(f"{labels[label]} {feats}\n")

    convert(a.train, a.train_out, True)
    convert(a.test, a.test_out, False)


if __name__ == "__main__":
    main()
