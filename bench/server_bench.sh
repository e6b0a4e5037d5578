#!/usr/bin/env bash
# Loopback load benchmark of `tributary serve` (issue 5, "Speed"): predictions
# and learning at 1, 8 and 64 connections, with the load generator
# bench/server/server_load.cc. Writes bench/SERVER_RESULTS.md (or OUT).
#
# Usage: bench/server_bench.sh [BUILD_DIR] [OUT.md]
#   BUILD_DIR  a build with bin/tributary (default: build); bin/server_load is
#              used when built (bench/server/CMakeLists.txt), else compiled here
#              with g++ against BUILD_DIR's generated protobuf classes.
#   DURATION=3 WARMUP=1 (seconds per configuration; learn runs use 2x warmup)
#   SERVE_FLAGS="--select off" (extra serve flags: the server's defaults learn
#   with the live learner; --select off is one learner, the default before it)
#
# Workload: 20,000 synthetic documents (20 classes, vocabulary 10,000, 8-24
# tokens each), multinomial naive Bayes, NCLL; the server runs with its
# defaults (2 I/O threads, publish every 10 ms or 1,000 updates) and group
# commit every 10 ms (--fsync interval --fsync-interval-ms 10) on the data
# directory's file system. Client and server share the machine's cores.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
OUT=${2:-$SRC/bench/SERVER_RESULTS.md}
T=$BUILD/bin/tributary
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
[[ -x "$T" ]] || { echo "no $T: build first (ninja -C $BUILD tributary_cli)" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/server_bench.XXXXXX")
srv_pid=
cleanup() {
  if [[ -n "$srv_pid" ]] && kill -0 "$srv_pid" 2>/dev/null; then kill -9 "$srv_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

LOAD=$BUILD/bin/server_load
if [[ ! -x "$LOAD" ]]; then
  echo "building the load generator (no $LOAD)" >&2
  LOAD=$dir/server_load
  g++ -O2 -std=c++20 -I "$BUILD/proto/gen" "$SRC/bench/server/server_load.cc" "$BUILD/lib/libtributary_proto.a" \
    -lprotobuf -lpthread -o "$LOAD"
fi

python3 - "$dir/bench.tsv" <<'EOF'
import random, sys
rng = random.Random(5)
K, V = 20, 10000
topic = [[rng.randrange(V) for _ in range(200)] for _ in range(K)]
with open(sys.argv[1], "w") as f:
    for i in range(20000):
        k = rng.randrange(K)
        toks = ["w%d" % (rng.choice(topic[k]) if rng.random() < 0.4 else rng.randrange(V))
                for _ in range(rng.randint(8, 24))]
        f.write("c%d\t%s\n" % (k, " ".join(toks)))
EOF
"$T" convert -q --format tsv --no-frame-checksum --in "$dir/bench.tsv" --out "$dir/bench.pb"  # format 1: server_load reads plain frames

# shellcheck disable=SC2086  # SERVE_FLAGS: extra serve flags, split on purpose
"$T" serve --data-dir "$dir/data" --schema "$dir/bench.pb" --n 1000000 --listen 127.0.0.1:0 \
  --port-file "$dir/port" --fsync interval --fsync-interval-ms 10 ${SERVE_FLAGS:-} 2>"$dir/server.log" &
srv_pid=$!
for _ in $(seq 1 100); do [[ -s "$dir/port" ]] && break; sleep 0.1; done
[[ -s "$dir/port" ]] || { cat "$dir/server.log" >&2; echo "server did not start" >&2; exit 1; }
port=$(cut -d' ' -f1 "$dir/port")

python3 - "$T" "$LOAD" "$port" "$srv_pid" "$dir" "$OUT" "$DURATION" "$WARMUP" "$BUILD" "$SRC" <<'EOF'
import json, os, platform, subprocess, sys, threading, time
T, LOAD, PORT, PID, DIR, OUT, DUR, WARM, BUILD, SRC = sys.argv[1:]
DUR, WARM = float(DUR), float(WARM)
TICK = os.sysconf("SC_CLK_TCK")

def threads_cpu():
    """CPU seconds per server thread, keyed by tid."""
    out = {}
    for tid in os.listdir("/proc/%s/task" % PID):
        try:
            f = open("/proc/%s/task/%s/stat" % (PID, tid)).read().rsplit(")", 1)[1].split()
            out[int(tid)] = (int(f[11]) + int(f[12])) / TICK
        except OSError:
            pass
    return out

def stats():
    r = subprocess.run([T, "client", "stats", "--connect", "127.0.0.1:" + PORT, "--json"],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)

def run(label, mode, conns, batch, pipeline):
    warm = WARM * (2 if mode == "learn" else 1)
    p = subprocess.Popen([LOAD, "--connect", "127.0.0.1:" + PORT, "--in", DIR + "/bench.pb", "--mode", mode,
                          "--connections", str(conns), "--batch", str(batch), "--pipeline", str(pipeline),
                          "--duration", str(DUR), "--warmup", str(warm), "--json", "--label", label],
                         stdout=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    time.sleep(0.2 + warm)  # the generator's window opens 0.2 s + warmup after it starts
    s0, c0, w0 = stats(), threads_cpu(), time.monotonic()
    time.sleep(DUR)
    s1, c1, w1 = stats(), threads_cpu(), time.monotonic()
    out, _ = p.communicate(timeout=120)
    if p.returncode != 0:
        sys.exit("server_load failed (%s): %s" % (label, out))
    r = json.loads(out)
    wall = w1 - w0
    per_thread = sorted(((c1[t] - c0.get(t, 0.0)) / wall for t in c1), reverse=True)
    r["server_cpu"] = sum(per_thread)
    r["server_top_threads"] = per_thread[:3]
    r["learned_per_s"] = (s1["documents_learned"] - s0["documents_learned"]) / wall
    r["queue_depth_end"] = s1["queue_depth"]
    r["client_cpu"] = r["client_cpu_s"] / DUR
    print("%-28s %9.0f req/s %9.0f docs/s  p50 %7.3f ms  p99 %7.3f ms  server cpu %.2f (top %s)  client cpu %.2f%s"
          % (label, r["requests_per_s"], r["documents_per_s"], r["p50_ms"], r["p99_ms"], r["server_cpu"],
             "/".join("%.2f" % x for x in r["server_top_threads"]), r["client_cpu"],
             "  learned %.0f/s queue %d" % (r["learned_per_s"], r["queue_depth_end"]) if mode == "learn" else ""),
          flush=True)
    return r

load_before = open("/proc/loadavg").read().split()[:3]
configs = []
for batch, pipes in ((1, (1, 8)), (16, (1, 4))):
    for conns in (1, 8, 64):
        for pipe in pipes:
            configs.append(("predict b%d c%d p%d" % (batch, conns, pipe), "predict", conns, batch, pipe))
for conns in (1, 8, 64):
    for batch, pipe in ((100, 1), (100, 4)):
        configs.append(("learn b%d c%d p%d" % (batch, conns, pipe), "learn", conns, batch, pipe))
results = [run(*c) for c in configs]
load_after = open("/proc/loadavg").read().split()[:3]

def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"

cpu = sh("lscpu | sed -n 's/^Model name: *//p' | head -1")
fs = sh("df -T '%s' | awk 'NR==2 {print $2\" on \"$1}'" % DIR)
build_type = sh("sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' '%s/CMakeCache.txt'" % BUILD)
commit = sh("git -C '%s' rev-parse --short HEAD" % SRC) + (" (+ uncommitted changes)" if sh("git -C '%s' status --porcelain --untracked-files=no" % SRC) else "")
def best(pred):
    c = [r for r in results if pred(r)]
    return max(c, key=lambda r: r["documents_per_s"]) if c else None
best_pred = {b: best(lambda r, b=b: r["mode"] == "predict" and r["batch"] == b and r["p99_ms"] < 5.0) for b in (1, 16)}
# Learning: sustained = min(acknowledged/s, learned/s) over the window, since
# the queue can fill (acks ahead of learning) or drain (learning ahead of acks).
for r in results:
    if r["mode"] == "learn":
        r["sustained"] = min(r["documents_per_s"], r["learned_per_s"])
best_learn = max((r for r in results if r["mode"] == "learn"), key=lambda r: r["sustained"], default=None)

L = []
L.append("# `tributary serve` on loopback: load benchmark\n")
L.append("Generated by `bench/server_bench.sh` (load generator: `bench/server/server_load.cc`). "
         "Do not edit by hand; rerun the script.\n")
L.append("- Date: %s" % time.strftime("%Y-%m-%d %H:%M:%S %Z"))
L.append("- Machine: %s, %d cores (`nproc`), Linux %s; load average before/after: %s / %s"
         % (cpu, os.cpu_count(), platform.release(), " ".join(load_before), " ".join(load_after)))
L.append("- Build: %s, commit %s" % (build_type or "?", commit))
L.append("- Server: `tributary serve --schema bench.pb --n 1000000 --fsync interval --fsync-interval-ms 10` "
         "(defaults: 2 I/O threads, queue 100,000 documents, publish every 10 ms or 1,000 updates, "
         "max 128 requests in flight per connection); data directory on %s" % fs)
L.append("- Model: multinomial naive Bayes, NCLL; 20 classes, vocabulary 10,000; documents of 8-24 tokens, "
         "sent as model term ids")
L.append("- Client: one `server_load` process, one thread, epoll; closed loop: each connection keeps "
         "`pipeline` requests in flight; %.0f s warm-up (learn: %.0f s), then %.0f s measured. "
         "Latency: request written -> response read. Client and server share the same %d cores."
         % (WARM, 2 * WARM, DUR, os.cpu_count()))
L.append("")
L.append("## Targets (issue 5)\n")
for b in (1, 16):
    r = best_pred[b]
    if r:
        L.append("- Predictions, %d document%s per request: best with p99 < 5 ms: **%s documents/s** (%s: p50 %.2f ms, "
                 "p99 %.2f ms) -> target (>= 100,000/s, p99 < 5 ms) %s"
                 % (b, "" if b == 1 else "s", format(round(r["documents_per_s"]), ","), r["label"], r["p50_ms"],
                    r["p99_ms"], "met" if r["documents_per_s"] >= 100000 else "NOT met"))
    else:
        L.append("- Predictions, %d document(s) per request: no configuration had p99 < 5 ms -> target NOT met" % b)
if best_learn:
    r = best_learn
    L.append("- Learning, fsync every 10 ms: best sustained rate (min of acknowledged/s and learned/s): "
             "**%s documents/s** (%s: %s acknowledged/s, %s learned/s, ack p50 %.1f ms, p99 %.1f ms) "
             "-> target (>= 50,000/s) %s"
             % (format(round(r["sustained"]), ","), r["label"], format(round(r["documents_per_s"]), ","),
                format(round(r["learned_per_s"]), ","), r["p50_ms"], r["p99_ms"],
                "met" if r["sustained"] >= 50000 else "NOT met"))
L.append("")
L.append("## Results\n")
L.append("`b` documents per request, `c` connections, `p` requests in flight per connection. "
         "Server CPU: cores used by the server process in the window (its three busiest threads in parentheses); "
         "client CPU likewise for the load generator. For learn runs, *learned/s* is the server's own "
         "`documents_learned` rate in the window (acknowledged documents wait in the bounded queue until learned) "
         "and *queue* the queue depth at the end of the window.\n")
L.append("| configuration | requests/s | documents/s | p50 ms | p99 ms | p99.9 ms | server CPU | client CPU | learned/s | queue |")
L.append("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
for r in results:
    learn = r["mode"] == "learn"
    n = lambda x: format(round(x), ",")
    L.append("| %s | %s | %s | %.3f | %.3f | %.3f | %.2f (%s) | %.2f | %s | %s |"
             % (r["label"], n(r["requests_per_s"]), n(r["documents_per_s"]), r["p50_ms"], r["p99_ms"], r["p999_ms"],
                r["server_cpu"], " / ".join("%.2f" % x for x in r["server_top_threads"]), r["client_cpu"],
                n(r["learned_per_s"]) if learn else "", n(r["queue_depth_end"]) if learn else ""))
L.append("")
open(DIR + "/table.md", "w").write("\n".join(L) + "\n")
EOF
notes=$SRC/bench/server/NOTES.md
{ cat "$dir/table.md"; if [[ -f "$notes" ]]; then echo; cat "$notes"; fi; } > "$OUT"
kill -TERM "$srv_pid"
rc=0; wait "$srv_pid" || rc=$?
srv_pid=
[[ $rc -eq 0 ]] || echo "warning: the server exited with status $rc" >&2
echo "wrote $OUT"
