#!/usr/bin/env python3
"""Summarise bench/drift.sh's runs (one JSON object per line: corpus, kind,
learner, every, changes, curve = windowed prequential accuracy per `every`
documents, alarms = document indices) as a markdown table, and draw each
stream's curves with the alarms marked (--plots DIR, python3-matplotlib).

Per run, with c the first change point and W = `every` documents a window:
  accuracy     mean of the curve (prequential accuracy over the stream)
  before       mean of the 4 windows before c (2,000 documents at W = 500)
  low          the lowest window in the 2,000 documents after c
  recovery     documents after c until the first window at >= 90 % of before
  last5k       mean of the last 10 windows, minus before (points)
  alarms       the detector's alarms: after c (delay of the first), and
               before c (false alarms); on a stationary stream, all are false
"""
import argparse
import json
from collections import defaultdict


def summarise(r):
    curve, w = r["curve"], r["every"]
    out = {"accuracy": sum(curve) / len(curve)}
    ch = r["changes"]
    alarms = r.get("alarms")
    if not ch:
        out.update(before=None, low=None, recovery=None, last5k=None)
        if alarms is not None:
            out["false_alarms"] = len(alarms)
            out["alarm_text"] = "%d false (%.1f per 100k)" % (len(alarms), 1e5 * len(alarms) / r["documents"])
        return out
    c = ch[0]
    b = c // w
    before = curve[max(0, b - 4):b]
    out["before"] = sum(before) / len(before)
    after = curve[b:b + 2000 // w + 1]
    out["low"] = min(after) if after else None
    rec = None
    for i in range(b, len(curve)):
        if curve[i] >= 0.9 * out["before"]:
            rec = (i + 1) * w - c
            break
    out["recovery"] = rec
    tail = curve[-10:]
    out["last5k"] = 100 * (sum(tail) / len(tail) - out["before"])
    if alarms is not None:
        late = [a for a in alarms if a > c]
        early = [a for a in alarms if a <= c]
        out["alarm_text"] = ("first +%d" % (late[0] - c) if late else "none after") + ", %d before" % len(early)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--plots", default="")
    a = ap.parse_args()
    runs = [json.loads(l) for l in open(a.results) if l.strip()]
    by_stream = defaultdict(list)
    for r in runs:
        by_stream[(r["corpus"], r["kind"])].append(r)
    print("| corpus | stream | learner | accuracy | before | low | recovery (docs) | last 5k vs before | alarms |")
    print("|---|---|---|---|---|---|---|---|---|")
    f = lambda x, d=3: "–" if x is None else ("%.*f" % (d, x))
    for (corpus, kind), rs in by_stream.items():
        for r in rs:
            s = summarise(r)
            rec = s["recovery"]
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                corpus, kind, r["learner"], f(s["accuracy"]), f(s["before"]), f(s["low"]),
                "–" if s["before"] is None else (str(rec) if rec is not None else "never"),
                "–" if s["last5k"] is None else "%+.1f" % s["last5k"], s.get("alarm_text", "")))
    if a.plots:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        for (corpus, kind), rs in by_stream.items():
            fig, ax = plt.subplots(figsize=(8, 3.2))
            for r in rs:
                xs = [(i + 1) * r["every"] for i in range(len(r["curve"]))]
                ax.plot(xs, r["curve"], label=r["learner"], lw=1.2)
                for al in r.get("alarms") or []:
                    ax.axvline(al, color="red", lw=0.6, ls=":")
            for c in rs[0]["changes"]:
                ax.axvline(c, color="black", lw=1)
            ax.set_title("%s, %s (window accuracy per %d documents; black: change, red: alarms)" %
                         (corpus, kind, rs[0]["every"]), fontsize=9)
            ax.set_xlabel("documents")
            ax.legend(fontsize=7, loc="lower right")
            fig.tight_layout()
            fig.savefig("%s/drift_%s_%s.png" % (a.plots, corpus, kind), dpi=80)
            plt.close(fig)


if __name__ == "__main__":
    main()
