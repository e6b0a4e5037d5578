#!/usr/bin/env python3
"""Drift streams from a labelled TSV corpus (label<TAB>text), for bench/drift.sh.

Every stream is ONE pass over the corpus's documents in a seeded random order
(no document repeats), with a change in p(y | x) or p(y) or p(x) at a known
position:

  stationary  no change (false alarms are counted on it)
  swap        at the middle, a tenth of the classes (at least two, drawn among
              those at least as large as the median) swap labels in pairs: a
              document of class a is labelled b and vice versa
  gradual     the same swap mixed in by a sigmoid centred at the middle, width
              --width documents (River's ConceptDriftStream shape): document i
              is labelled by the new concept with probability
              1 / (1 + exp(-4 (i - middle) / width))
  recurring   the swap at a third, undone at two thirds (A -> B -> A)
  newclass    a fifth of the classes are held back until the middle, then
              appear (their documents spread over the second half)
  prior       the first half draws classes uniformly at random from the pool
              of remaining documents; the second half draws only from the
              largest half of the classes (a class-prior shift)

    drift_streams.py --in corpus.tsv --kind swap --seed 1 --out swap.tsv
Prints one JSON line to stderr: the change points and the classes involved.
"""
import argparse
import json
import math
import random
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--kind", required=True,
                    choices=["stationary", "swap", "gradual", "recurring", "newclass", "prior"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--width", type=int, default=1000)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    docs = []
    with open(a.inp, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if "\t" not in line:
                continue
            y, x = line.split("\t", 1)
            docs.append((y, x))
    rng.shuffle(docs)
    n = len(docs)
    classes = sorted({y for y, _ in docs})
    # The swapped classes: a tenth of the classes (an even number, at least
    # two), drawn among the classes at least as large as the median, so that
    # the change moves the overall accuracy visibly.
    sizes = {}
    for y, _ in docs:
        sizes[y] = sizes.get(y, 0) + 1
    median = sorted(sizes.values())[len(sizes) // 2]
    large = [c for c in classes if sizes[c] >= median]
    swapped = rng.sample(large, min(len(large) // 2 * 2, 2 * max(1, round(len(classes) / 20))))
    pairs = {}
    for i in range(0, len(swapped) - 1, 2):
        pairs[swapped[i]] = swapped[i + 1]
        pairs[swapped[i + 1]] = swapped[i]
    info = {"kind": a.kind, "documents": n, "classes": len(classes)}
    out = []
    if a.kind == "stationary":
        out = docs
        info["changes"] = []
    elif a.kind == "swap":
        mid = n // 2
        out = [(pairs.get(y, y) if i >= mid else y, x) for i, (y, x) in enumerate(docs)]
        info.update(changes=[mid], swapped=sorted(pairs))
    elif a.kind == "gradual":
        mid = n // 2
        for i, (y, x) in enumerate(docs):
            p = 1.0 / (1.0 + math.exp(-4.0 * (i - mid) / a.width))
            out.append((pairs.get(y, y) if rng.random() < p else y, x))
        info.update(changes=[mid], width=a.width, swapped=sorted(pairs))
    elif a.kind == "recurring":
        t1, t2 = n // 3, 2 * n // 3
        out = [(pairs.get(y, y) if t1 <= i < t2 else y, x) for i, (y, x) in enumerate(docs)]
        info.update(changes=[t1, t2], swapped=sorted(pairs))
    elif a.kind == "newclass":
        late = set(rng.sample(classes, max(1, len(classes) // 5)))
        early = [d for d in docs if d[0] not in late]
        held = [d for d in docs if d[0] in late]
        mid = len(early) // 2
        second = early[mid:] + held
        rng.shuffle(second)
        out = early[:mid] + second
        info.update(changes=[mid], new_classes=sorted(late))
    elif a.kind == "prior":
        counts = {}
        for y, _ in docs:
            counts[y] = counts.get(y, 0) + 1
        big = set(sorted(classes, key=lambda c: -counts[c])[: max(1, len(classes) // 2)])
        pool = {}
        for d in docs:
            pool.setdefault(d[0], []).append(d)
        mid = n // 2
        while len(out) < mid:
            live = [c for c in classes if pool[c]]
            out.append(pool[rng.choice(live)].pop())
        rest = [d for c in classes for d in pool[c] if c in big]
        rng.shuffle(rest)
        out += rest
        info.update(changes=[mid], documents=len(out), late_classes=sorted(big))
    with open(a.out, "w", encoding="utf-8") as f:
        for y, x in out:
            f.write(f"{y}\t{x}\n")
    print(json.dumps(info), file=sys.stderr)


if __name__ == "__main__":
    main()
