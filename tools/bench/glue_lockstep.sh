#!/usr/bin/env bash
# Lockstep check of leanback against its PyTorch twin on a GLUE recipe: the twin initialises
# the model (MiniLM + a fresh classifier) and saves it, leanback starts from that directory, both
# run with dropout off and leanback's data order (tools/bench/lb_philox.py), so the only
# differences left are floating-point summation orders. Prints both loss curves step by step
# and appends a summary line to OUT (default tools/studies/glue_parity/glue_lockstep.jsonl, the
# parity study's records, which the LoRA study's lockstep runs share). Differences that grow
# fast, or a jump at one step, point at a real difference in the recipe (schedule, clipping,
# optimizer, loss, batching).
#   TASK=mrpc STEPS=40 SEED=1 tools/bench/glue_lockstep.sh [OUT]
# STEPS=0 runs the whole recipe and compares the final dev metrics too. CONFIG=FILE takes
# another recipe than configs/minilm_TASK.json (its data.task names the task): one with a lora
# section trains PEFT's LoRA in the twin, whose saved adapter (A at random, B zero, the fresh
# classifier) leanback starts from, LoRA dropout off as well. LORA="query value" adds the LoRA
# study's recipe to the task's config (tools/bench/lora_config.py: r 8, alpha 16, lr 5e-4, on the
# Linear layers named).
# DROPOUT=1 keeps the model's dropout (and the adapters', LORA's recipe: 0.1) in both: the runs
# then differ by their dropout masks as well, each framework drawing its own.
# START=leanback turns the start round: leanback initialises (its own start for --seed SEED,
# exported after one step at lr 1e-12, which moves no weight by more than 1e-12) and the twin
# starts from that export (glue_twin.py --init), so a run of leanback from its own start has a
# PyTorch twin from the very same weights.
# THREADS=N and CORE=C pin both (tools/bench/run_env.sh). Needs tools/fetch_pretrained.sh
# done, ../shared/data/glue, and a Python with torch and
# transformers (PYTHON, default python3).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${1:-tools/studies/glue_parity/glue_lockstep.jsonl}"
python="${PYTHON:-python3}"
lb="${LB:-build/leanback}"
cfg="${CONFIG:-configs/minilm_${TASK:-mrpc}.json}"
task="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["data"]["task"])' "$cfg")"
steps="${STEPS:-40}"
seed="${SEED:-1}"
tmp="$(mktemp -d)"
trap 'rc=$?; if (( rc != 0 )); then echo "glue_lockstep: failed (status $rc); logs:" >&2; tail -n 20 "$tmp"/*.log >&2; fi; rm -rf "$tmp"' EXIT
# Both without dropout (unless DROPOUT=1); leanback's config is the twin's but for its start: the twin's saved
# model, or its saved adapter, which brings the lora section with it.
start="${START:-pytorch}"
[[ "$start" == pytorch || "$start" == leanback ]] || { echo "glue_lockstep: START=$start: pytorch or leanback" >&2; exit 2; }
python3 - "$cfg" "$tmp/twin.json" "$tmp/lb.json" "$tmp/init" "${LORA:-}" "${DROPOUT:-0}" "$start" <<'PY'
import json, sys
sys.path.insert(0, "tools/bench")
from lora_config import with_lora
src, twin, lb, init, lora, dropout, start = sys.argv[1:]
c = json.load(open(src))
if lora:
    with_lora(c, lora.split())
