"""Pictures of a stream's learning: the prequential learning curve and a
topic model's topics, with matplotlib.

This file imports nothing from the package: `tributary prequential --plot
curve.png` runs this same code (compiled into the program, run by Debian's
python3) on the curve it measured.

    result = tributary.prequential(tributary.Classifier(), texts, labels)
    tributary.plot.learning_curve(result, path="curve.png")
    tributary.plot.topics(topic_model, top=10, path="topics.png")
"""
import json
import sys


def _pyplot():
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules and not _interactive():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _interactive():
    return hasattr(sys, "ps1") or "ipykernel" in sys.modules


def learning_curve(result, *, ax=None, metric="accuracy", path=None, title=None):
    """Draws the prequential curve(s): `metric` ("accuracy" or "ncll") so far
    (solid) and over each window (dotted) against documents seen.

    result: what tributary.prequential returns or `tributary prequential
    --json` prints (a dict with "curve"), or a dict label -> such results to
    compare several learners on one picture. Returns the matplotlib Axes;
    with `path`, also saves the figure there (PNG, SVG or PDF by extension).
    """
    plt = _pyplot()
    if "curve" in result:
        result = {"": result}
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4.2))
    else:
        fig = ax.figure
    for i, (label, r) in enumerate(result.items()):
        curve = r["curve"]
        if not curve:
            raise ValueError("learning_curve: %s has no point (fewer documents than --every?)" % (label or "the result"))
        x = [p["documents"] for p in curve]
        color = "C%d" % i
        name = (label + ": ") if label else ""
        ax.plot(x, [p[metric] for p in curve], color=color, label=name + metric + " so far")
        if "window_" + metric in curve[0]:
            ax.plot(x, [p["window_" + metric] for p in curve], color=color, linestyle=":",
                    label=name + metric + " in each window")
    ax.set_xlabel("documents seen")
    ax.set_ylabel(metric + (" (test-then-train)" if metric == "accuracy" else ", -log p(y | x)"))
    if metric == "accuracy":
        ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    ax.set_title(title or "Prequential " + metric)
    if path:
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    return ax


def topics(model, *, top=10, path=None, columns=4, title=None):
    """One small bar chart per topic (or mixture component): its `top` most
    probable terms. model: a tributary.TopicModel (anything with
    topics(top=...)) or its topics() list. Returns the Figure; with `path`,
    also saves it."""
    plt = _pyplot()
    ts = model.topics(top=top) if hasattr(model, "topics") else model
    n = len(ts)
    if n == 0:
        raise ValueError("topics: the model has no topic")
    cols = min(columns, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 0.28 * top * rows + 0.9 * rows), squeeze=False)
    for k in range(rows * cols):
        ax = axes[k // cols][k % cols]
        if k >= n:
            ax.axis("off")
            continue
        words = [w for w, _ in ts[k]][::-1]
        probs = [p for _, p in ts[k]][::-1]
        ax.barh(range(len(words)), probs, color="C%d" % (k % 10))
        ax.set_yticks(range(len(words)))
        ax.set_yticklabels(words, fontsize="small")
        ax.set_title("topic %d" % k, fontsize="medium")
        ax.tick_params(axis="x", labelsize="x-small")
    fig.suptitle(title or "Topics: the %d most probable terms" % top)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig


def main(argv=None):
    """python3 plot.py curve RESULT.json OUT.png [TITLE]: the picture
    `tributary prequential --plot` draws."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[0] != "curve":
        sys.stderr.write("usage: plot.py curve RESULT.json OUT.png [TITLE]\n")
        return 2
    with open(argv[1], encoding="utf-8") as f:
        result = json.load(f)
    learning_curve(result, path=argv[2], title=argv[3] if len(argv) > 3 else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
