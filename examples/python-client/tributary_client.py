#!/usr/bin/env python3
"""A small Python client for `tributary serve`, and a command-line wrapper.

The protocol (proto/tributary/v1/tributary.proto, "Service" section) is plain
protobuf over TCP: each side sends frames

    varint(len(message)) message

The client sends `Request` frames, the server answers each one with exactly
one `Response` carrying the same request_id, in request order per connection.
So a client needs only a protobuf runtime and a socket; this file uses
Debian's python3-protobuf.

The Python classes for the messages (tributary_pb2.py) are generated on first
use with `protoc --python_out` from the .proto file, into a cache directory,
unless a `tributary_pb2` module is already importable.

    from tributary_client import Client, read_stream
    with Client("127.0.0.1", 7070) as c:
        header, docs = read_stream("train.pb")
        print(c.learn(docs).acknowledged)
        print(c.predict([c.pb2.Document(tokens=["free", "money"])]).predictions[0].predicted)
        print(c.stats().documents_learned)

Environment: TRIBUTARY_PROTO (path of tributary.proto), TRIBUTARY_PB2_DIR
(where the generated module is cached), PROTOC (the protoc program).
"""

import argparse
import hashlib
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import zlib

# ---- The generated protobuf module --------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))
_PROTO_CANDIDATES = [
    os.path.join(_HERE, "..", "..", "proto", "tributary", "v1", "tributary.proto"),  # source tree
    "/usr/local/share/tributary/proto/tributary/v1/tributary.proto",  # `cmake --install`
    "/usr/share/tributary/proto/tributary/v1/tributary.proto",
]


def find_proto():
    """The path of tributary.proto: $TRIBUTARY_PROTO, the source tree, or an install."""
    env = os.environ.get("TRIBUTARY_PROTO")
    if env:
        return env
    for p in _PROTO_CANDIDATES:
        if os.path.exists(p):
            return os.path.normpath(p)
    raise FileNotFoundError("tributary.proto not found; set TRIBUTARY_PROTO to its path")


