#!/usr/bin/env bash
# The process's memory beside what its tensors need: max RSS (/usr/bin/time -v) of `--help`,
# `info` and short CPU training runs, each run's whole-step allocator peak (eval_results.json
# "memory".peak_bytes) and the difference. One JSON line per case to OUT (default stdout),
# naming the CPU as lscpu does. Targets (issue "the whole step fits"): --help and info <= 30 MB;
# a training run's max RSS <= its whole-step peak + 64 MB. Runs needing ../shared/data or the
# pretrained model (tools/fetch_pretrained.sh) are skipped, and say so, when those are absent.
# Usage: tools/studies/process_memory/run.sh [OUT]   (THREADS=2 LEANBACK=build/leanback STEPS=20)
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
lb="${LEANBACK:-build/leanback}"
steps="${STEPS:-20}"
source tools/bench/run_env.sh
out="${1:-/dev/stdout}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
data="$root/../shared/data"
models="${LEANBACK_HOME:-$HOME/.cache/leanback}/models"

# case NAME TARGET_KIND ARGS...: runs $lb ARGS under /usr/bin/time -v and prints the line.
case_line() {
  local name="$1" kind="$2"
  shift 2
  echo "[$name] $lb $*" >&2
  local start=$SECONDS
  /usr/bin/time -v "$lb" "$@" > "$tmp/$name.log" 2>&1 || { tail -5 "$tmp/$name.log" >&2; exit 1; }
  python3 - "$tmp/$name.log" "$tmp/$name" "$name" "$kind" "$cpu" "$commit" "$((SECONDS - start))" >> "$out" <<'PY'
import json, os, re, sys
log, run, name, kind, cpu, commit, secs = sys.argv[1:]
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(log).read()).group(1)) / 1024
line = {"case": name, "cpu": cpu, "commit": commit, "seconds": int(secs), "max_rss_mb": round(rss, 1)}
if kind == "process":
    line.update(target_mb=30, ok=rss <= 30)
else:
    peak = json.load(open(os.path.join(run, "eval_results.json")))["memory"]["peak_bytes"] / 2**20
    line.update(step_peak_mb=round(peak, 1), over_peak_mb=round(rss - peak, 1), target_over_mb=64,
                ok=rss - peak <= 64)
print(json.dumps(line))
PY
}

train() { echo train "$1" --threads "${THREADS:-2}" --out "$tmp/$2" --no-progress --set train.max_steps="$steps" --set data.max_eval_examples=512; }
case_line help process --help
case_line info process info
case_line quickstart train $(train configs/quickstart.json quickstart)
if [ -d "$data/glue/MRPC" ] && [ -d "$models/all-minilm-l6-v2" ]; then
  case_line minilm_mrpc train $(train configs/minilm_mrpc.json minilm_mrpc)
else
  echo "[minilm_mrpc] skipped: needs $data/glue/MRPC and tools/fetch_pretrained.sh" >&2
fi
if [ -d "$data/cifar10" ] || [ -d "$data/cifar-10" ]; then
  case_line vit_tiny_cifar10 train $(train configs/vit_tiny_cifar10.json vit_tiny_cifar10)
  case_line resnet18_cifar10 train $(train configs/resnet18_cifar10.json resnet18_cifar10)
else
  echo "[cifar10] skipped: needs $data/cifar10" >&2
fi
