"""What the crash tests of `tributary serve` share (server_crash.sh,
server_crash_live.sh): the stream's frames, and a feeder thread that sends
documents in order over the binary protocol and tracks what was
acknowledged while the server is killed under it."""
import threading

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
