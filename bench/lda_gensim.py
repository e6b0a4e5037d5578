#!/usr/bin/env python3
"""gensim's online LDA (LdaModel, one pass) on the same TSV split as
`tributary train --family lda`, with the same document-completion perplexity.

Tokens: lowercase runs of ASCII letters and digits, bytes >= 0x80 kept inside
words (the tokenizer of `tributary convert --format tsv`, no stop words).
Term ids: order of first appearance in the training file (what the converter
assigns), so that "tokens ordered by (term id, repetition)" splits every
test document exactly as `tributary eval` does; test terms unseen in training
are dropped. Prints one JSON object.
"""
import argparse
import json
import math
import re
import time

import numpy as np
from gensim.models import LdaModel

TOKEN = re.compile(rb"[A-Za-z0-9\x80-\xff]+")


def read_tsv(path):
    docs = []
    with open(path, "rb") as f:
        for line in f:
            line = line.rstrip(b"\r\n")
            if not line:
                continue
            _, _, text = line.partition(b"\t")
            docs.append([t.lower().decode("utf-8", "replace") for t in TOKEN.findall(text)])
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--chunksize", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="train this many times, report the fastest")
    a = ap.parse_args()
    train, test = read_tsv(a.train), read_tsv(a.test)
    vocab = {}
    for d in train:
        for t in d:
            if t not in vocab:
                vocab[t] = len(vocab)
    id2word = {i: t for t, i in vocab.items()}

    def bow(d):
        c = {}
        for t in d:
            i = vocab.get(t)
            if i is not None:
                c[i] = c.get(i, 0) + 1
        return sorted(c.items())

    corpus = [bow(d) for d in train]
    corpus = [b for b in corpus if b]
    secs = cpu_secs = float("inf")
    for _ in range(max(1, a.repeat)):  # the same seed: the same model each time
        start, cpu_start = time.perf_counter(), time.process_time()
        # gensim's defaults otherwise: alpha = eta = 1/K, decay 0.5, offset 1,
        # iterations 50, gamma_threshold 0.001; eval_every=None: no perplexity
        # estimates during training (they would only slow it down).
        lda = LdaModel(corpus=corpus, id2word=id2word, num_topics=a.topics, chunksize=a.chunksize, passes=1,
                       eval_every=None, random_state=a.seed)
        secs = min(secs, time.perf_counter() - start)
        cpu_secs = min(cpu_secs, time.process_time() - cpu_start)
    topics = lda.get_topics()  # K x V, rows = E[beta_k]
    log_prob, scored = 0.0, 0
    for d in test:
        b = bow(d)
        tokens = [w for w, n in b for _ in range(n)]  # ordered by (term id, repetition)
        if not tokens:
            continue
        obs, held = tokens[0::2], tokens[1::2]
        if not held:
            continue
        obs_bow = sorted({w: obs.count(w) for w in set(obs)}.items())
        gamma, _ = lda.inference([obs_bow])
        theta = gamma[0] / gamma[0].sum()
        p = theta @ topics[:, held]
        log_prob += float(np.log(p).sum())
        scored += len(held)
    print(json.dumps({
        "documents": len(corpus), "vocabulary": len(vocab), "topics": a.topics, "train_seconds": secs,
        "train_cpu_seconds": cpu_secs, "documents_per_second": len(corpus) / secs,
        "documents_per_cpu_second": len(corpus) / cpu_secs, "perplexity": math.exp(-log_prob / scored),
        "scored_tokens": scored,
    }))


if __name__ == "__main__":
    main()
