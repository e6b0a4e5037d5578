#!/usr/bin/env python3
"""Turn Debian's fortune cookie files into labelled TSV (label<TAB>text).

Reads the top-level fortune files of --dir (default /usr/share/games/fortunes,
from the Debian packages fortunes / fortunes-min): regular files whose name has
no extension. The *.dat index files, the *.u8 links and subdirectories (such as
`off`) are not used. Records are separated by lines consisting of "%". Each
record becomes one line: label = the file name (the category), text = the
record with line breaks and tabs replaced by spaces.

Categories with fewer than --min-docs records are dropped. Every category is
shuffled (--seed) and split into train and test (--test-fraction of its
records, rounded, go to test), so the split is stratified; each output file is
then shuffled as a whole so that categories are interleaved, as an online
learner expects. A one-line summary goes to standard error.

    scripts/fortunes_to_tsv.py --train fortunes_train.tsv --test fortunes_test.tsv
    tributary convert --format tsv fortunes_train.tsv fortunes_train.pb
"""

import argparse
import os
import random
import re
import sys

DEFAULT_DIR = "/usr/share/games/fortunes"

# Everything a line-oriented reader might treat as a line or field break.
_BREAKS = re.compile("[\t\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def category_files(directory):
    """(category, path) of the top-level fortune files, sorted by name."""
    out = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if "." in name or name.startswith("."):
            continue  # *.dat, *.u8 and anything else with an extension
        if not os.path.isfile(path):
            continue  # directories (e.g. off/), broken links, devices
        out.append((name, path))
    return out


def read_records(path):
    """The non-empty records of one fortune file, one line each."""
    with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
        data = f.read()
    records, current = [], []
    for line in data.split("\n"):
        if line.rstrip("\r") == "%":
            records.append(current)
            current = []
        else:
            current.append(line)
    records.append(current)
    out = []
    for lines in records:
        text = " ".join(lines)
        text = _BREAKS.sub(" ", text).strip()
        if text:
            out.append(text)
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default=DEFAULT_DIR, help="fortune directory (default: %(default)s)")
    p.add_argument("--train", required=True, help="output TSV of training documents")
    p.add_argument("--test", required=True, help="output TSV of test documents")
    p.add_argument("--min-docs", type=int, default=50,
                   help="drop categories with fewer records (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="shuffling seed (default: %(default)s)")
    p.add_argument("--test-fraction", type=float, default=0.2,
                   help="fraction of each category held out for test (default: %(default)s)")
    args = p.parse_args(argv)
    if not 0.0 <= args.test_fraction < 1.0:
        p.error("--test-fraction must be in [0, 1), got %g" % args.test_fraction)
    if args.min_docs < 1:
        p.error("--min-docs must be at least 1, got %d" % args.min_docs)
    return args


def write_tsv(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for label, text in rows:
            f.write(label + "\t" + text + "\n")


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isdir(args.dir):
        sys.stderr.write("fortunes_to_tsv: '%s' is not a directory (install the Debian package "
                         "'fortunes' or 'fortunes-min', or pass --dir)\n" % args.dir)
        return 1
    files = category_files(args.dir)
    if not files:
        sys.stderr.write("fortunes_to_tsv: no fortune files in '%s'\n" % args.dir)
        return 1

    rng = random.Random(args.seed)
    train, test, kept, dropped = [], [], [], []
    for category, path in files:
        records = read_records(path)
        if len(records) < args.min_docs:
            dropped.append("%s(%d)" % (category, len(records)))
            continue
        kept.append(category)
        rng.shuffle(records)
        n_test = int(round(len(records) * args.test_fraction))
        test.extend((category, r) for r in records[:n_test])
        train.extend((category, r) for r in records[n_test:])
    if not kept:
        sys.stderr.write("fortunes_to_tsv: no category in '%s' has %d or more records\n"
                         % (args.dir, args.min_docs))
        return 1
    rng.shuffle(train)
    rng.shuffle(test)
    write_tsv(args.train, train)
    write_tsv(args.test, test)

    summary = "fortunes_to_tsv: %d documents, %d categories (%d train -> %s, %d test -> %s)" % (
        len(train) + len(test), len(kept), len(train), args.train, len(test), args.test)
    if dropped:
        summary += "; dropped %d categories with < %d records: %s" % (
            len(dropped), args.min_docs, " ".join(dropped))
    sys.stderr.write(summary + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
