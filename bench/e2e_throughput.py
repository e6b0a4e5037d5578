#!/usr/bin/env python3
"""End-to-end throughput of the `tributary` program on synthetic streams.

For each vocabulary size (default 10k and 1M terms; the same documents, see gen_synthetic.py) this
  1. generates the TSV (python3, fixed seed) and converts it with `tributary convert --format tsv`;
  2. times `tributary train --family multinomial --loss L` for L in ncll, hinge, nll and reports the
     program's own documents/s (wall clock of the training loop, reading and decoding the protobuf stream
     included; model creation and the final snapshot write excluded) and the whole process's CPU and wall
     time;
  3. times `tributary eval --json` on the same stream (prediction: decode, score, metrics). eval also loads
     the snapshot (360 MB at 1M terms), so it is timed once more on a one-document stream and the
     difference gives the prediction rate without the load;
  4. prints documents/s for each and the 1M/10k ratios.
Each timing is repeated --reps times and the best run kept (the machine may be shared: see the load
averages printed). With --baseline BIN a second build is timed in the same run, interleaved with the
first, for before/after comparisons.

Usage: bench/e2e_throughput.py [--bin build/bin/tributary] [--docs 1000000] [--reps 3] [--baseline BIN]
"""
import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def machine():
    info = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    cores = info.get("Core(s) per socket", "?")
    sockets = info.get("Socket(s)", "?")
    tpc = info.get("Thread(s) per core", "?")
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = "%.0f GiB RAM" % (kb / 2**20)
    except OSError:
        pass
    return {
        "model": info.get("Model name", platform.processor() or "?"),
        "cpus": info.get("CPU(s)", "?"),
        "cores": "%s core(s)/socket x %s socket(s), %s thread(s)/core" % (cores, sockets, tpc),
        "caches": "L1d %s, L2 %s, L3 %s" % (info.get("L1d cache", "?"), info.get("L2 cache", "?"),
                                            info.get("L3 cache", "?")),
        "hypervisor": info.get("Hypervisor vendor", "none"),
        "memory": mem,
        "kernel": platform.release(),
    }


