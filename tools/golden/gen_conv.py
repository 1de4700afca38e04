"""Golden fixtures for conv2d and the 2-D pools (tests/golden/golden_conv_test.cpp).

Each fixture conv_<case> / pool_<case> holds the inputs (x, w, b when present), an i64 `args`
tensor describing the call, the output y, the random cotangent r and the gradients of
sum(y * r): gx, gw, gb. All in f64; the C++ test runs the op in f32 and f64.
args: conv [sh, sw, ph, pw, dh, dw, groups]; max/avg pool [kh, kw, sh, sw, ph, pw];
adaptive pool [out_h, out_w].
"""
import os

import torch
import torch.nn.functional as F

from common import grads_of, randn, save

# name: (x shape, w shape, bias, stride, padding, dilation, groups)
CONV = {
    "basic": ((2, 3, 6, 5), (4, 3, 3, 3), True, (1, 1), (1, 1), (1, 1), 1),
    "stride21_pad10": ((2, 2, 7, 6), (3, 2, 3, 2), True, (2, 1), (1, 0), (1, 1), 1),
    "dilation23_nobias": ((1, 3, 8, 7), (2, 3, 3, 2), False, (1, 1), (2, 1), (2, 3), 1),
    "groups2_stride2": ((2, 4, 5, 5), (6, 2, 3, 3), True, (2, 2), (1, 1), (1, 1), 2),
    "depthwise": ((2, 3, 6, 6), (3, 1, 3, 3), True, (1, 1), (1, 1), (1, 1), 3),
    "1x1": ((2, 4, 5, 5), (3, 4, 1, 1), True, (1, 1), (0, 0), (1, 1), 1),
    "many_images": ((9, 2, 3, 3), (2, 2, 2, 2), True, (1, 1), (0, 0), (1, 1), 1),
    # Wide enough for conv2d's Winograd F(2x2, 3x3) path (src/ops/winograd_conv.h).
    "winograd_c32": ((2, 32, 5, 4), (16, 32, 3, 3), True, (1, 1), (1, 1), (1, 1), 1),
}

# name: (op, x shape, args)
POOL = {
    "max_k2s2": ("max", (2, 3, 6, 6), (2, 2, 2, 2, 0, 0)),
    "max_k3s2p1": ("max", (2, 2, 7, 6), (3, 3, 2, 2, 1, 1)),
    "max_k32s12p11": ("max", (1, 3, 5, 6), (3, 2, 1, 2, 1, 1)),
    "avg_k2s2": ("avg", (2, 3, 6, 6), (2, 2, 2, 2, 0, 0)),
    "avg_k3s2p1": ("avg", (2, 2, 7, 6), (3, 3, 2, 2, 1, 1)),
    "avg_k32s21p11": ("avg", (1, 3, 5, 6), (3, 2, 2, 1, 1, 1)),
    "adaptive_7x5_to_3x2": ("adaptive", (2, 3, 7, 5), (3, 2)),
    "adaptive_global": ("adaptive", (2, 3, 5, 5), (1, 1)),
    "adaptive_3x4_to_5x6": ("adaptive", (1, 2, 3, 4), (5, 6)),
}


def generate(out):
    n = 0
    for i, (name, (xs, ws, bias, s, p, d, g)) in enumerate(CONV.items()):
        x = randn(*xs, seed=400 + i)
        w = randn(*ws, seed=500 + i)
        ins = [x, w] + ([randn(ws[0], seed=600 + i)] if bias else [])
        fn = lambda x, w, b=None: F.conv2d(x, w, b, stride=s, padding=p, dilation=d, groups=g)
        y, r, grads = grads_of(fn, ins)
        t = {"x": x, "w": w, "args": torch.tensor([*s, *p, *d, g], dtype=torch.int64),
             "y": y, "r": r, "gx": grads[0], "gw": grads[1]}
        if bias:
            t["b"] = ins[2]
            t["gb"] = grads[2]
        save(os.path.join(out, f"conv_{name}.safetensors"), t)
        n += 1
    for i, (name, (op, xs, args)) in enumerate(POOL.items()):
        x = randn(*xs, seed=700 + i)
        if op == "max":
            fn = lambda x: F.max_pool2d(x, args[0:2], args[2:4], args[4:6])
        elif op == "avg":
            fn = lambda x: F.avg_pool2d(x, args[0:2], args[2:4], args[4:6], count_include_pad=True)
        else:
            fn = lambda x: F.adaptive_avg_pool2d(x, args)
        y, r, (gx,) = grads_of(fn, [x])
        save(os.path.join(out, f"pool_{name}.safetensors"),
             {"x": x, "args": torch.tensor(args, dtype=torch.int64), "y": y, "r": r, "gx": gx})
        n += 1
    return n
