#!/usr/bin/env bash
# Text piped in as it arrives (issue 14): `convert` reads a pipe line by line
# and writes (and flushes) each document as soon as its line is complete, so
# lines written with pauses reach `prequential --in -` before the writer
# closes (its report for document i appears before line i+1 is written); the
# models learned from the pipe (prequential, and train with its defaults)
# equal, bit for bit (inspect's digest), the models learned from the same
# documents in a file. Both ways of reading words nobody listed in advance
# are run: hashed ids (convert's default for a pipe) and an open vocabulary
# (--open-vocabulary: the model adds the words as they come). The corpus is
# real: fortunes from Debian's `fortunes` package, labelled by the file they
# come from.
# Usage: live_pipe.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
export PYTHONPATH="$2/tests/cli/lib:${PYTHONPATH:-}"  # fortunes_tsv.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

run_mode() {  # run_mode NAME [convert flags...]
mode=$1
shift
/usr/bin/python3 - "$T" "$dir" "$@" <<'PY'
import os, select, subprocess, sys, time
T, d, conv_flags = sys.argv[1], sys.argv[2], sys.argv[3:]
from fortunes_tsv import labelled_lines  # tests/cli/lib
lines = labelled_lines(["computers", "food", "science"], 80)
open(os.path.join(d, "all.tsv"), "w").writelines(lines)

# convert | prequential, fed line by line.
conv = subprocess.Popen([T, "convert", "-q", "--format", "tsv", "--in", "-", "--out", "-"] + conv_flags,
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
preq = subprocess.Popen([T, "prequential", "--in", "-", "--every", "1", "--out", os.path.join(d, "pipe.trib")],
                        stdin=conv.stdout, stdout=subprocess.PIPE)
conv.stdout.close()
pending = b""  # bytes read from prequential, not yet a whole line (no Python buffering: select must see them)
def wait_for(n, timeout=30):
    global pending
    deadline = time.time() + timeout
    while time.time() < deadline:
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.startswith(b"documents"): continue  # the report's header
            if int(line.split(b"\t")[0]) >= n: return
        r, _, _ = select.select([preq.stdout], [], [], max(0.0, deadline - time.time()))
        if not r: break
        chunk = os.read(preq.stdout.fileno(), 65536)
        if not chunk: break
        pending += chunk
    sys.exit("FAIL: prequential did not report document %d within %ds of its line being written "
             "(the writer is still open)" % (n, timeout))
waited = 0
for i, line in enumerate(lines):
    conv.stdin.write(line.encode())
    conv.stdin.flush()
    if i < 5 or i % 40 == 0:
        time.sleep(0.2)
        wait_for(i + 1)  # the writer keeps the pipe open meanwhile
        waited += 1
conv.stdin.close()
rest = preq.stdout.read()
assert conv.wait() == 0 and preq.wait() == 0, "convert or prequential failed"
print("live pipe: %d documents, %d of them seen learned before the next line was written" % (len(lines), waited))
PY

# The same documents from a file: the live conversion saved, then learned.
"$T" convert -q --format tsv "$@" --in - --out "$dir/live.tds" < <(cat "$dir/all.tsv")
# A file has a length (train and prequential count its documents for n); the
# pipe's is unknown (n = 10000 by default): the file run is given that n.
"$T" prequential --in "$dir/live.tds" --every 0 --n 10000 --out "$dir/file.trib" > /dev/null
digest() { "$T" inspect --model "$1" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["stats_digest"])'; }
[[ $(digest "$dir/pipe.trib") == $(digest "$dir/file.trib") ]] ||
  fail "$mode: prequential from the pipe and from the file learned different models"

# train with its defaults (no tuning flags) from a pipe of the live
# conversion, against the same documents from the file (one pass).
cat "$dir/all.tsv" | "$T" convert -q --format tsv "$@" --in - --out - | "$T" train -q --in - --out "$dir/train_pipe.trib"
"$T" train -q --in "$dir/live.tds" --epochs 1 --n 10000 --out "$dir/train_file.trib"
[[ $(digest "$dir/train_pipe.trib") == $(digest "$dir/train_file.trib") ]] ||
  fail "$mode: train from the pipe and from the file learned different models"
# The header of a live conversion: hashed ids (or an open vocabulary), open
# classes, no count.
"$T" inspect --model "$dir/train_pipe.trib" --json | /usr/bin/python3 -c '
import json, sys
m, mode = json.load(sys.stdin), sys.argv[1]
if mode == "hashed":
    assert m["vocabulary"] == "hashed" and m["vocabulary_size"] == 262144, m["vocabulary_size"]
else:
    # The words of 240 fortunes, learned as they came, with room to spare.
    assert m["vocabulary"] == "open", m["vocabulary"]
    assert 1000 < m["vocabulary_size"] < 20000, m["vocabulary_size"]
    assert m["vocabulary_size"] <= m["vocab_capacity"] <= 1.5 * m["vocabulary_size"] + 1024, m
assert m["effective_size"] == 10000, m["effective_size"]
assert sorted(m["classes"]) == ["computers", "food", "science"], m["classes"]
' "$mode" || fail "$mode: a live conversion should give the vocabulary of its mode and learn the three classes"
echo "live_pipe ($mode): OK"
}

run_mode hashed
run_mode open --open-vocabulary
