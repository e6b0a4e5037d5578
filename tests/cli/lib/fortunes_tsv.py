"""Labelled lines from Debian's `fortunes` package, for the live-pipe tests
(tests/cli/live_pipe.sh, live_stop.sh): each fortune of a file is one
document labelled by the file it comes from."""


def fortunes(name, n):
    """The first n fortunes of /usr/share/games/fortunes/NAME, each one line
    (tabs turned into spaces)."""
    out, cur = [], []
    for line in open("/usr/share/games/fortunes/" + name, encoding="utf-8", errors="replace"):
        if line.strip() == "%":
            text = " ".join(x.strip() for x in cur if x.strip())
            if text:
                out.append(text.replace("\t", " "))
            cur = []
            if len(out) == n:
                break
        else:
            cur.append(line)
    return out


def labelled_lines(files, per_file):
    """label<TAB>text lines, the files interleaved (one fortune of each in
    turn), at most per_file of each."""
    docs = {f: fortunes(f, per_file) for f in files}
    lines = []
    for i in range(per_file):
        for f in files:
            if i < len(docs[f]):
                lines.append("%s\t%s\n" % (f, docs[f][i]))
    return lines
