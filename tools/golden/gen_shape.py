"""Golden fixtures for concat, index_select and fwht (tests/golden/golden_shape_test.cpp).

Each fixture shape_<case> holds the inputs, the output y, the random cotangent r and the
gradients g<input> of sum(y * r). fwht has no PyTorch op: the reference multiplies each
zero-padded block by an explicit Sylvester Hadamard matrix H_{2^k} (H_1 = [1],
H_2n = [[H, H], [H, -H]]), independent of the C++ butterfly.
"""
import os

import torch

from common import grads_of, randn, save


def sylvester(k):
    h = torch.ones(1, 1, dtype=torch.float64)
    for _ in range(k):
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def fwht_ref(x, dim, k):
    b = 2 ** k
    x = x.movedim(dim, -1)
    n = x.shape[-1]
    pad = (-n) % b
    x = torch.cat([x, x.new_zeros(*x.shape[:-1], pad)], -1)
    blocks = x.reshape(*x.shape[:-1], -1, b)
    y = blocks @ sylvester(k).to(x.dtype).T
    return y.reshape(*x.shape).movedim(-1, dim)


def generate(out):
    n = 0

    def put(name, tensors):
        nonlocal n
        save(os.path.join(out, f"shape_{name}.safetensors"), tensors)
        n += 1

    # concat along a middle axis and along the first axis.
    a, b, c = randn(2, 3, 4, seed=501), randn(2, 1, 4, seed=502), randn(2, 2, 4, seed=503)
    y, r, (ga, gb, gc) = grads_of(lambda a, b, c: torch.cat([a, b, c], 1), [a, b, c])
    put("concat_dim1", {"a": a, "b": b, "c": c, "y": y, "r": r, "ga": ga, "gb": gb, "gc": gc})
    a, b = randn(1, 5, seed=504), randn(3, 5, seed=505)
    y, r, (ga, gb) = grads_of(lambda a, b: torch.cat([a, b], 0), [a, b])
    put("concat_dim0", {"a": a, "b": b, "y": y, "r": r, "ga": ga, "gb": gb})

    # index_select with repeated indices (the backward accumulates them).
    x = randn(5, 3, seed=511)
    idx = torch.tensor([4, 0, 4, 2, 4], dtype=torch.int64)
    y, r, (gx, _) = grads_of(lambda x, i: torch.index_select(x, 0, i), [x, idx])
    put("index_select_dim0", {"x": x, "index": idx, "y": y, "r": r, "gx": gx})
    x = randn(2, 6, 3, seed=512)
    idx = torch.tensor([5, 1, 1, 0], dtype=torch.int32)
    y, r, (gx, _) = grads_of(lambda x, i: torch.index_select(x, 1, i.long()), [x, idx])
    put("index_select_dim1", {"x": x, "index": idx, "y": y, "r": r, "gx": gx})

    # fwht: last axis with padding (40 -> 48), a middle axis, and the first axis with k = 3.
    for name, shape, dim, k, seed in [("fwht_last_pad", (3, 40), 1, 4, 521),
                                      ("fwht_mid", (2, 16, 3), 1, 4, 522),
                                      ("fwht_first_k3", (13, 2), 0, 3, 523)]:
        x = randn(*shape, seed=seed)
        y, r, (gx,) = grads_of(lambda x: fwht_ref(x, dim, k), [x])
        put(name, {"x": x, "y": y, "r": r, "gx": gx,
                   "dim": torch.tensor(dim, dtype=torch.int64),
                   "block_log2": torch.tensor(k, dtype=torch.int64)})
    return n
