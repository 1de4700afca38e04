"""Golden fixtures for matmul, linear and eigh (tests/golden/golden_linalg_test.cpp).

linalg_matmul_<case>: inputs a, b (stored as the C++ op receives them: transposed operands
are stored in their (..., K, M) / (..., N, K) layout), output y, cotangent r, gradients ga, gb
of sum(y * r). linalg_linear_<case>: x, w, (b), y, r, gx, gw, (gb).
linalg_eigh: a symmetric a, eigenvalues w and eigenvectors v (columns; signs are arbitrary,
so the test compares them up to sign).
"""
import os

import torch
import torch.nn.functional as F

from common import grads_of, randn, save

MATMUL = {
    # name: (a shape as stored, b shape as stored, trans_a, trans_b)
    "nn": ((3, 4), (4, 5), False, False),
    "nt": ((3, 4), (5, 4), False, True),
    "tn": ((4, 3), (4, 5), True, False),
    "tt": ((4, 3), (5, 4), True, True),
    "batched": ((2, 3, 4), (2, 4, 5), False, False),
    "broadcast": ((2, 1, 3, 4), (3, 5, 4), False, True),
    "shared_b": ((2, 3, 4), (4, 5), False, False),
}

LINEAR = {
    # name: (x shape, out features, bias)
    "bias_2d": ((5, 4), 3, True),
    "bias_3d": ((2, 3, 4), 6, True),
    "nobias_3d": ((2, 3, 4), 6, False),
    "bias_1d": ((4,), 3, True),
}


def _op(t, trans):
    return t.transpose(-1, -2) if trans else t


def generate(out):
    n = 0
    for i, (name, (sa, sb, ta, tb)) in enumerate(MATMUL.items()):
        a = randn(*sa, seed=400 + i)
        b = randn(*sb, seed=450 + i)
        y, r, (ga, gb) = grads_of(lambda a, b: torch.matmul(_op(a, ta), _op(b, tb)), [a, b])
        save(os.path.join(out, f"linalg_matmul_{name}.safetensors"),
             {"a": a, "b": b, "y": y, "r": r, "ga": ga, "gb": gb},
             {"trans_a": int(ta), "trans_b": int(tb)})
        n += 1
    for i, (name, (sx, o, bias)) in enumerate(LINEAR.items()):
        x = randn(*sx, seed=500 + i)
        w = randn(o, sx[-1], seed=550 + i)
        if bias:
            b = randn(o, seed=600 + i)
            y, r, (gx, gw, gb) = grads_of(F.linear, [x, w, b])
            t = {"x": x, "w": w, "b": b, "y": y, "r": r, "gx": gx, "gw": gw, "gb": gb}
        else:
            y, r, (gx, gw) = grads_of(F.linear, [x, w])
            t = {"x": x, "w": w, "y": y, "r": r, "gx": gx, "gw": gw}
        save(os.path.join(out, f"linalg_linear_{name}.safetensors"), t)
        n += 1
    m = randn(6, 6, seed=650)
    a = m + m.T
    w, v = torch.linalg.eigh(a)
    save(os.path.join(out, "linalg_eigh.safetensors"), {"a": a, "w": w, "v": v})
    return n + 1
