"""Figures of a leanback run or compare directory (run by `leanback plot DIR`, embedded in
the binary; see include/lb/train/report/plots.h). Reads only the JSON files the runs wrote and
prints one `wrote PATH` line per figure. Usage: plot_report.py DIR"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"vanilla": "#444444", "instant": "#1f77b4", "hot": "#d62728"}


def color(name, i):
    return COLORS.get(name, "C%d" % (i + 3))


def read_jsonl(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a torn last line of a killed run
    return out


def curves(run_dir, metric):
    lines = read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
    train = [(l["step"], l["loss"]) for l in lines if l.get("type") == "train"]
    evals = [(l["step"], l[metric]) for l in lines if l.get("type") == "eval" and metric in l]
    return train, evals


def save(fig, out_dir, name):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("wrote " + path)


def primary_metric_of_run(run_dir):
    try:
        with open(os.path.join(run_dir, "eval_results.json"), encoding="utf-8") as f:
            return json.load(f).get("primary_metric", "eval_loss")
    except OSError:
        for l in read_jsonl(os.path.join(run_dir, "metrics.jsonl")):
            if l.get("type") == "eval":
                keys = [k for k in l if k.startswith("eval_") and k != "eval_loss"]
                return keys[0] if keys else "eval_loss"
    return "eval_loss"


def curve_figures(series, metric, out_dir, title):
    """series: [(label, strategy index, name, run_dir)]"""
    fig_l, ax_l = plt.subplots(figsize=(7, 4))
    fig_e, ax_e = plt.subplots(figsize=(7, 4))
    seen = set()
    for label, i, name, run in series:
        train, evals = curves(run, metric)
        lab = name if name not in seen else None
        seen.add(name)
        if train:
            ax_l.plot(*zip(*train), color=color(name, i), alpha=0.8, lw=1.2, label=lab)
        if evals:
            ax_e.plot(*zip(*evals), color=color(name, i), marker="o", ms=3, lw=1.2, label=lab)
    for ax, ylabel in ((ax_l, "training loss"), (ax_e, metric)):
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if seen:
            ax.legend()
    save(fig_l, out_dir, "loss.png")
    save(fig_e, out_dir, "eval.png")


def layer_rank(layer, operand):
    """A compare layer's low-rank rank of `operand` ("x" or "g_y"), or None: the generic
    "ranks" key, else the flat "x_rank" / "g_y_rank" of report.json files written before it."""
    ranks = layer.get("ranks")
    if isinstance(ranks, dict):
        return ranks.get(operand, {}).get("rank", 0)
    return layer.get(operand + "_rank")


def compare_figures(d, out_dir):
    with open(os.path.join(d, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    metric = report.get("primary_metric") or "eval_loss"
    title = "%s: %s" % (report.get("task", ""), os.path.basename(report.get("config_source", "")))
    done = [s for s in report["strategies"] if s["runs"]]
    series = []
    for i, s in enumerate(done):
        for r in s["runs"]:
            series.append((s["strategy"], i, s["strategy"], r["dir"]))
    curve_figures(series, metric, out_dir, title)
    if not done:
        return
    names = [s["strategy"] for s in done]
    cols = [color(n, i) for i, n in enumerate(names)]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    m = [100 * s["metrics"][metric]["mean"] for s in done]
    e = [100 * s["metrics"][metric]["std"] for s in done]
    axes[0].bar(names, m, yerr=e, color=cols, capsize=4)
    lo = min(v - w for v, w in zip(m, e))
    hi = max(v + w for v, w in zip(m, e))
    pad = max(0.5, 0.15 * (hi - lo))
    axes[0].set_ylim(max(0.0, lo - pad) if lo > 0 else lo - pad, hi + pad)
    axes[0].set_title("%s x100 (mean ± std)" % metric)
    mean_mib = [s["saved_bytes_mean"]["mean"] / 2**20 for s in done]
    peak_mib = [s["saved_bytes_peak"]["mean"] / 2**20 for s in done]
    axes[1].bar(names, peak_mib, color=cols, alpha=0.35, label="peak")
    axes[1].bar(names, mean_mib, color=cols, label="mean")
    axes[1].set_title("saved for backward (MiB)")
    axes[1].legend()
    fwd = [s["forward_ms"]["mean"] for s in done]
    bwd = [s["backward_ms"]["mean"] for s in done]
    rest = [max(0.0, s["step_ms"]["mean"] - a - b) for s, a, b in zip(done, fwd, bwd)]
    axes[2].bar(names, fwd, color="#9ecae1", label="forward")
    axes[2].bar(names, bwd, bottom=fwd, color=cols, label="backward")
    axes[2].bar(names, rest, bottom=[a + b for a, b in zip(fwd, bwd)], color="#dddddd", label="optimizer, data")
    axes[2].set_title("step time (ms)")
    axes[2].legend(fontsize=8)
    for ax in axes:
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title)
    save(fig, out_dir, "bars.png")

    with_layers = [s for s in done if s.get("layers")]
    if not with_layers:
        return
    layers = [l["layer"] for l in with_layers[0]["layers"]]
    low_rank = [s for s in with_layers if any(layer_rank(l, "x") is not None for l in s["layers"])]
    rows = 2 if low_rank else 1
    fig, axes = plt.subplots(rows, 1, figsize=(max(8, 0.35 * len(layers)), 3.6 * rows), squeeze=False)
    width = 0.8 / len(with_layers)
    x = list(range(len(layers)))
    for k, s in enumerate(with_layers):
        by = {l["layer"]: l for l in s["layers"]}
        v = [by.get(n, {}).get("saved_bytes_last_call", 0) / 1024 for n in layers]
        axes[0][0].bar([i + k * width for i in x], v, width, color=color(s["strategy"], k), label=s["strategy"])
    axes[0][0].set_yscale("log")
    axes[0][0].set_ylabel("saved KiB (last call)")
    axes[0][0].legend()
    if low_rank:
        by = {l["layer"]: l for l in low_rank[0]["layers"]}
        for operand, dx in (("x", -0.2), ("g_y", 0.2)):
            ranks = [layer_rank(by.get(n, {}), operand) or 0 for n in layers]
            axes[1][0].bar([i + dx for i in x], ranks, 0.4, label=operand + " rank")
        axes[1][0].set_ylabel("%s rank" % low_rank[0]["strategy"].upper())
        axes[1][0].legend()
    short = [n.replace("bert.encoder.layer.", "L").replace("attention.", "") for n in layers]
    for row in axes:
        row[0].set_xticks(x)
        row[0].set_xticklabels(short, rotation=70, ha="right", fontsize=7)
        row[0].grid(axis="y", alpha=0.3)
    fig.suptitle(title + ": per layer")
    save(fig, out_dir, "layers.png")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot_report.py DIR")
    d = sys.argv[1]
    out_dir = os.path.join(d, "plots")
    if os.path.exists(os.path.join(d, "compare.json")):
        compare_figures(d, out_dir)
    else:
        metric = primary_metric_of_run(d)
        curve_figures([("run", 0, os.path.basename(os.path.normpath(d)), d)], metric, out_dir, d)


if __name__ == "__main__":
    main()
