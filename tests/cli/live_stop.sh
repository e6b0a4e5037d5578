#!/usr/bin/env bash
# A live pipe keeps its model (issue 42 item 6). A live stream has no end, so
# the model must survive the ways such a stream really ends:
#   - SIGINT mid-stream, the writer still open (prequential blocked reading
#     standard input): the command ends the stream after the last whole
#     document, saves --out atomically and exits 0; the model equals, bit for
#     bit (inspect's digest), the one learned from the same documents in a
#     file; `eval` loads it.
#   - Ctrl-C on the README's pipeline (SIGINT to the whole process group:
#     convert dies, prequential saves).
#   - SIGTERM to `train --in -`, and to `prequential --in FIFO` (a named pipe).
#   - --save-every N: the model is saved while the stream is learned, so
#     kill -9 (no chance to save) still leaves the last checkpoint, which
#     `eval` loads; --save-interval S saves by time.
# The corpus is real: fortunes from Debian's `fortunes` package, labelled by
# the file they come from.
# Usage: live_stop.sh PATH/TO/tributary SOURCE_DIR
set -euo pipefail
T=$1
export PYTHONPATH="$2/tests/cli/lib:${PYTHONPATH:-}"  # fortunes_tsv.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

/usr/bin/python3 - "$T" "$dir" <<'PY'
import json, os, select, signal, subprocess, sys, time
T, d = sys.argv[1], sys.argv[2]
def fail(msg):
    sys.exit("FAIL: " + msg)
from fortunes_tsv import labelled_lines  # tests/cli/lib
lines = labelled_lines(["computers", "food", "science"], 80)
def path(name): return os.path.join(d, name)
def run(*args, **kw):
    return subprocess.run([T] + list(args), check=True, capture_output=True, **kw)
def digest(model):
    return json.loads(run("inspect", "--model", model, "--json").stdout)["stats_digest"]
def eval_accuracy(model):
    out = json.loads(run("eval", "--model", model, "--in", path("all.tds"), "--json").stdout)
    return out["accuracy"]
open(path("all.tsv"), "w").writelines(lines)
run("convert", "-q", "--format", "tsv", "--in", "-", "--out", path("all.tds"), input="".join(lines).encode())

class Reports:
    """prequential's report lines (--every 1), read without Python's buffering."""
    def __init__(self, pipe):
        self.pipe, self.pending, self.last = pipe, b"", 0
    def wait_for(self, n, timeout=30):
        deadline = time.time() + timeout
        while self.last < n and time.time() < deadline:
            while b"\n" in self.pending and self.last < n:
                line, self.pending = self.pending.split(b"\n", 1)
                if line and not line.startswith(b"documents"): self.last = int(line.split(b"\t")[0])
            if self.last >= n: break
            r, _, _ = select.select([self.pipe], [], [], max(0.0, deadline - time.time()))
            if not r: break
            chunk = os.read(self.pipe.fileno(), 65536)
            if not chunk: break
            self.pending += chunk
        if self.last < n: fail("document %d was not reported within %ds" % (n, timeout))

def file_model(n, name):
    """The model learned by prequential from the first n documents in a file (the pipe's n: 10000)."""
    run("convert", "-q", "--format", "tsv", "--in", "-", "--out", path(name + ".tds"),
        input="".join(lines[:n]).encode())
    run("prequential", "--in", path(name + ".tds"), "--every", "0", "--n", "10000", "--out", path(name + ".trib"))
    return digest(path(name + ".trib"))

