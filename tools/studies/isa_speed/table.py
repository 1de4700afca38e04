#!/usr/bin/env python3
"""Prints the tables of tools/studies/isa_speed/run.sh's records (default: results.jsonl beside
this file): per CPU, the medians over rounds and the per-round ratios (runs of one round are
back to back, so the ratio is the figure least disturbed by other load on a shared machine)."""
import json
import os
import statistics
import sys


def ratio_text(ratios):
    ratios = sorted(ratios)
    return f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})" if ratios else "-"


def per_round(rows, key, value, base_key):
    """value(base) / value(row) of each round that has both (speed-up over the base)."""
    out = []
    for r in rows:
        base = [b for b in rows_all if key(b) == base_key(r) and b["round"] == r["round"]]
        if base:
            out.append(value(base[0]) / value(r))
    return out


path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results.jsonl")
records = [json.loads(line) for line in open(path) if line.strip()]
for cpu in dict.fromkeys(r["cpu"] for r in records):
    rows_all = [r for r in records if r["cpu"] == cpu]
    commits = ", ".join(dict.fromkeys(r["commit"] for r in rows_all))
    loads = [r["load"] for r in rows_all]
    print(f"## {cpu}\n(library {commits}; {len(rows_all)} runs; 1-min load before a run "
          f"{min(loads):.1f}-{max(loads):.1f})\n")
    lb = [r for r in rows_all if r["part"] == "linear_bwd"]
    if lb:
        rounds = len({r["round"] for r in lb})
        print(f"linear_bwd backward, {rounds} rounds, {lb[0]['omp_threads']} threads: median ms; speed-up over "
              "vanilla, median of the rounds (min-max)\n")
        print("| LEANBACK_ISA | setting | int8 GEMM | backward ms | speed-up |\n|---|---|---|---:|---:|")
        for isa in dict.fromkeys(r["isa"] for r in lb):
            for setting in dict.fromkeys(r["setting"] for r in lb):
                rs = [r for r in lb if r["isa"] == isa and r["setting"] == setting]
                if not rs:
                    continue
                ms = statistics.median(r["backward_ms"] for r in rs)
                key = lambda r: (r["part"], r.get("isa"), r.get("setting"))
                sp = per_round(rs, key, lambda r: r["backward_ms"], lambda r: ("linear_bwd", r["isa"], "vanilla"))
                kernel = rs[0].get("int8_gemm", "")
                print(f"| {isa} | {setting} | {kernel} | {ms:.1f} | {'-' if setting == 'vanilla' else ratio_text(sp)} |")
        print()
    mr = [r for r in rows_all if r["part"] == "mrpc"]
    if mr:
        print(f"MiniLM MRPC fine-tuning, {mr[0]['steps']} steps a run, {len({r['round'] for r in mr})} rounds: "
              "examples/s; against vanilla in the same round\n")
        print("| strategy | examples/s | against vanilla |\n|---|---:|---:|")
        for setting in dict.fromkeys(r["setting"] for r in mr):
            rs = [r for r in mr if r["setting"] == setting]
            eps = statistics.median(r["examples_per_s"] for r in rs)
            key = lambda r: (r["part"], r.get("setting"))
            sp = per_round(rs, key, lambda r: 1 / r["examples_per_s"], lambda r: ("mrpc", "vanilla"))
            print(f"| {setting} | {eps:.1f} | {'-' if setting == 'vanilla' else ratio_text(sp)} |")
        print()
    md = [r for r in rows_all if r["part"] == "models"]
    if md:
        print(f"Model training steps beside PyTorch, {len({r['round'] for r in md})} rounds: median ms/step; "
              "leanback / PyTorch per round (< 1: leanback faster)\n")
        print("| workload | leanback ms | PyTorch ms | leanback / PyTorch |\n|---|---:|---:|---:|")
        for w in dict.fromkeys(r["workload"] for r in md):
            rs = [r for r in md if r["workload"] == w]
            ours = [r for r in rs if r["framework"] == "leanback"]
            theirs = [r for r in rs if r["framework"] != "leanback"]
            ratios = []
            for o in ours:
                t = [x for x in theirs if x["round"] == o["round"]]
                if t:
                    ratios.append(o["ms_per_step"] / t[0]["ms_per_step"])
            med = lambda xs: statistics.median(x["ms_per_step"] for x in xs) if xs else float("nan")
            print(f"| {w} | {med(ours):.1f} | {med(theirs):.1f} | {ratio_text(ratios)} |")
        print()
