#!/usr/bin/env python3
"""The memory-budget study's table (budget_study.sh, beside this script): per task and budget,
the final dev metric (mean ± std over seeds, x100), the largest measured activation peak of any training
step, the median step time and its ratio to the exact run of the same task and seeds on the
same CPU and thread count; then the
average over the tasks every budget has, and each budget against exact over the seeds both
have (the mean change and the task that changed most).

    tools/studies/memory_budget/budget_table.py [tools/studies/memory_budget/budget_study.jsonl]
    tools/studies/memory_budget/budget_table.py --speed [tools/studies/memory_budget/budget_speed.jsonl]

--speed: the paired step times of budget_speed.sh instead, per task, budget and leanback
commit (a later commit's rounds time the same plan with newer code): the rounds'
median exact and planned step (and PyTorch's with every encoder layer checkpointed, where
run), the median of the rounds' ratios and their range.
"""
import collections
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def speed_table(path):
    rows = collections.defaultdict(list)
    for line in open(path):
        if line.strip():
            d = json.loads(line)
            rows[(d["task"], d["budget"], d["cpu"], d["threads"], d.get("commit", "-"))].append(d)

    def ms(ds, key):
        q = [d[key] for d in ds if key in d]
        return f"{statistics.median(q):.0f}" if q else "-"

    def ratio(ds, key):  # the median of the rounds' ratios and their range
        q = sorted(d[key] for d in ds if key in d)
        return f"{statistics.median(q):.2f}x ({q[0]:.2f}-{q[-1]:.2f})" if q else "-"

    print("| task | budget | CPU, threads | commit | rounds | exact ms | planned ms | planned / exact | "
          "PyTorch checkpointed ms | planned / PyTorch checkpointed |")
    print("|---|---|---|---|---:|---:|---:|---|---:|---|")
    for (task, budget, cpu, threads, commit), ds in rows.items():
        print(f"| {task} | {budget} | {cpu}, {threads} | {commit} | {len(ds)} | {ms(ds, 'exact_step_ms')} | "
              f"{ms(ds, 'planned_step_ms')} | {ratio(ds, 'ratio')} | {ms(ds, 'torch_checkpointed_step_ms')} | "
              f"{ratio(ds, 'ratio_to_torch')} |")


def main():
    args = sys.argv[1:]
    if args[:1] == ["--speed"]:
        return speed_table(args[1] if len(args) > 1 else os.path.join(HERE, "budget_speed.jsonl"))
    path = args[0] if args else os.path.join(HERE, "budget_study.jsonl")
    runs = [json.loads(l) for l in open(path) if l.strip()]
    by = collections.defaultdict(dict)  # (task, budget) -> seed -> run (the latest line wins)
    for r in runs:
        by[(r["task"], r["budget"])][r["seed"]] = r
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    budgets = list(dict.fromkeys(r["budget"] for r in runs))
    cpus = sorted({f'{r["cpu"]}, {r["threads"]} thread(s)' for r in runs})
    print("CPU: " + "; ".join(cpus) + "\n")
    print("| task (metric x100) | budget | metric | seeds | activation peak | step ms (vs exact) | plan |")
    print("|---|---|---:|---:|---:|---:|---|")
    means = collections.defaultdict(dict)
    for t in tasks:
        exact = by.get((t, "exact"), {})
        for b in budgets:
            got = by.get((t, b))
            if not got:
                continue
            vals = [100 * r["value"] for r in got.values()]
            mean = statistics.mean(vals)
            means[b][t] = mean
            std = f" ± {statistics.stdev(vals):.1f}" if len(vals) > 1 else ""
            peak = max(r["activation_peak_bytes"] for r in got.values()) / 1e6
            ms = statistics.mean(r["step_ms_median"] for r in got.values())
            # Step times compare on one CPU and thread count only.
            same = [s for s in got if s in exact and (exact[s]["cpu"], exact[s]["threads"]) == (got[s]["cpu"], got[s]["threads"])]
            ratio = ""
            if b != "exact" and same:
                ratio = " ({:.2f}x)".format(
                    statistics.mean(got[s]["step_ms_median"] for s in same) /
                    statistics.mean(exact[s]["step_ms_median"] for s in same))
            metric = got[next(iter(got))]["metric"].replace("eval_", "")
            plans = "; ".join(sorted({r["plan"] for r in got.values() if r["plan"]}))
            # Steps per plan length (the planner's plans for shorter batches), where recorded.
            lengths = collections.Counter()
            for r in got.values():
                lengths.update(r.get("steps_by_plan_length") or {})
            if lengths and set(lengths) != {"longest"}:
                # Keys: "96" (longest sequence ≤ 96), "2048 real tokens", "longest".
                order = lambda k: (2, 0) if k == "longest" else (1, int(k.split()[0])) if " " in k else (0, int(k))
                plans += " (steps by plan: " + ", ".join(
                    f"{'≤' + k if k != 'longest' else 'longest'} {n}" for k, n in
                    sorted(lengths.items(), key=lambda kv: order(kv[0]))) + ")"
            print(f"| {t} ({metric}) | {b} | {mean:.1f}{std} | {len(vals)} | {peak:.1f} MB | {ms:.0f}{ratio} | {plans} |")
    # The average compares like with like: per task, the seeds run at every budget.
    seeds = {t: set.intersection(*(set(by.get((t, b), {})) for b in budgets)) for t in tasks}
    common = [t for t in tasks if seeds[t]]
    if common and len(budgets) > 1:
        task_mean = lambda t, b: statistics.mean(100 * by[(t, b)][s]["value"] for s in seeds[t])
        row = ", ".join(f"{b} {statistics.mean(task_mean(t, b) for t in common):.1f}" for b in budgets)
        print(f"\nAverage over {', '.join(f'{t} (seeds {sorted(seeds[t])})' for t in common)}: {row}")
    # Each budget against exact alone, over the seeds both have: more seeds than the row above.
    for b in budgets:
        if b == "exact":
            continue
        pair = {t: sorted(set(by.get((t, b), {})) & set(by.get((t, "exact"), {}))) for t in tasks}
        pair = {t: s for t, s in pair.items() if s}
        if not pair:
            continue
        diff = {t: statistics.mean(100 * (by[(t, b)][s]["value"] - by[(t, "exact")][s]["value"]) for s in ss)
                for t, ss in pair.items()}
        mean = lambda bb: statistics.mean(statistics.mean(100 * by[(t, bb)][s]["value"] for s in ss)
                                          for t, ss in pair.items())
        worst = min(diff, key=diff.get)
        print(f"\n{b} against exact over {', '.join(f'{t} (seeds {ss})' for t, ss in pair.items())}: "
              f"exact {mean('exact'):.2f}, {b} {mean(b):.2f} ({mean(b) - mean('exact'):+.2f}); "
              f"largest task change {diff[worst]:+.2f} ({worst})")


if __name__ == "__main__":
    main()
