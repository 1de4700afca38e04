"""Golden fixtures for elementwise ops and reductions (tests/golden/golden_elementwise_test.cpp).

Each fixture elementwise_<case> holds inputs a (and b), the output y, the random cotangent r
and the gradients ga (gb) of sum(y * r)."""
import os

import torch
import torch.nn.functional as F

from common import grads_of, randn, save

UNARY = {
    "neg": lambda a: -a,
    "exp": torch.exp,
    "log": lambda a: torch.log(a),
    "sqrt": lambda a: torch.sqrt(a),
    "rsqrt": lambda a: torch.rsqrt(a),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "gelu": lambda a: F.gelu(a),
    "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"),
    "add_scalar": lambda a: a + 2.5,
    "mul_scalar": lambda a: a * -1.5,
    "rsub_scalar": lambda a: 1.0 - a,
    "pow_scalar": lambda a: a ** 2.5,
    "sum_all": lambda a: a.sum(),
    "sum_dim1": lambda a: a.sum(dim=1),
    "sum_dims02_keep": lambda a: a.sum(dim=(0, 2), keepdim=True),
    "mean_last": lambda a: a.mean(dim=-1),
    "max_dim1": lambda a: a.max(dim=1).values,
}
POSITIVE = {"log", "sqrt", "rsqrt", "pow_scalar"}

BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
}


def generate(out):
    n = 0
    for i, (name, fn) in enumerate(UNARY.items()):
        a = randn(2, 3, 4, seed=100 + i)
        if name in POSITIVE:
            a = a.abs() + 0.5
        y, r, (ga,) = grads_of(fn, [a])
        save(os.path.join(out, f"elementwise_{name}.safetensors"), {"a": a, "y": y, "r": r, "ga": ga})
        n += 1
    for i, (name, fn) in enumerate(BINARY.items()):
        a = randn(2, 3, 4, seed=200 + i)
        b = randn(3, 1, seed=300 + i)
        if name == "div":
            b = b.abs() + 1.0
        y, r, (ga, gb) = grads_of(fn, [a, b])
        save(os.path.join(out, f"elementwise_{name}.safetensors"),
             {"a": a, "b": b, "y": y, "r": r, "ga": ga, "gb": gb})
        n += 1
    return n