# 1. SIGINT to prequential, the writer still open.
N = 100
conv = subprocess.Popen([T, "convert", "-q", "--format", "tsv", "--in", "-", "--out", "-"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
preq = subprocess.Popen([T, "prequential", "--in", "-", "--every", "1", "--out", path("sigint.trib")],
                        stdin=conv.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
conv.stdout.close()
reports = Reports(preq.stdout)
for line in lines[:N]:
    conv.stdin.write(line.encode())
conv.stdin.flush()
reports.wait_for(N)
time.sleep(0.3)  # prequential is blocked reading the open pipe
if os.path.exists(path("sigint.trib")): fail("--out written before the stream ended (no --save-every given)")
preq.send_signal(signal.SIGINT)
try:
    rc = preq.wait(timeout=30)
except subprocess.TimeoutExpired:
    preq.kill()
    fail("prequential did not end within 30 s of SIGINT while blocked on an open pipe")
err = preq.stderr.read().decode()
if rc != 0: fail("prequential exited %d after SIGINT: %s" % (rc, err))
if "SIGINT" not in err or "sigint.trib" not in err: fail("no word on stderr of the stop and the save: " + err)
if os.path.exists(path("sigint.trib.partial")): fail("a .partial was written: the stop is no error")
conv.stdin.close()
conv.wait()
if digest(path("sigint.trib")) != file_model(N, "first100"):
    fail("the model saved on SIGINT differs from the one learned from the same %d documents in a file" % N)
acc = eval_accuracy(path("sigint.trib"))
if not acc > 0.4: fail("eval of the model saved on SIGINT: accuracy %s" % acc)
print("SIGINT: %d documents learned, saved, equal to the file's model; eval accuracy %.3f" % (N, acc))

# 2. Ctrl-C on the README's pipeline: SIGINT to the whole process group.
sh = subprocess.Popen(["bash", "-c", '"$0" convert -q --format tsv --in - --out - | '
                       '"$0" prequential --in - --every 1 --out "$1"', T, path("group.trib")],
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      start_new_session=True)
reports = Reports(sh.stdout)
for line in lines[:60]:
    sh.stdin.write(line.encode())
sh.stdin.flush()
reports.wait_for(60)
time.sleep(0.3)
os.killpg(sh.pid, signal.SIGINT)
try:
    sh.wait(timeout=30)
except subprocess.TimeoutExpired:
    os.killpg(sh.pid, signal.SIGKILL)
    fail("the pipeline did not end within 30 s of Ctrl-C")
if digest(path("group.trib")) != file_model(60, "first60"):
    fail("Ctrl-C on the pipeline: the saved model differs from the file's of the same 60 documents")
print("Ctrl-C on convert | prequential: the model of 60 documents saved")

# 3. SIGTERM to train --in - (the live learner) mid-stream, the writer open.
conv = subprocess.Popen([T, "convert", "-q", "--format", "tsv", "--in", "-", "--out", "-"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
train = subprocess.Popen([T, "train", "-q", "--in", "-", "--out", path("term.trib")],
                         stdin=conv.stdout, stderr=subprocess.PIPE)
conv.stdout.close()
for line in lines[:90]:
    conv.stdin.write(line.encode())
conv.stdin.flush()
time.sleep(1.5)  # (train reports nothing per document: give it time to learn what was written)
train.send_signal(signal.SIGTERM)
try:
    rc = train.wait(timeout=30)
except subprocess.TimeoutExpired:
    train.kill()
    fail("train did not end within 30 s of SIGTERM")
err = train.stderr.read().decode()
conv.stdin.close()
conv.wait()
if rc != 0 or "SIGTERM" not in err: fail("train after SIGTERM: exit %d, stderr %s" % (rc, err))
m = json.loads(run("inspect", "--model", path("term.trib"), "--json").stdout)
cands = m.get("live", {}).get("candidates", [])
if not cands: fail("train --in - stopped by SIGTERM: --out is not the live learner whole: %s" % list(m))
if eval_accuracy(path("term.trib")) <= 0.4: fail("eval of train's model saved on SIGTERM")
print("SIGTERM to train --in -: the live learner saved (%d candidates)" % len(cands))

# The same with --select off (the library's training job, one learner).
conv = subprocess.Popen([T, "convert", "-q", "--format", "tsv", "--in", "-", "--out", "-"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
train = subprocess.Popen([T, "train", "-q", "--select", "off", "--in", "-", "--out", path("job.trib")],
                         stdin=conv.stdout, stderr=subprocess.PIPE)
conv.stdout.close()
for line in lines[:90]:
    conv.stdin.write(line.encode())
conv.stdin.flush()
time.sleep(1.5)
train.send_signal(signal.SIGTERM)
rc = train.wait(timeout=30)
err = train.stderr.read().decode()
conv.stdin.close()
conv.wait()
if rc != 0 or "SIGTERM" not in err: fail("train --select off after SIGTERM: exit %d, stderr %s" % (rc, err))
m = json.loads(run("inspect", "--model", path("job.trib"), "--json").stdout)
if m["updates"] != 90: fail("train --select off stopped after 90 documents saved %s updates" % m["updates"])
print("SIGTERM to train --select off --in -: 90 updates saved")

# 4. A named pipe: convert writes the FIFO, prequential reads it by name.
fifo = path("fifo")
os.mkfifo(fifo)
preq = subprocess.Popen([T, "prequential", "--in", fifo, "--every", "1", "--out", path("fifo.trib")],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
conv = subprocess.Popen([T, "convert", "-q", "--format", "tsv", "--in", "-", "--out", fifo], stdin=subprocess.PIPE)
reports = Reports(preq.stdout)
for line in lines[:50]:
    conv.stdin.write(line.encode())
conv.stdin.flush()
reports.wait_for(50)
time.sleep(0.3)
preq.send_signal(signal.SIGTERM)
try:
    rc = preq.wait(timeout=30)
except subprocess.TimeoutExpired:
    preq.kill()
    fail("prequential --in FIFO did not end within 30 s of SIGTERM while blocked on the open FIFO")
conv.stdin.close()
conv.wait()
if rc != 0: fail("prequential --in FIFO exited %d after SIGTERM: %s" % (rc, preq.stderr.read().decode()))
if digest(path("fifo.trib")) != file_model(50, "first50"):
    fail("prequential --in FIFO: the model saved on SIGTERM differs from the file's of the same 50 documents")
print("SIGTERM to prequential --in FIFO: the model of 50 documents saved")

# 5. --save-every: checkpoints while learning; kill -9 leaves the last one.
conv = subprocess.Popen([T, "convert", "-q", "--format", "tsv", "--in", "-", "--out", "-"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
preq = subprocess.Popen([T, "prequential", "--in", "-", "--every", "1", "--save-every", "40",
                         "--out", path("ckpt.trib")], stdin=conv.stdout, stdout=subprocess.PIPE)
conv.stdout.close()
reports = Reports(preq.stdout)
for line in lines[:30]:
    conv.stdin.write(line.encode())
conv.stdin.flush()
reports.wait_for(30)
time.sleep(0.2)
if os.path.exists(path("ckpt.trib")): fail("--save-every 40 saved before the 40th document")
for line in lines[30:100]:
    conv.stdin.write(line.encode())
conv.stdin.flush()
reports.wait_for(100)
time.sleep(0.2)
m = json.loads(run("inspect", "--model", path("ckpt.trib"), "--json").stdout)  # read while prequential runs
preq.kill()  # SIGKILL: no chance to save
preq.wait()
conv.stdin.close()
conv.wait()
m2 = json.loads(run("inspect", "--model", path("ckpt.trib"), "--json").stdout)
if m2["stats_digest"] != m["stats_digest"]: fail("the checkpoint changed after kill -9")
# The checkpoint is the live learner whole, as it stood: the documents its
# per-class sample holds back are saved with it, not learned (the end of a
# stream learns them: the SIGINT save above holds none).
if not m2.get("live", {}).get("held", 0) > 0: fail("the checkpoint holds no held-back documents: %s" % m2.get("live"))
held = json.loads(run("inspect", "--model", path("sigint.trib"), "--json").stdout)["live"]["held"]
if held != 0: fail("the model saved on SIGINT still holds %d documents back (the end of the stream learns them)" % held)
if not eval_accuracy(path("ckpt.trib")) > 0.4: fail("eval of the checkpoint left by kill -9")
if os.path.exists(path("ckpt.trib.tmp")) or any(f.startswith("ckpt.trib.") for f in os.listdir(d)):
    fail("a temporary file was left next to the checkpoint: %s" % os.listdir(d))
print("--save-every 40: the checkpoint of document 80 survives kill -9 and eval loads it")

# --save-interval: by time, while documents arrive.
conv = subprocess.Popen([T, "convert", "-q", "--format", "tsv", "--in", "-", "--out", "-"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
preq = subprocess.Popen([T, "prequential", "--in", "-", "--every", "1", "--save-interval", "1",
                         "--out", path("timed.trib")], stdin=conv.stdout, stdout=subprocess.PIPE)
conv.stdout.close()
reports = Reports(preq.stdout)
for i, line in enumerate(lines[:40]):
    conv.stdin.write(line.encode())
    conv.stdin.flush()
    if i % 10 == 9: time.sleep(0.5)
reports.wait_for(40)
time.sleep(0.2)
saved = os.path.exists(path("timed.trib"))
preq.kill()
preq.wait()
conv.stdin.close()
conv.wait()
if not saved: fail("--save-interval 1: nothing saved after 2 s of learning")
run("inspect", "--model", path("timed.trib"), "--json")
print("--save-interval 1: saved while learning")
PY
echo "live_stop: OK"
