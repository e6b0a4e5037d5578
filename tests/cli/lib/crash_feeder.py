"""What the crash tests of `tributary serve` share (server_crash.sh,
server_crash_live.sh): the stream's frames, and a feeder thread that sends
documents in order over the binary protocol and tracks what was
acknowledged while the server is killed under it."""
import os
import signal
import subprocess
import sys
import threading
import time

import tributary_client as tc


def read_frames(path):
    """The frames of a stream file (header first), as bytes."""
    frames = []
    with open(path, "rb") as f:
        while True:
            body = tc.read_frame(f.read)
            if body is None:
                return frames
            frames.append(body)


class Feeder(threading.Thread):
    """Sends docs[next_index:] in order, `batch` documents a request and
    `window` requests in flight, while `go` is set; documents [0, acked) are
    acknowledged. A dead server ends a round quietly (`offline` is set);
    anything else unexpected is kept in `error`."""

    def __init__(self, docs, pb2, batch=20, window=3):
        super().__init__(daemon=True)
        self.docs, self.pb2, self.batch, self.window = docs, pb2, batch, window
        self.lock = threading.Lock()
        self.go = threading.Event()
        self.offline = threading.Event()
        self.offline.set()
        self.port = None
        self.next_index = 0
        self.acked = 0
        self.requests = 0
        self.error = None

    def run(self):
        while True:
            self.go.wait()
            try:
                self.feed()
            except (OSError, EOFError, ConnectionError):  # the server died under us
                pass
            except Exception as e:
                self.error = repr(e)
            finally:
                self.go.clear()
                self.offline.set()

    def feed(self):
        n_docs = len(self.docs)
        with tc.Client("127.0.0.1", self.port, timeout=20, pb2=self.pb2) as c:
            sent = self.next_index
            inflight = []  # (request_id, first index, count)
            while sent < n_docs or inflight:
                while sent < n_docs and len(inflight) < self.window:
                    n = min(self.batch, n_docs - sent)
                    r = c.new_request()
                    r.learn.documents.extend(self.docs[sent:sent + n])
                    c.send(r)
                    inflight.append((r.request_id, sent, n))
                    sent += n
                resp = c.receive(check=False)
                rid, first, n = inflight.pop(0)
                if resp.request_id != rid or resp.code != self.pb2.Response.OK:
                    raise RuntimeError("request %d: answer %s" % (rid, resp))
                if resp.learn.acknowledged != n or resp.learn.first_sequence != first + 1:
                    raise RuntimeError("request for documents [%d, %d): acknowledged %d from sequence %d"
                                       % (first, first + n, resp.learn.acknowledged, resp.learn.first_sequence))
                with self.lock:
                    self.acked = first + n
                    self.requests += 1


class Harness:
    """The kill / restart loop both crash tests run: servers started with
    their output in DIR/server.log, a failure that prints that log, and the
    kill of a server once the feeder has `target` documents acknowledged."""

    def __init__(self, directory):
        self.dir = directory
        self.log_path = os.path.join(directory, "server.log")
        self.log = open(self.log_path, "ab")

    def fail(self, msg):
        self.log.flush()
        sys.stderr.write("FAIL: %s\n--- server log ---\n" % msg)
        with open(self.log_path) as f:
            sys.stderr.write(f.read())
        sys.stderr.flush()
        os._exit(1)

    def start(self, argv, name, ports=1):
        """Starts `argv` + --port-file DIR/name.port (its pid in DIR/name.pid)
        and waits until it has written `ports` ports; returns (process, ports)."""
        port_file = os.path.join(self.dir, name + ".port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        p = subprocess.Popen(list(argv) + ["--port-file", port_file], stdout=self.log, stderr=self.log)
        with open(os.path.join(self.dir, name + ".pid"), "w") as f:
            f.write(str(p.pid))
        deadline = time.monotonic() + 20
        while True:
            written = open(port_file).read().split() if os.path.exists(port_file) else []
            if len(written) >= ports:
                return p, [int(x) for x in written[:ports]]
            if p.poll() is not None:
                self.fail("server %s exited with status %d while starting" % (name, p.returncode))
            if time.monotonic() > deadline:
                self.fail("server %s did not write its port file within 20 s" % name)
            time.sleep(0.02)

    def kill_when_acknowledged(self, feeder, server, target, rng, k):
        """Waits (at most 60 s) until the feeder has `target` documents
        acknowledged, kills the server with SIGKILL after a random 0-40 ms
        and waits until the feeder has noticed; returns what was
        acknowledged by then. `k` numbers the crash in messages."""
        deadline = time.monotonic() + 60
        while True:
            with feeder.lock:
                acked = feeder.acked
            if acked >= target or feeder.offline.is_set() or time.monotonic() > deadline:
                break
            time.sleep(0.001)
        if feeder.error:
            self.fail("feeder: " + feeder.error)
        if acked < target:
            self.fail("crash %d: only %d documents acknowledged after 60 s (waiting for %d)" % (k, acked, target))
        time.sleep(rng.uniform(0, 0.04))
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=10)
        if not feeder.offline.wait(timeout=30):
            self.fail("crash %d: the feeder did not notice the dead server" % k)
        if feeder.error:
            self.fail("feeder: " + feeder.error)
        with feeder.lock:
            return feeder.acked

    def check_recovered(self, acked, wal_seq, k, n_docs):
        """Nothing acknowledged lost, nothing beyond what was sent."""
        if wal_seq < acked:
            self.fail("crash %d: %d documents acknowledged but only %d recovered" % (k, acked, wal_seq))
        if wal_seq > n_docs:
            self.fail("crash %d: wal_sequence %d beyond the %d documents sent" % (k, wal_seq, n_docs))

    @staticmethod
    def resume(feeder, port, wal_seq):
        """Feeding goes on from the first document that is not in the log."""
        with feeder.lock:
            feeder.next_index = wal_seq
            feeder.acked = wal_seq
        feeder.port = port
        feeder.offline.clear()
        feeder.go.set()
