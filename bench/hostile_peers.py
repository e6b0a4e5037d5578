#!/usr/bin/python3
"""The reliability probe's attacks on `tributary serve`, measured (issue 41).

Runs the quick-start server (no --model, no --schema: open vocabulary, open
classes, the case the probe brought down) with a token, under a 2 GiB
address-space limit (RLIMIT_AS), and sends the probe's request kinds:

  1. learn: one document whose label is 1 MiB long
  2. learn: one document of 100,000 distinct terms
  3. learn: 10,000 new labels in one request
  4. predict over HTTP: 1.2 million tiny documents in one 15.6 MB body
  5. predict over the binary protocol: a 15 MB frame of tiny documents
  6. 2,000 idle connections without the token (both ports, from another
     local address, reopened as fast as possible) while an authenticated
     client makes 200 predictions, each on a new connection

and reports each answer, the server's peak RSS (VmHWM) and whether it is
still alive and healthy, plus the authenticated predictions' p50/p99.

Usage: /usr/bin/python3 bench/hostile_peers.py build/bin/tributary [--idle N] [--json OUT]
"""
import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import http.client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "hostile-bench-token"


def rss_mib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def call(port, path, body, token=True, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + TOKEN
    data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
    c.request("POST" if data is not None else "GET", path, body=data, headers=headers)
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, out


def varint(n):
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def read_frame(sock):
    n, shift = 0, 0
    while True:
        b = sock.recv(1)
        if not b:
            return None
        n |= (b[0] & 0x7F) << shift
        shift += 7
        if not b[0] & 0x80:
            break
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(1 << 20, n - len(data)))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tributary")
    ap.add_argument("--idle", type=int, default=2000)
    ap.add_argument("--json")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))

    tmp = tempfile.mkdtemp(prefix="hostile_")
    gen = os.path.join(tmp, "gen")
    os.makedirs(gen)
    subprocess.check_call(["protoc", "-I", os.path.join(ROOT, "proto"), "--python_out=" + gen,
                           os.path.join(ROOT, "proto/tributary/v1/tributary.proto")])
    sys.path.insert(0, gen)
    from tributary.v1 import tributary_pb2 as pb  # noqa: E402

    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(TOKEN + "\n")

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))

    port_file = os.path.join(tmp, "ports")
    log = open(os.path.join(tmp, "serve.log"), "w")
    srv = subprocess.Popen([a.tributary, "serve", "--data-dir", os.path.join(tmp, "data"), "--http",
                            "127.0.0.1:0", "--auth-token-file", os.path.join(tmp, "token"), "--port-file",
                            port_file], stdout=log, stderr=log, preexec_fn=limits)
    for _ in range(600):
        if os.path.exists(port_file) and open(port_file).read().strip():
            break
        time.sleep(0.05)
    port, http_port = map(int, open(port_file).read().split())
    try:
        return attack(a, pb, srv, port, http_port, tmp, log)
    finally:
        if srv.poll() is None:
            srv.kill()  # an interrupted run leaves no server behind


def attack(a, pb, srv, port, http_port, tmp, log):
    results = []

    def step(name, fn):
        t0 = time.time()
        try:
            outcome = fn()
        except Exception as e:  # noqa: BLE001 - the outcome is what is measured
            outcome = "error: %r" % (e,)
        alive = srv.poll() is None
        row = {"attack": name, "outcome": outcome, "seconds": round(time.time() - t0, 2), "alive": alive,
               "rss_mib": round(rss_mib(srv.pid, "VmRSS"), 1) if alive else None,
               "peak_rss_mib": round(rss_mib(srv.pid, "VmHWM"), 1) if alive else None}
        results.append(row)
        print("%-55s %-40s alive=%s rss=%s MiB peak=%s MiB" % (name, str(outcome)[:40], alive, row["rss_mib"],
                                                                row["peak_rss_mib"]), flush=True)

    def learn(docs):
        st, body = call(http_port, "/v1/learn", {"documents": docs})
        msg = json.loads(body).get("error", {}).get("message", "") if st != 200 else ""
        return "%d %s" % (st, msg[:60])

    step("learn: a 1 MiB label", lambda: learn([{"text": "hello world", "label": "L" * (1 << 20)}]))
    step("learn: one document of 100,000 distinct terms",
         lambda: learn([{"text": " ".join("w%d" % i for i in range(100000)), "label": "a"}]))
    step("learn: 10,000 new labels in one request",
         lambda: learn([{"text": "w1 w2", "label": "c%d" % i} for i in range(10000)]))

    def big_predict():
        docs = [{"text": "w"}] * 1200000
        st, body = call(http_port, "/v1/predict", {"documents": docs})
        return "%d (%d-byte answer)" % (st, len(body))

    step("predict over HTTP: 1.2 M tiny documents (15.6 MB)", big_predict)

    def binary_predict():
        req = pb.Request()
        req.request_id = 1
        req.auth_token = TOKEN
        d = pb.Document()
        d.text = "w"
        for _ in range(1500000):
            req.predict.documents.add().CopyFrom(d)
        body = req.SerializeToString()
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
        s.sendall(varint(len(body)) + body)
        frame = read_frame(s)
        s.close()
        if frame is None:
            return "connection closed (%d-byte frame)" % len(body)
        r = pb.Response()
        r.ParseFromString(frame)
        return "%s (%d-byte frame, %d-byte answer)" % (pb.Response.Code.Name(r.code), len(body), len(frame))

    step("predict over the binary protocol: a 15 MB frame", binary_predict)

    stop = threading.Event()
    idle = []

    def flood():
        while not stop.is_set():
            try:
                for p in (port, http_port):
                    # From another address of this machine (127/8): the
                    # server tells the strangers' address from the client's.
                    idle.append(socket.create_connection(("127.0.0.1", p), timeout=5,
                                                         source_address=("127.0.0.2", 0)))
            except OSError:
                time.sleep(0.01)
            if len(idle) > a.idle:
                old = idle.pop(0)
                old.close()

    def under_flood():
        th = threading.Thread(target=flood, daemon=True)
        th.start()
        while len(idle) < a.idle and th.is_alive():
            time.sleep(0.05)
        lat, ok = [], 0
        for i in range(200):
            t0 = time.time()
            try:
                st, _ = call(http_port, "/v1/predict", {"documents": [{"text": "w1 w2 hello"}]}, timeout=30)
                ok += st == 200
            except OSError:
                pass
            lat.append((time.time() - t0) * 1000)
        stop.set()
        th.join()
        for s in idle:
            s.close()
        lat.sort()
        return "%d/200 answered, p50 %.1f ms, p99 %.1f ms" % (ok, lat[100], lat[197])

    step("%d idle connections without the token; 200 predictions" % a.idle, under_flood)

    def healthy():
        st, body = call(http_port, "/healthz", None, token=False)
        return "healthz %d" % st

    step("afterwards", healthy)
    st, metrics = call(http_port, "/metrics", None, token=False)
    keep = [l for l in metrics.decode().splitlines()
            if l.startswith(("tributary_limit_refusals_total", "tributary_model_", "tributary_new_terms_dropped",
                             "tributary_unauthenticated"))]
    print("\n".join(keep))
    srv.terminate()
    srv.wait(timeout=60)
    log.close()
    print("serve's start-up lines:\n" + "".join(open(os.path.join(tmp, "serve.log")).readlines()[:3]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "metrics": keep}, f, indent=1)
    return 0 if all(r["alive"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
