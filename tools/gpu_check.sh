#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU (the device tool's H200): builds leanback with
# CUDA (Release, sm_90), runs the CUDA tests (which skip elsewhere) and the GPU benchmarks
# beside their PyTorch twins, then the rest of the suite as time allows, and writes a JSON
# summary to ${OUT:-.}/gpu_check.json. Target: under 6 minutes on an H200.
# That machine has a compiler, CMake, CUDA and PyTorch but none of our Debian packages and no
# network: run tools/fetch_gpu_debs.sh here first and carry `.debs` (tools/offline_prefix.sh
# unpacks it there). Elsewhere (apt available) tools/setup.sh installs them.
#   device run: command "OUT=$OUT tools/gpu_check.sh", carry [".debs"]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$root}"
build="$root/build-gpu"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu_info.txt" 2>&1
source "$root/tools/offline_prefix.sh" "$root"
[ ${#LB_OFFLINE_CMAKE_ARGS[@]} -gt 0 ] || "$root/tools/setup.sh"
# NCCL: the toolkit's, else the nvidia-nccl wheel PyTorch brings.
nccl_root=""
if [[ ! -f /usr/local/cuda/include/nccl.h ]]; then
  nccl_root="$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)"
fi
{
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLEANBACK_CUDA=ON -DLEANBACK_CUDA_ARCHS="90-real" \
        ${nccl_root:+-DNCCL_ROOT="$nccl_root"} "${LB_OFFLINE_CMAKE_ARGS[@]}" &&
    cmake --build "$build" -j"$(nproc)"
} > "$out/gpu_build.log" 2>&1
build_rc=$?
build_s=$(elapsed)
"$build/leanback" info > "$out/gpu_info_leanback.txt" 2>&1
# 1. The CUDA tests: op parity, the models on cuda:0, the CLI's cuda run, NCCL.
(cd "$build" && ctest -j8 --output-on-failure --timeout 240 -R "Cuda|_cuda|Cli\.|Nccl") > "$out/gpu_ctest_cuda.log" 2>&1
cuda_rc=$?
# 2. GEMM sweep, ours and PyTorch's, bf16 and f32.
for p in bf16 f32; do
  timeout 120 "$build/leanback" bench gemm --device cuda --precision $p --json > "$out/gpu_gemm_$p.json" 2>> "$out/gpu_bench.log"
  timeout 120 python3 "$root/tools/bench/gemm_cuda.py" --precision $p --json > "$out/gpu_gemm_${p}_torch.json" 2>> "$out/gpu_bench.log"
done
# 3. BERT-base training steps (B 32 x T 128, AdamW): ours in bf16 / f32 against PyTorch eager
#    with autocast(bf16) / f32.
for p in bf16 f32; do
  timeout 150 "$build/leanback" bench bert_base --device cuda --precision $p --json > "$out/gpu_bert_base_$p.json" \
    2>> "$out/gpu_bench.log"
  timeout 150 python3 "$root/tools/bench/bert_mini.py" --size base --device cuda $([ $p = bf16 ] && echo --autocast) \
    --json > "$out/gpu_bert_base_${p}_torch.json" 2>> "$out/gpu_bench.log"
done
# 4. linear_bwd (Linear 768->3072, x 32x128x768) per strategy — vanilla, INSTANT rank 8 and
#    HOT — in bf16 and f32 (targets: INSTANT backward >= 4x, HOT >= 1.5x faster than vanilla
#    in bf16), and PyTorch's f32 twin.
for p in bf16 f32; do
  for s in vanilla instant hot; do
    timeout 60 "$build/leanback" bench linear_bwd --device cuda --precision $p --strategy $s \
      $([ $s = instant ] && echo --rank 8) --json > "$out/gpu_linear_bwd_${s}_$p.json" 2>> "$out/gpu_bench.log"
  done
done
timeout 60 python3 "$root/tools/bench/linear_bwd.py" --device cuda --json > "$out/gpu_linear_bwd_torch.json" \
  2>> "$out/gpu_bench.log"
bench_s=$(elapsed)
# 5. The rest of the suite, while the 6 minutes last.
left=$(( 330 - $(elapsed) ))
rest_rc=-1
if (( left > 30 )); then
  (cd "$build" && timeout "$left" ctest -j12 --timeout 200 -E "Cuda|_cuda|Cli\.|Nccl") > "$out/gpu_ctest_rest.log" 2>&1
  rest_rc=$?
fi
python3 - "$out" "$build_rc" "$cuda_rc" "$rest_rc" "$build_s" "$bench_s" "$(elapsed)" > "$out/gpu_check.json" <<'PY'
import json, os, re, sys
out, build_rc, cuda_rc, rest_rc, build_s, bench_s, total_s = sys.argv[1], *map(int, sys.argv[2:])
def ctest(name):
    p = os.path.join(out, name)
    if not os.path.exists(p): return None
    t = open(p).read()
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", t)
    failed = re.findall(r"\d+ - (\S+) \((?:Failed|SEGFAULT|Timeout|Subprocess aborted|Exception)", t)
    return {"summary": m.group(0) if m else None, "failed": failed, "skipped": t.count("(Skipped)")}
def gemm(p):
    rows = {}
    for fw, f in (("leanback", f"gpu_gemm_{p}.json"), ("pytorch", f"gpu_gemm_{p}_torch.json")):
        try:
            for r in json.loads(open(os.path.join(out, f)).read().strip().splitlines()[-1])["results"]:
                rows.setdefault(f"{r['m']}x{r['n']}x{r['k']}", {})[fw] = round(r["tflops"], 1)
        except Exception as e:
            rows[fw + "_error"] = str(e)
    for v in rows.values():
        if isinstance(v, dict) and v.get("pytorch"): v["ratio"] = round(v.get("leanback", 0) / v["pytorch"], 3)
    return rows
def step(p):
    r = {}
    for fw, f in (("leanback", f"gpu_bert_base_{p}.json"), ("pytorch", f"gpu_bert_base_{p}_torch.json")):
        try:
            j = json.loads(open(os.path.join(out, f)).read().strip().splitlines()[-1])
            r[fw] = {k: round(j[k], 2) for k in ("ms_per_step", "forward_ms", "backward_ms", "optimizer_ms")}
        except Exception as e:
            r[fw + "_error"] = str(e)
    if "leanback" in r and "pytorch" in r:
        r["step_ratio"] = round(r["leanback"]["ms_per_step"] / r["pytorch"]["ms_per_step"], 3)
    return r
def layer():
    r = {}
    runs = [(f"{s}_{p}", f"gpu_linear_bwd_{s}_{p}.json") for p in ("bf16", "f32") for s in ("vanilla", "instant", "hot")]
    for name, f in runs + [("pytorch_f32", "gpu_linear_bwd_torch.json")]:
        try:
            j = json.loads(open(os.path.join(out, f)).read().strip().splitlines()[-1])
            r[name] = {k: round(j[k], 3) for k in ("forward_ms", "backward_ms") if k in j}
            if "saved_bytes" in j: r[name]["saved_mib"] = round(j["saved_bytes"] / 2**20, 2)
        except Exception as e:
            r[name + "_error"] = str(e)
    for p in ("bf16", "f32"):
        v = r.get(f"vanilla_{p}", {}).get("backward_ms")
        for s in ("instant", "hot"):
            b = r.get(f"{s}_{p}", {}).get("backward_ms")
            if v and b: r[f"{s}_{p}"]["backward_speedup_vs_vanilla"] = round(v / b, 2)
    return r
print(json.dumps({"build_rc": build_rc, "build_s": build_s, "cuda_tests_rc": cuda_rc,
                  "cuda_tests": ctest("gpu_ctest_cuda.log"), "gemm_bf16": gemm("bf16"), "gemm_f32": gemm("f32"),
                  "bert_base_bf16": step("bf16"), "bert_base_f32": step("f32"), "linear_bwd": layer(),
                  "bench_done_s": bench_s, "rest_rc": rest_rc, "rest_tests": ctest("gpu_ctest_rest.log"),
                  "seconds": total_s}, indent=1))
PY
cat "$out/gpu_check.json"
exit $(( build_rc != 0 || cuda_rc != 0 ))