def load_pb2(proto_path=None, cache_dir=None):
    """Returns the tributary_pb2 module, generating it with protoc if needed.

    An importable `tributary_pb2` wins when no proto_path is given. Otherwise
    the module is generated into cache_dir/<hash of the .proto>/ so that a
    changed .proto is never served stale code.
    """
    if proto_path is None:
        try:
            return importlib.import_module("tributary_pb2")
        except ImportError:
            pass
        proto_path = find_proto()
    with open(proto_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    if cache_dir is None:
        cache_dir = os.environ.get("TRIBUTARY_PB2_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(tempfile.gettempdir(), "tributary-%d" % os.getuid()),
            "tributary-client")
    out = os.path.join(cache_dir, digest)
    if not os.path.exists(os.path.join(out, "tributary_pb2.py")):
        protoc = os.environ.get("PROTOC") or shutil.which("protoc")
        if not protoc:
            raise RuntimeError("protoc not found (Debian: apt-get install protobuf-compiler)")
        os.makedirs(cache_dir, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=cache_dir)  # generate, then rename: safe under concurrency
        proto_dir, proto_file = os.path.split(os.path.abspath(proto_path))
        subprocess.run([protoc, "-I", proto_dir, "--python_out", tmp, proto_file], check=True)
        try:
            os.rename(tmp, out)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    if out not in sys.path:
        sys.path.insert(0, out)
    return importlib.import_module("tributary_pb2")


# ---- Framing ------------------------------------------------------------------------


def encode_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def frame(message):
    """varint(len) + serialized message."""
    body = message.SerializeToString()
    return encode_varint(len(body)) + body


def read_frame(read):
    """Reads one frame with read(n) -> bytes (b'' at end of input).

    Returns the body, or None at a clean end of input (before any byte).
    """
    length, shift = 0, 0
    while True:
        b = read(1)
        if not b:
            if shift == 0:
                return None
            raise EOFError("end of input inside a frame length")
        length |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("bad frame length")
    body = read(length)
    if len(body) != length:
        raise EOFError("end of input inside a frame of %d bytes" % length)
    return body


# ---- Stream files (the same framing, first frame a StreamHeader) -------------------------


def frame_crc(body):
    """The masked CRC-32 of a format 2 frame: over varint(len) + body (see StreamHeader)."""
    crc = zlib.crc32(body, zlib.crc32(encode_varint(len(body))))
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _read_crc(read, what):
    b = read(4)
    if len(b) != 4:
        raise EOFError("end of input inside the checksum of %s" % what)
    return int.from_bytes(b, "little")


def read_stream(path, pb2=None):
    """Reads a document stream file: returns (StreamHeader, [Document]).

    Format 1 (plain frames) and format 2 (a CRC per frame, written by
    `tributary convert --frame-checksum`) are read; a damaged format 2 frame
    raises ValueError naming the document.
    """
    pb2 = pb2 or load_pb2()
    with open(path, "rb") as f:
        body = read_frame(f.read)
        if body is None:
            raise ValueError("%s: empty stream" % path)
        header = pb2.StreamHeader.FromString(body)
        if header.magic != "tributary.stream":
            raise ValueError("%s: not a tributary stream (magic %r)" % (path, header.magic))
        if header.format_version not in (1, 2):
            raise ValueError("%s: stream format_version %d is not supported" % (path, header.format_version))
        checked = header.format_version == 2
        if checked and _read_crc(f.read, "the header") != frame_crc(body):
            raise ValueError("%s: stream header checksum mismatch" % path)
        docs = []
        while True:
            length, shift = 0, 0
            b = f.read(1)
            if not b:
                return header, docs
            while True:
                length |= (b[0] & 0x7F) << shift
                if not b[0] & 0x80:
                    break
                shift += 7
                b = f.read(1)
                if not b or shift > 63:
                    raise EOFError("%s: end of input inside a frame length" % path)
            crc = _read_crc(f.read, "document #%d" % len(docs)) if checked else None
            body = f.read(length)
            if len(body) != length:
                raise EOFError("%s: end of input inside a frame of %d bytes" % (path, length))
            if checked and crc != frame_crc(body):
                raise ValueError("%s: document #%d: checksum mismatch" % (path, len(docs)))
            docs.append(pb2.Document.FromString(body))


def write_stream(path, schema, docs, pb2=None, source="tributary_client.py"):
    """Writes a document stream: a StreamHeader with `schema`, then the documents."""
    pb2 = pb2 or load_pb2()
    docs = list(docs)
    header = pb2.StreamHeader(magic="tributary.stream", format_version=1, schema=schema,
                              document_count=len(docs), source=source)
    with open(path, "wb") as f:
        f.write(frame(header))
        for d in docs:
            f.write(frame(d))


def ids_to_tokens(doc, vocabulary):
    """A copy of `doc` with its stream term ids replaced by tokens (the server
    speaks the model's ids, which need not be the stream's): one token per
    distinct term, its count unchanged in token_counts (the server refuses
    counts that are not finite and > 0, naming the document)."""
    out = type(doc)()
    out.CopyFrom(doc)
    if doc.term_ids:
        del out.term_ids[:]
        del out.term_counts[:]
        if not doc.token_counts:
            out.token_counts.extend([1.0] * len(doc.tokens))
        counts = {}
        for i, t in sorted(enumerate(doc.term_ids), key=lambda p: (p[1], p[0])):
            counts[t] = counts.get(t, 0.0) + (doc.term_counts[i] if doc.term_counts else 1.0)
        for t, count in counts.items():
            out.tokens.append(vocabulary[t])
            out.token_counts.append(count)
    return out


# ---- The client ----------------------------------------------------------------------------


class TributaryError(Exception):
    """The server answered with a non-OK status."""

    def __init__(self, response, pb2):
        self.code = pb2.Response.Code.Name(response.code)
        self.message = response.message
        self.response = response
        super().__init__("server answered %s: %s" % (self.code, self.message))


class Client:
    """One connection to a server. Not thread-safe: use one per thread.

    The call methods (learn, predict, stats, snapshot, ping) send one request
    and wait for its answer; send() and receive() let a caller pipeline
    several requests (answers come back in request order).
    """

    def __init__(self, host="127.0.0.1", port=7070, auth_token=None, timeout=60.0, pb2=None):
        self.pb2 = pb2 or load_pb2()
        self.auth_token = auth_token
        self._next_id = 1
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._rfile = self._sock.makefile("rb")

    def close(self):
        self._rfile.close()
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- low level: pipelining --
    def new_request(self):
        r = self.pb2.Request(request_id=self._next_id)
        self._next_id += 1
        if self.auth_token:
            r.auth_token = self.auth_token
        return r

    def send(self, request):
        self._sock.sendall(frame(request))

    def receive(self, check=True):
        body = read_frame(self._rfile.read)
        if body is None:
            raise ConnectionError("server closed the connection")
        response = self.pb2.Response.FromString(body)
        if check and response.code != self.pb2.Response.OK:
            raise TributaryError(response, self.pb2)
        return response

    def call(self, request):
        self.send(request)
        response = self.receive()
        if response.request_id != request.request_id:
            raise RuntimeError("response %d to request %d" % (response.request_id, request.request_id))
        return response

    # -- one request, one answer --
    def learn(self, docs):
        """Learns `docs` (in the model's id space, or as tokens) in order.
        Returns a LearnResponse: acknowledged, first_sequence."""
        r = self.new_request()
        r.learn.documents.extend(docs)
        return self.call(r).learn

    def predict(self, docs):
        """Returns a PredictResponse: model_version, class_names, predictions."""
        r = self.new_request()
        r.predict.documents.extend(docs)
        return self.call(r).predict

    def stats(self):
        r = self.new_request()
        r.stats.SetInParent()
        return self.call(r).stats

    def snapshot(self):
        """Asks for a snapshot now; returns SnapshotResponse: path, wal_sequence."""
        r = self.new_request()
        r.snapshot.SetInParent()
        return self.call(r).snapshot

    def ping(self):
        r = self.new_request()
        r.ping.SetInParent()
        self.call(r)
        return True


# ---- Command line --------------------------------------------------------------------------


def _batches(items, n):
    for i in range(0, len(items), n):
        yield items[i:i + n]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Talk to `tributary serve` from Python.")
    ap.add_argument("action", choices=["learn", "predict", "stats", "snapshot", "ping"])
    ap.add_argument("--connect", default="127.0.0.1:7070", help="HOST:PORT")
    ap.add_argument("--in", dest="inp", help="document stream (learn, predict)")
    ap.add_argument("--batch", type=int, default=100, help="documents per request")
    ap.add_argument("--ids-as-is", action="store_true",
                    help="send term ids unchanged (the stream already uses the model's ids)")
    ap.add_argument("--auth-token-file")
    ap.add_argument("--proto", help="path of tributary.proto (default: found automatically)")
    ap.add_argument("--json", action="store_true", help="JSON output")
    a = ap.parse_args(argv)

    pb2 = load_pb2(a.proto)
    host, _, port = a.connect.rpartition(":")
    token = open(a.auth_token_file).read().strip() if a.auth_token_file else None
    def show(msg):  # StatsResponse / SnapshotResponse: flat messages of scalars
        if a.json:
            print(json.dumps({f.name: getattr(msg, f.name) for f in msg.DESCRIPTOR.fields}))
        else:
            print(msg, end="")

    with Client(host, int(port), auth_token=token, pb2=pb2) as c:
        if a.action == "ping":
            c.ping()
            print("pong")
        elif a.action == "stats":
            show(c.stats())
        elif a.action == "snapshot":
            show(c.snapshot())
        else:
            if not a.inp:
                ap.error("%s needs --in" % a.action)
            header, docs = read_stream(a.inp, pb2)
            vocab = header.schema.vocabulary
            if vocab and not a.ids_as_is:
                docs = [ids_to_tokens(d, vocab) for d in docs]
            acknowledged = 0
            for batch in _batches(docs, max(1, a.batch)):
                if a.action == "learn":
                    acknowledged += c.learn(batch).acknowledged
                else:
                    resp = c.predict(batch)
                    for p in resp.predictions:
                        if a.json:
                            print(json.dumps({"id": p.id, "predicted": p.predicted,
                                              "model_version": resp.model_version}))
                        else:
                            print("%s\t%s\t%d" % (p.id, p.predicted, resp.model_version))
            if a.action == "learn":
                print(json.dumps({"acknowledged": acknowledged}) if a.json
                      else "acknowledged %d documents" % acknowledged)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TributaryError as e:
        print("tributary_client: %s" % e, file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:  # e.g. `... predict | head`
        sys.stderr.close()
        sys.exit(0)
    except (OSError, ValueError) as e:
        print("tributary_client: %s" % e, file=sys.stderr)
        sys.exit(1)
