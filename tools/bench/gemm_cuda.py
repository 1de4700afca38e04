"""PyTorch twin of `leanback bench gemm --device cuda`: torch.matmul on the same shapes, in
TFLOP/s (cuBLAS's own rate: the reference for the >= 85% target). bf16: bf16 operands and
output (torch's usual bf16 product); f32: f32 with TF32 off. One JSON line with --json.
    python3 tools/bench/gemm_cuda.py [--precision bf16|f32] [--json]
"""
import argparse
import json
import time

import torch

SHAPES = [(1024, 1024, 1024, "square"), (2048, 2048, 2048, "square"), (4096, 4096, 4096, "square"),
          (8192, 8192, 8192, "square"), (4096, 2304, 768, "bert-base qkv"), (4096, 768, 768, "bert-base attn out"),
          (4096, 3072, 768, "bert-base ffn1"), (4096, 768, 3072, "bert-base ffn2")]


def tflops(m, n, k, dtype, iters):
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    best = 0.0
    for _ in range(iters):
        reps = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(reps):
                torch.matmul(a, b)
            torch.cuda.synchronize()
            secs = time.perf_counter() - t0
            if secs >= 0.05 or reps >= 1 << 16:
                break
            reps *= 4
        best = max(best, 2.0 * m * n * k * reps / secs / 1e12)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--precision", default="bf16", choices=["bf16", "f32"])
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    rows = [{"m": m, "n": n, "k": k, "tflops": tflops(m, n, k, dtype, a.iters), "what": w} for m, n, k, w in SHAPES]
    if a.json:
        print(json.dumps({"workload": "gemm", "framework": "pytorch", "torch": torch.__version__,
                          "gpu": torch.cuda.get_device_name(), "precision": a.precision, "results": rows}))
    else:
        for r in rows:
            print(f"{r['m']:5d} {r['n']:5d} {r['k']:5d} {r['tflops']:8.1f}  {r['what']}")


if __name__ == "__main__":
    main()
