#!/usr/bin/env python3
"""Prints lora_starts.sh's pairs (beside this script): per task and seed, leanback's final
metric from PEFT's start and from its own, then how often PEFT's start ended higher, the mean difference
and the two-sided sign test's p (ties left out), and, as the two sets of starts are
independent draws whose pairing by seed means nothing, the two means and a two-sided
permutation test of their difference: the checks a reader would make of "chance or not".

    tools/studies/lora/lora_starts_table.py [tools/studies/lora/lora_starts.jsonl]
"""
import collections
import json
import math
import os
import random
import sys


def sign_test_p(wins, losses):
    """Two-sided exact sign test: the chance of a split at least this uneven under p = 1/2."""
    n, k = wins + losses, max(wins, losses)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def permutation_p(a, b, draws=200_000, seed=1):
    """Two-sided permutation test of mean(a) - mean(b): the share of random relabellings of the
    pooled values whose difference is at least as large in magnitude (Monte Carlo, fixed seed)."""
    observed, pooled, rng = abs(sum(a) / len(a) - sum(b) / len(b)), a + b, random.Random(seed)
    hits = 0
    for _ in range(draws):
        rng.shuffle(pooled)
        x, y = pooled[:len(a)], pooled[len(a):]
        hits += abs(sum(x) / len(x) - sum(y) / len(y)) >= observed - 1e-12
    return (hits + 1) / (draws + 1)


def mean_sd(v):
    m = sum(v) / len(v)
    return m, (math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else float("nan"))


def main(path):
    runs = collections.defaultdict(dict)  # (task, lora) -> seed -> start -> value (latest wins)
    for line in open(path):
        r = json.loads(line)
        runs[(r["task"], r["lora"])].setdefault(r["seed"], {})[r["start"]] = 100 * r["value"]
    for (task, lora), by_seed in runs.items():
        print(f"{task}, LoRA on {lora}, no dropout, trained by leanback:\n")
        print("| seed | from PEFT's start | from leanback's start | PEFT's minus leanback's |")
        print("|---:|---:|---:|---:|")
        diffs = []
        for seed in sorted(by_seed):
            v = by_seed[seed]
            if "pytorch" not in v or "leanback" not in v:
                continue
            diffs.append(v["pytorch"] - v["leanback"])
            print(f"| {seed} | {v['pytorch']:.2f} | {v['leanback']:.2f} | {diffs[-1]:+.2f} |")
        if not diffs:
            continue
        wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
        mean = sum(diffs) / len(diffs)
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) > 1 else float("nan")
        print(f"\n{len(diffs)} seeds: PEFT's start higher in {wins}, leanback's in {losses}, "
              f"{len(diffs) - wins - losses} ties; mean difference {mean:+.2f} (sd {sd:.2f}); "
              f"two-sided sign test p = {sign_test_p(wins, losses):.3f}")
        peft = [v["pytorch"] for v in by_seed.values() if "pytorch" in v]
        own = [v["leanback"] for v in by_seed.values() if "leanback" in v]
        (mp, sp), (ml, sl) = mean_sd(peft), mean_sd(own)
        print(f"from PEFT's starts {mp:.2f} ± {sp:.2f} (n = {len(peft)}), from leanback's {ml:.2f} ± {sl:.2f} "
              f"(n = {len(own)}); two-sided permutation test of the means p = {permutation_p(peft, own):.3f}\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "lora_starts.jsonl"))