if dropout != "1":
    c["model"].update({"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
    if "lora" in c:
        c["lora"]["dropout"] = 0.0
c.pop("output", None)
json.dump(c, open(twin, "w"))
if start == "pytorch":  # leanback starts from the twin's saved model or adapter
    c["model"]["pretrained"] = init
    c.pop("lora", None)
json.dump(c, open(lb, "w"))
PY
source tools/bench/run_env.sh  # THREADS, CORE: pin; cpu
twin_steps=(); lb_steps=()
if (( steps > 0 )); then twin_steps=(--max-steps "$steps"); lb_steps=(--set train.max_steps="$steps"); fi
if [[ "$start" == pytorch ]]; then
  twin_start=(--save-init "$tmp/init")
else  # leanback's start for this seed: one step that moves nothing, exported for the twin
  "${pin[@]}" "$lb" train "$tmp/lb.json" --seed "$seed" --out "$tmp/probe" --no-progress --set train.max_steps=1 \
    --set optimizer.lr=1e-12 > "$tmp/probe.log" 2>&1
  "$lb" export "$tmp/probe" --out "$tmp/init" > "$tmp/export.log" 2>&1
  twin_start=(--init "$tmp/init")
fi
"${pin[@]}" "$python" tools/bench/glue_twin.py "$tmp/twin.json" --seed "$seed" --threads "${THREADS:-2}" --order leanback "${twin_start[@]}" \
  --log-steps "${twin_steps[@]}" > "$tmp/twin.jsonl" 2> "$tmp/twin.log"
"${pin[@]}" "$lb" train "$tmp/lb.json" --seed "$seed" --out "$tmp/lb" --no-progress "${lb_steps[@]}" --set train.log_every=1 > "$tmp/lb.log" 2>&1
python3 - "$tmp/lb/metrics.jsonl" "$tmp/twin.jsonl" "$task" "$seed" "$steps" "$cpu" "$out" "$cfg" "${LORA:-}" "${DROPOUT:-0}" "$start" <<'PY'
import json, os, sys
lb_path, twin_path, task, seed, steps, cpu, out, cfg, lora, dropout, start = sys.argv[1:]
lb = {r["step"]: r for r in map(json.loads, open(lb_path)) if r.get("type") == "train"}
tw = {r["step"]: r for r in map(json.loads, open(twin_path)) if "loss" in r and "step" in r}
print(f"{'step':>4} {'leanback loss':>14} {'PyTorch loss':>14} {'rel diff':>9} {'lr leanback':>12} {'lr PyTorch':>12}")
rel = []
for s in sorted(set(lb) & set(tw)):
    a, b = lb[s]["loss"], tw[s]["loss"]
    rel.append(abs(a - b) / max(abs(b), 1e-12))
    print(f"{s:4d} {a:14.8f} {b:14.8f} {rel[-1]:9.2e} {lb[s]['lr']:12.4e} {tw[s]['lr']:12.4e}")
if not rel:
    sys.exit("glue_lockstep: no common steps (see the logs)")
summary = {"task": task, "config": cfg, "lora": lora or None, "dropout": dropout == "1", "start": start, "seed": int(seed), "steps": len(rel), "first_step_rel_diff": rel[0],
           "max_rel_diff_first_10": max(rel[:10]), "max_rel_diff": max(rel), "final_rel_diff": rel[-1], "cpu": cpu}
# Whole-recipe runs: the final dev metrics of both.
twin_evals = [r for r in map(json.loads, open(twin_path)) if "epoch" in r]
lb_eval = os.path.join(os.path.dirname(lb_path), "eval_results.json")
if twin_evals and os.path.exists(lb_eval):
    final = json.load(open(lb_eval))["final"]
    summary["final_leanback"] = {k: v for k, v in final.items() if k.startswith("eval_") and k != "eval_loss"
                                 and not k.startswith("eval_runtime") and not k.startswith("eval_samples")}
    summary["final_pytorch"] = {k: v for k, v in twin_evals[-1].items() if k.startswith("eval_")}
    for k in summary["final_pytorch"]:
        print(f"final {k}: leanback {100 * summary['final_leanback'].get(k, float('nan')):.2f}, "
              f"PyTorch {100 * summary['final_pytorch'][k]:.2f}")
print(json.dumps(summary))
with open(out, "a") as f:
    f.write(json.dumps(summary) + "\n")
PY
