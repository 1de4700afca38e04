"""Shared helpers for the golden-fixture generators (PyTorch reference values).

Each tools/golden/gen_<family>.py defines generate(out_dir) and writes one small
safetensors file per case with save(). Tensors are stored in f64 (inputs, outputs and
gradients) unless an integer dtype is needed, so the C++ tests can run the op in f32 or
f64 from the same inputs. Keep fixtures small (a few KiB each).
"""
import json
import os
import struct

import torch

_DTYPES = {
    torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
    torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL", torch.float16: "F16",
    torch.bfloat16: "BF16",
}


def save(path, tensors, metadata=None):
    """Writes `tensors` (name -> torch.Tensor) as a safetensors file."""
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def seeded(seed):
    g = torch.Generator().manual_seed(seed)
    return g


def randn(*shape, seed=0):
    return torch.randn(tuple(shape), generator=seeded(seed), dtype=torch.float64)


def grads_of(fn, inputs, seed=1234):
    """Runs y = fn(*inputs) with inputs requiring grad, backward of sum(y * r) with a fixed
    random r. Returns (y, r, [grad of each input])."""
    ins = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    y = fn(*ins)
    r = randn(*y.shape, seed=seed).to(y.dtype)
    (y * r).sum().backward()
    return y.detach(), r, [x.grad for x in ins]
