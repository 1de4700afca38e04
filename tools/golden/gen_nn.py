"""Golden fixtures for the NN ops (tests/golden/golden_nn_test.cpp): softmax / log_softmax (with
additive masks), layer_norm, batch_norm (train and eval, running-stat updates), embedding,
cross_entropy (ignore_index, label smoothing) and mse_loss.

Each fixture nn_<case> holds the inputs, the output y, the random cotangent r and the
gradient g_<input> of sum(y * r) for every floating input. Dropout has no fixture: PyTorch's
RNG differs from our Philox stream, so it is tested statistically instead."""
import os

import torch
import torch.nn.functional as F

from common import grads_of, randn, save


def _save(out, name, tensors):
    save(os.path.join(out, f"nn_{name}.safetensors"), tensors)


def _with_grads(out, name, fn, inputs, extra=None):
    """inputs: name -> tensor (in fn's argument order)."""
    names = list(inputs)
    y, r, grads = grads_of(fn, [inputs[k] for k in names])
    t = dict(inputs)
    t.update({"y": y, "r": r})
    for k, g in zip(names, grads):
        if g is not None:
            t["g_" + k] = g
    if extra:
        t.update(extra)
    _save(out, name, t)


def generate(out):
    n = 0
    # ---- softmax / log_softmax
    x = randn(2, 3, 4, 5, seed=1) * 2
    _with_grads(out, "softmax_last", lambda a: F.softmax(a, dim=-1), {"x": x}); n += 1
    _with_grads(out, "softmax_dim1", lambda a: F.softmax(a, dim=1), {"x": x}); n += 1
    _with_grads(out, "log_softmax_last", lambda a: F.log_softmax(a, dim=-1), {"x": x}); n += 1
    _with_grads(out, "log_softmax_dim0", lambda a: F.log_softmax(a, dim=0), {"x": x}); n += 1
    # Attention-style scores (B, H, T, T) with a (B, 1, 1, T) additive mask (HF convention),
    # mask differentiable (as a learned bias would be).
    s = randn(2, 2, 4, 4, seed=2) * 2
    m = randn(2, 1, 1, 4, seed=3)
    m[0, 0, 0, 3] = -1e4
    m[1, 0, 0, 1] = -1e4
    _with_grads(out, "softmax_masked", lambda a, b: F.softmax(a + b, dim=-1), {"x": s, "mask": m}); n += 1
    _with_grads(out, "log_softmax_masked", lambda a, b: F.log_softmax(a + b, dim=-1),
                {"x": s, "mask": m}); n += 1
    # -inf padding (at least one finite key per row): probabilities exactly 0.
    mi = torch.zeros(2, 1, 1, 4, dtype=torch.float64)
    mi[0, 0, 0, 2:] = float("-inf")
    mi[1, 0, 0, 0] = float("-inf")
    _with_grads(out, "softmax_masked_inf", lambda a: F.softmax(a + mi, dim=-1), {"x": s},
                extra={"mask": mi}); n += 1

    # ---- layer_norm over the last dim
    x = randn(2, 3, 8, seed=10) * 1.5 + 0.5
    w = randn(8, seed=11)
    b = randn(8, seed=12)
    _with_grads(out, "layer_norm", lambda a, ww, bb: F.layer_norm(a, (8,), ww, bb, 1e-5),
                {"x": x, "weight": w, "bias": b}); n += 1
    _with_grads(out, "layer_norm_plain", lambda a: F.layer_norm(a, (8,), None, None, 1e-5),
                {"x": x}); n += 1

    # ---- batch_norm: training (batch stats, running stats updated) and eval
    for name, shape, training in [("batch_norm_train", (4, 3, 2, 2), True),
                                  ("batch_norm_train_1d", (6, 3), True),
                                  ("batch_norm_eval", (4, 3, 2, 2), False)]:
        x = randn(*shape, seed=20) * 2 + 1
        w = randn(3, seed=21)
        b = randn(3, seed=22)
        rm0 = randn(3, seed=23) * 0.1
        rv0 = randn(3, seed=24).abs() + 0.5
        rm, rv = rm0.clone(), rv0.clone()
        _with_grads(out, name,
                    lambda a, ww, bb: F.batch_norm(a, rm, rv, ww, bb, training, 0.1, 1e-5),
                    {"x": x, "weight": w, "bias": b},
                    extra={"running_mean": rm0, "running_var": rv0,
                           "running_mean_after": rm, "running_var_after": rv})
        n += 1

    # ---- embedding (repeated indices; padding_idx 2 gets no gradient)
    idx = torch.tensor([[1, 2, 5], [2, 0, 1]], dtype=torch.int64)
    w = randn(7, 4, seed=30)
    _with_grads(out, "embedding", lambda ww: F.embedding(idx, ww), {"weight": w},
                extra={"indices": idx}); n += 1
    _with_grads(out, "embedding_padding", lambda ww: F.embedding(idx, ww, padding_idx=2),
                {"weight": w}, extra={"indices": idx}); n += 1

    # ---- cross_entropy (mean over non-ignored rows)
    x = randn(6, 5, seed=40) * 2
    t = torch.tensor([1, -100, 4, 0, -100, 2], dtype=torch.int64)
    t_all = torch.tensor([1, 3, 4, 0, 0, 2], dtype=torch.int64)
    for name, tt, ls in [("cross_entropy", t_all, 0.0),
                         ("cross_entropy_ignore", t, 0.0),
                         ("cross_entropy_ignore_smooth", t, 0.1),
                         ("cross_entropy_smooth", t_all, 0.3)]:
        _with_grads(out, name, lambda a: F.cross_entropy(a, tt, ignore_index=-100, label_smoothing=ls),
                    {"logits": x}, extra={"targets": tt, "label_smoothing": torch.tensor(ls, dtype=torch.float64)})
        n += 1

    # ---- mse_loss
    _with_grads(out, "mse_loss", F.mse_loss, {"input": randn(3, 4, seed=50), "target": randn(3, 4, seed=51)})
    n += 1
    return n
