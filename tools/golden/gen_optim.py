"""Golden fixtures for optimizers and LR schedules (tests/golden/golden_optim_test.cpp).

optim_<case>: initial parameter p0 (f64), gradients g1..g3, parameter after each step p1..p3.
(LR schedules are unit-tested against hand-computed values in tests/unit/optim_test.cpp.)"""
import os

import torch

from common import randn, save

CASES = {
    "sgd_plain": lambda ps: torch.optim.SGD(ps, lr=0.1),
    "sgd_momentum_wd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True),
    "sgd_dampening": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.8, dampening=0.3),
    "adam_l2": lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.85, 0.995), eps=1e-8, weight_decay=0.05),
}


def generate(out):
    n = 0
    for i, (name, make) in enumerate(CASES.items()):
        p = randn(4, 5, seed=500 + i).requires_grad_()
        opt = make([p])
        tensors = {"p0": p.detach().clone()}
        for step in range(1, 4):
            g = randn(4, 5, seed=600 + 10 * i + step)
            p.grad = g.clone()
            opt.step()
            tensors[f"g{step}"] = g
            tensors[f"p{step}"] = p.detach().clone()
        save(os.path.join(out, f"optim_{name}.safetensors"), tensors)
        n += 1

    return n
