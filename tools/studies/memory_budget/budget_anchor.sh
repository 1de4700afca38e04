#!/usr/bin/env bash
# The memory budget's anchor on one full MiniLM batch (32 x 128, the batch the planner
# profiles): PyTorch + transformers plain and with every encoder layer checkpointed
# (tools/bench/minilm_step_torch.py [--checkpoint]) against leanback exact and planned at
# each budget (`leanback bench configs/minilm_mrpc.json [--activation-budget B]`): ms per step
# (forward / backward), activation peak, the plan. One JSON line per run appended to OUT.
#   PY=$VENV/bin/python BUDGETS="261MB 115.2MB" THREADS=1 CORE=0 tools/studies/memory_budget/budget_anchor.sh [OUT]
# 261MB is PyTorch's checkpointed peak: leanback at the memory PyTorch's leanest standard
# setting reaches. THREADS=N and CORE=C pin the runs; LB picks the binary; ITERS (4) timed
# steps after one warm-up. COMPILED="1.0 0.05" adds PyTorch compiled (torch.compile) with
# torch._functorch.config.activation_memory_budget at each fraction (minutes of compilation
# each; on the CPU the model's dropout cannot be recomputed, so the fraction moves little).
set -uo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-tools/studies/memory_budget/budget_anchor.jsonl}"
lb="${LB:-build/leanback}"
py="${PY:-python3}"
iters="${ITERS:-4}"
THREADS="${THREADS:-1}"
source tools/bench/run_env.sh  # OMP_NUM_THREADS, pin, cpu, commit
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

record() {  # name json-file: one line with the figures that compare
  python3 - "$1" "$2" "$cpu" "$THREADS" "$commit" >> "$out" <<'PY'
import json, sys
name, path, cpu, threads, commit = sys.argv[1:6]
d = json.load(open(path))
print(json.dumps({"run": name, "ms_per_step": d["ms_per_step"], "forward_ms": d["forward_ms"],
                  "backward_ms": d["backward_ms"], "activation_peak_bytes": d["activation_peak_bytes"],
                  "saved_bytes": d["saved_bytes"], "plan": d.get("plan", ""), "framework": d["framework"],
                  "cpu": cpu, "threads": threads, "commit": commit}))
PY
  echo "budget_anchor.sh: $1: $(tail -1 "$out")"
}

run() {  # name command...: one timed step set, its JSON recorded
  local name="$1"
  shift
  if "${pin[@]}" "$@" --iters "$iters" --warmup 1 --threads "$THREADS" --json \
       > "$tmp/$name.json" 2> "$tmp/$name.err"; then record "$name" "$tmp/$name.json"
  else echo "budget_anchor.sh: $name failed:" >&2; tail -5 "$tmp/$name.err" >&2; fi
}
run_torch() { local name="$1"; shift; run "$name" "$py" tools/bench/minilm_step_torch.py "$@"; }  # [--checkpoint]
run_lb() { local name="$1"; shift; run "$name" "$lb" bench configs/minilm_mrpc.json "$@"; }  # [--activation-budget B]

run_torch pytorch_checkpointed --checkpoint
for f in ${COMPILED:-}; do run_torch "pytorch_compiled_$f" --activation-memory-budget "$f"; done
run_lb leanback_exact
for b in ${BUDGETS:-261MB 115.2MB}; do run_lb "leanback_$b" --activation-budget "$b"; done
run_torch pytorch
