#!/usr/bin/env python3
"""Turn the King James Bible (Debian package bible-kjv) into labelled TSV.

Documents are chunks of --verses consecutive verses within one chapter; the
label is the genre of the book (law, history, wisdom, major-prophets,
minor-prophets, gospels, acts, pauline-epistles, general-epistles,
revelation) or, with --label testament, old/new. Shuffled with --seed and
split per label into --train and --test (--test-fraction).

--order canonical writes the training file in the Bible's own order (book,
chapter, verse: the corpus's time order); the split and the test file are the
same as with the default --order random, which shuffles the training file.
"""
import argparse
import collections
import random
import re
import subprocess
import sys

GENRES = {
    "law": "Ge Exo Lev Num Deu",
    "history": "Josh Jdgs Ruth 1Sm 2Sm 1Ki 2Ki 1Chr 2Chr Ezra Neh Est",
    "wisdom": "Job Psa Prv Eccl SSol",
    "major-prophets": "Isa Jer Lam Eze Dan",
    "minor-prophets": "Hos Joel Amos Obad Jonah Mic Nahum Hab Zep Hag Zec Mal",
    "gospels": "Mat Mark Luke John",
    "acts": "Acts",
    "pauline-epistles": "Rom 1Cor 2Cor Gal Eph Phi Col 1Th 2Th 1Tim 2Tim Titus Phmn Heb",
    "general-epistles": "Jas 1Pet 2Pet 1Jn 2Jn 3Jn Jude",
    "revelation": "Rev",
}
BOOK_GENRE = {b: g for g, books in GENRES.items() for b in books.split()}
NEW = set("Mat Mark Luke John Acts Rom 1Cor 2Cor Gal Eph Phi Col 1Th 2Th 1Tim 2Tim Titus Phmn Heb "
          "Jas 1Pet 2Pet 1Jn 2Jn 3Jn Jude Rev".split())
VERSE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+)\s+(.*)$")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--verses", type=int, default=5)
    ap.add_argument("--label", choices=["genre", "testament"], default="genre")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--order", choices=["random", "canonical"], default="random",
                    help="order of the training file (default: %(default)s)")
    a = ap.parse_args()
    text = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], check=True, capture_output=True, text=True).stdout
    chunks = []  # (label, text)
    cur_key, cur = None, []
    for line in text.splitlines():
        m = VERSE.match(line)
        if not m:
            continue
        book, chapter, _, words = m.groups()
        if book not in BOOK_GENRE:
            sys.exit(f"bible_to_tsv: unknown book abbreviation {book!r}")
        key = (book, chapter)
        if key != cur_key or len(cur) == a.verses:
            if cur:
                chunks.append((cur_key, " ".join(cur)))
            cur_key, cur = key, []
        cur.append(words)
    if cur:
        chunks.append((cur_key, " ".join(cur)))
    by_label = collections.defaultdict(list)
    for i, ((book, _), body) in enumerate(chunks):
        label = BOOK_GENRE[book] if a.label == "genre" else ("new" if book in NEW else "old")
        by_label[label].append((i, body))  # i: canonical position, for --order canonical
    rng = random.Random(a.seed)
    train, test = [], []
    for label in sorted(by_label):
        docs = by_label[label]
        rng.shuffle(docs)
        n_test = max(1, int(round(len(docs) * a.test_fraction)))
        test += [(label, d) for d in docs[:n_test]]
        train += [(label, d) for d in docs[n_test:]]
    rng.shuffle(train)  # also for --order canonical: the test shuffle must draw the same numbers
    rng.shuffle(test)
    if a.order == "canonical":
        train.sort(key=lambda row: row[1][0])
    for path, rows in ((a.train, train), (a.test, test)):
        with open(path, "w") as f:
            for label, (_, body) in rows:
                f.write(f"{label}\t{body}\n")
    print(f"bible_to_tsv: {len(chunks)} documents of {a.verses} verses, {len(by_label)} labels "
          f"({len(train)} train -> {a.train}, {len(test)} test -> {a.test})", file=sys.stderr)


if __name__ == "__main__":
    main()
