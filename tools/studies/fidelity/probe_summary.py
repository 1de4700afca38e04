#!/usr/bin/env python3
"""Summarise a run's gradient-fidelity probe (train.grad_probe_every): the mean over probes of
each compressed layer's local g_w / g_x cosine to the exact gradients and its end-to-end g_w
and g_x cosines (after a whole compressed backward, with the run's kept-tensor codecs; with
codecs every layer is probed, vanilla ones end to end only), grouped by layer kind and by
encoder layer.

    python3 tools/studies/fidelity/probe_summary.py RUN_DIR/metrics.jsonl
"""
import json
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    lines = [json.loads(l) for l in open(sys.argv[1])]
    probes = [l for l in lines if l.get("type") == "probe"]
    if not probes:
        sys.exit(f"probe_summary.py: no probe lines in {sys.argv[1]} (set train.grad_probe_every)")
    kinds, depth = {}, {}
    for p in probes:
        for l in p["layers"]:
            name = l["layer"]
            parts = name.split(".")
            encoder = "encoder" in parts and "layer" in parts
            i = parts.index("layer") if encoder else 0
            kind = ".".join(parts[i + 2:]) if encoder else name
            if l.get("probed") is False:
                continue
            local, e2e = l.get("local", {}), l.get("end_to_end", {})  # no "local": a vanilla layer

            def cos(d, key):  # absent: no such gradient (a model's first layer has no g_x)
                return d[key]["cos"] if key in d else None

            v = (cos(local, "g_w"), cos(local, "g_x"), cos(e2e, "g_w"), cos(e2e, "g_x"))
            kinds.setdefault(kind, []).append(v)
            depth.setdefault(parts[i + 1] if encoder else "-", []).append(v)

    def row(label, vs):
        cells = []
        for j in range(4):
            xs = [x[j] for x in vs if x[j] is not None]
            cells.append(f"{statistics.mean(xs):.3f}" if xs else "-")
        print(f"| {label} | {' | '.join(cells)} |")

    print(f"{len(probes)} probes, {statistics.mean(p['ms'] for p in probes):.0f} ms each\n")
    print("| layer kind / encoder layer | g_w cos (local) | g_x cos (local) | g_w cos (end to end) | g_x cos (end to end) |")
    print("|---|---:|---:|---:|---:|")
    for k, vs in kinds.items():
        row(k, vs)
    for k, vs in depth.items():
        row(f"layer {k}", vs)
    row("**all**", [x for vs in kinds.values() for x in vs])


if __name__ == "__main__":
    main()