def loadavg():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def git_rev():
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain"], capture_output=True, text=True,
                               check=True).stdout.strip()
        return rev + (" (+ uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def run(cmd, **kw):
    """Runs cmd; returns (wall seconds, child CPU seconds, CompletedProcess)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode != 0:
        sys.stderr.write("FAILED: %s\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
        sys.exit(1)
    return wall, cpu, p


def generate(work, docs, vocab, seed):
    tsv = os.path.join(work, "synth_d%d_v%d_s%d.tsv" % (docs, vocab, seed))
    stats = tsv + ".stats"
    if not (os.path.exists(tsv) and os.path.exists(stats)):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, os.path.join(HERE, "gen_synthetic.py"), "--docs", str(docs), "--vocab",
                            str(vocab), "--seed", str(seed), "--stats", "--out", tsv + ".tmp"],
                           capture_output=True, text=True, check=True)
        os.replace(tsv + ".tmp", tsv)
        with open(stats, "w") as f:
            f.write(p.stderr)
        print("  generated %s in %.1f s" % (os.path.basename(tsv), time.perf_counter() - t0))
    m = re.search(r"distinct_terms=(\d+)", open(stats).read())
    return tsv, int(m.group(1))


def best(values, higher=True):
    return max(values) if higher else min(values)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_bin = os.environ.get("TRIBUTARY_BIN") or os.path.join(REPO, "build", "bin", "tributary")
    ap.add_argument("--bin", default=default_bin, help="the program (default: $TRIBUTARY_BIN or build/bin/tributary)")
    ap.add_argument("--baseline", help="a second build of the program, timed in the same run")
    ap.add_argument("--docs", type=int, default=1000000)
    ap.add_argument("--vocabs", default="10000,1000000")
    ap.add_argument("--losses", default="ncll,hinge,nll")
    ap.add_argument("--seed", type=int, default=20140101)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "tributary-bench"))
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    bins = [("current", os.path.abspath(a.bin))]
    if a.baseline:
        bins.append(("baseline", os.path.abspath(a.baseline)))
    for _, b in bins:
        if not os.access(b, os.X_OK):
            sys.exit("no program at %s (build it, or pass --bin)" % b)
    vocabs = [int(v) for v in a.vocabs.split(",")]
    losses = a.losses.split(",")
    m = machine()
    print("# Tributary end-to-end throughput")
    print("date      %s" % time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    print("machine   %s; %s CPUs (%s); %s; %s; hypervisor %s; kernel %s" %
          (m["model"], m["cpus"], m["cores"], m["caches"], m["memory"], m["hypervisor"], m["kernel"]))
    print("source    %s" % git_rev())
    for name, b in bins:
        print("program   %-8s %s" % (name, b))
    print("data      %d documents, 8-12 tokens each (mean 10), 45 classes, seed %d; best of %d runs; one thread" %
          (a.docs, a.seed, a.reps))
    print("load avg  %s (start)" % loadavg())
    sys.stdout.flush()

    results = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": m, "docs": a.docs, "reps": a.reps,
               "runs": {}}
    for V in vocabs:
        tsv, distinct = generate(a.work, a.docs, V, a.seed)
        pb = tsv[:-4] + ".pb"
        small_tsv = tsv[:-4] + ".one.tsv"
        small_pb = tsv[:-4] + ".one.pb"
        conv = bins[0][1]
        wall, cpu, p = run([conv, "convert", "--format", "tsv", "--in", tsv, "--out", pb])
        m_terms = re.search(r"(\d+) terms", p.stderr)
        terms = int(m_terms.group(1)) if m_terms else distinct
        print("\n## vocabulary %d (%d distinct terms in the stream); convert: %.2f s wall, %.0f docs/s" %
              (V, terms, wall, a.docs / wall))
        with open(tsv) as f, open(small_tsv, "w") as g:
            g.write(f.readline())
        run([conv, "convert", "--format", "tsv", "--in", small_tsv, "--out", small_pb, "-q"])
        for loss in losses:
            for name, b in bins:
                key = "%s/%s/%d" % (name, loss, V)
                results["runs"][key] = {"train_docs_per_s": [], "train_cpu_s": [], "train_wall_s": []}
            model_paths = {}
            for rep in range(a.reps):
                for name, b in bins:  # interleaved
                    key = "%s/%s/%d" % (name, loss, V)
                    out = os.path.join(a.work, "model_%s_%s_%d.trib" % (name, loss, V))
                    model_paths[name] = out
                    wall, cpu, p = run([b, "train", "--family", "multinomial", "--loss", loss, "--in", pb,
                                        "--out", out])
                    mm = re.search(r"\(([0-9.e+]+) documents/s\)", p.stderr)
                    if not mm:
                        sys.exit("cannot read the rate from: " + p.stderr)
                    r = results["runs"][key]
                    r["train_docs_per_s"].append(float(mm.group(1)))
                    r["train_cpu_s"].append(cpu)
                    r["train_wall_s"].append(wall)
            for name, b in bins:
                key = "%s/%s/%d" % (name, loss, V)
                r = results["runs"][key]
                line = ("train  %-5s %-8s %9.0f docs/s (program's rate, best of %d; all: %s)  "
                        "process: %.2f s CPU, %.2f s wall" % (
                            loss, name, best(r["train_docs_per_s"]), a.reps,
                            " ".join("%.0f" % x for x in r["train_docs_per_s"]),
                            best(r["train_cpu_s"], False), best(r["train_wall_s"], False)))
                print(line)
            if not a.no_eval and loss == "ncll":
                for name, b in bins:
                    key = "%s/%s/%d" % (name, loss, V)
                    r = results["runs"][key]
                    full, one = [], []
                    for rep in range(a.reps):
                        wall_full, cpu_full, p = run([b, "eval", "--model", model_paths[name], "--in", pb, "--json"])
                        wall_one, cpu_one, _ = run([b, "eval", "--model", model_paths[name], "--in", small_pb,
                                                    "--json"])
                        full.append((wall_full, cpu_full))
                        one.append((wall_one, cpu_one))
                    acc = json.loads(p.stdout.strip().splitlines()[-1]).get("accuracy")
                    wf = min(x[0] for x in full)
                    wo = min(x[0] for x in one)
                    cf = min(x[1] for x in full)
                    co = min(x[1] for x in one)
                    r["eval_docs_per_s_incl_load"] = a.docs / wf
                    r["eval_docs_per_s"] = (a.docs - 1) / max(wf - wo, 1e-9)
                    r["eval_docs_per_s_cpu"] = (a.docs - 1) / max(cf - co, 1e-9)
                    r["eval_accuracy"] = acc
                    print("eval   %-5s %-8s %9.0f docs/s (wall, model load subtracted; %.0f docs/s by CPU time; "
                          "%.0f docs/s incl. the %.2f s load)  training-set accuracy %.4f" %
                          ("ncll", name, r["eval_docs_per_s"], r["eval_docs_per_s_cpu"],
                           r["eval_docs_per_s_incl_load"], wo, acc if acc is not None else float("nan")))
            sys.stdout.flush()

    print("\n## ratios")
    if len(vocabs) >= 2:
        v0, v1 = vocabs[0], vocabs[-1]
        for name, _ in bins:
            for loss in losses:
                r0 = results["runs"]["%s/%s/%d" % (name, loss, v0)]
                r1 = results["runs"]["%s/%s/%d" % (name, loss, v1)]
                t0, t1 = best(r0["train_docs_per_s"]), best(r1["train_docs_per_s"])
                print("train  %-5s %-8s vocab %d / %d: %.2fx the documents/s (slowdown %.2fx)" %
                      (loss, name, v1, v0, t1 / t0, t0 / t1))
            if not a.no_eval:
                r0 = results["runs"]["%s/ncll/%d" % (name, v0)]
                r1 = results["runs"]["%s/ncll/%d" % (name, v1)]
                print("eval   ncll  %-8s vocab %d / %d: %.2fx the documents/s (slowdown %.2fx)" %
                      (name, v1, v0, r1["eval_docs_per_s"] / r0["eval_docs_per_s"],
                       r0["eval_docs_per_s"] / r1["eval_docs_per_s"]))
    if a.baseline:
        for V in vocabs:
            for loss in losses:
                rc = results["runs"]["current/%s/%d" % (loss, V)]
                rb = results["runs"]["baseline/%s/%d" % (loss, V)]
                c, b = best(rc["train_docs_per_s"]), best(rb["train_docs_per_s"])
                print("train  %-5s vocab %7d: current / baseline = %.2fx" % (loss, V, c / b))
            if not a.no_eval:
                c = results["runs"]["current/ncll/%d" % V]["eval_docs_per_s"]
                b = results["runs"]["baseline/ncll/%d" % V]["eval_docs_per_s"]
                print("eval   ncll  vocab %7d: current / baseline = %.2fx" % (V, c / b))
    print("load avg  %s (end)" % loadavg())
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    for name in os.listdir(a.work):
        if name.startswith("model_") and name.endswith(".trib"):
            os.remove(os.path.join(a.work, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
