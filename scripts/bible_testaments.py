#!/usr/bin/env python3
"""King James Bible chapters labelled by testament, as TSV (label<TAB>text).

One line per chapter (1,189 chapters: 929 Old Testament, 260 New Testament),
label OT or NT, text = the chapter's verses joined by spaces. Reads the
Debian package bible-kjv (`bible -f 'gen1:1-rev22:21'`); downloads nothing.

    scripts/bible_testaments.py --out chapters.tsv
    scripts/bible_testaments.py --out chapters.tsv --train train.tsv --test test.tsv --test-fraction 0.2

--out gets every chapter. --train / --test (both or neither) get a split
stratified by testament: --test-fraction of each testament's chapters
(rounded) go to the test file. Lines are shuffled with --seed (an online
learner should not see all of one testament first); --order canonical keeps
the book order instead. Deterministic: the same flags give the same bytes.
A one-line summary goes to standard error.
"""
import argparse
import random
import re
import subprocess
import sys

NEW = set("Mat Mark Luke John Acts Rom 1Cor 2Cor Gal Eph Phi Col 1Th 2Th 1Tim 2Tim Titus Phmn Heb "
          "Jas 1Pet 2Pet 1Jn 2Jn 3Jn Jude Rev".split())
OLD = set("Ge Exo Lev Num Deu Josh Jdgs Ruth 1Sm 2Sm 1Ki 2Ki 1Chr 2Chr Ezra Neh Est Job Psa Prv Eccl SSol "
          "Isa Jer Lam Eze Dan Hos Joel Amos Obad Jonah Mic Nahum Hab Zep Hag Zec Mal".split())
VERSE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+)\s+(.*)$")


def chapters(with_books=False):
    """[(label, text)] in canonical order, one per chapter ((label, text, book) with_books)."""
    text = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], check=True, capture_output=True,
                          text=True).stdout
    out, key, verses = [], None, []
    for line in text.splitlines():
        m = VERSE.match(line)
        if not m:
            continue
        book, chapter, _, words = m.groups()
        if book not in NEW and book not in OLD:
            sys.exit(f"bible_testaments: unknown book abbreviation {book!r}")
        if (book, chapter) != key:
            if verses:
                out.append(("NT" if key[0] in NEW else "OT", " ".join(verses), key[0]))
            key, verses = (book, chapter), []
        verses.append(" ".join(words.split()))  # no tabs or line breaks in the text
    if verses:
        out.append(("NT" if key[0] in NEW else "OT", " ".join(verses), key[0]))
    return out if with_books else [r[:2] for r in out]


def write(path, rows):
    with open(path, "w") as f:
        for label, body in rows:
            f.write(f"{label}\t{body}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="every chapter")
    ap.add_argument("--books", help="with --out: the book of each line of --out (e.g. Ge, Mat), one per line")
    ap.add_argument("--train", help="training split (with --test)")
    ap.add_argument("--test", help="held-out split (with --train)")
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--order", choices=["shuffled", "canonical"], default="shuffled")
    a = ap.parse_args()
    if (a.train is None) != (a.test is None):
        ap.error("--train and --test go together")
    if a.books and not a.out:
        ap.error("--books goes with --out")
    if a.out is None and a.train is None:
        ap.error("nothing to write: give --out and/or --train/--test")
    if not 0 < a.test_fraction < 1:
        ap.error("--test-fraction must be in (0, 1)")
    rows = chapters(with_books=True)
    counts = {lab: sum(1 for r in rows if r[0] == lab) for lab in ("OT", "NT")}
    rng = random.Random(a.seed)
    summary = f"bible_testaments: {len(rows)} chapters (OT {counts['OT']}, NT {counts['NT']})"
    if a.out:
        all_rows = list(rows)
        if a.order == "shuffled":
            rng.shuffle(all_rows)
        write(a.out, [r[:2] for r in all_rows])
        if a.books:
            with open(a.books, "w") as f:
                f.writelines(r[2] + "\n" for r in all_rows)
        summary += f" -> {a.out}"
    if a.train:
        train, test = [], []
        for lab in ("NT", "OT"):
            idx = [i for i, r in enumerate(rows) if r[0] == lab]
            random.Random(f"{a.seed}-{lab}").shuffle(idx)
            n_test = max(1, int(round(len(idx) * a.test_fraction)))
            test += sorted(idx[:n_test])
            train += sorted(idx[n_test:])
        train, test = sorted(train), sorted(test)
        if a.order == "shuffled":
            rng.shuffle(train)
            rng.shuffle(test)
        write(a.train, [rows[i][:2] for i in train])
        write(a.test, [rows[i][:2] for i in test])
        summary += f"; split {len(train)} train -> {a.train}, {len(test)} test -> {a.test}"
    print(summary, file=sys.stderr)


if __name__ == "__main__":
    main()
