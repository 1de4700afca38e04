"""Golden values for src/train/report/metrics.cpp: sklearn's accuracy_score, f1_score and
matthews_corrcoef and scipy's pearsonr and spearmanr on random and edge cases.

Writes tests/fixtures/metrics_golden.json (NaN stored as null). Run from the repo root:
  $VENV_GOLD/bin/python tools/golden/gen_metrics.py
(venv: pip install scikit-learn scipy numpy)
"""
import json
import os
import warnings

import numpy as np
import scipy
import scipy.stats
import sklearn
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "metrics_golden.json")


def num(v):
    v = float(v)
    return None if np.isnan(v) else v


def labels_case(name, pred, gold):
    pred = [int(v) for v in pred]
    gold = [int(v) for v in gold]
    case = {"name": name, "pred": pred, "gold": gold,
            "accuracy": num(accuracy_score(gold, pred)),
            "matthews": num(matthews_corrcoef(gold, pred))}
    if set(pred) | set(gold) <= {0, 1}:
        # sklearn's defaults (average="binary", pos_label=1, zero_division="warn").
        case["f1"] = num(f1_score(gold, pred))
        # run_glue's combined_score: the mean of the metric dict's values.
        case["combined_score"] = num(np.mean([case["accuracy"], case["f1"]]))
    return case


def corr_case(name, x, y):
    x = [float(v) for v in x]
    y = [float(v) for v in y]
    p = num(scipy.stats.pearsonr(x, y)[0])
    s = num(scipy.stats.spearmanr(x, y)[0])
    case = {"name": name, "x": x, "y": y, "pearson": p, "spearman": s}
    if p is not None and s is not None:
        case["combined_score"] = num(np.mean([p, s]))
    return case


def main():
    # The undefined cases (constant inputs, no positives, one label) warn; their values are
    # what is being recorded.
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(20240601)
    labels = []
    for n in (7, 50, 400):
        gold = rng.integers(0, 2, n)
        # Predictions that agree with gold about 70% of the time, as a model's would.
        flip = rng.random(n) < 0.3
        labels.append(labels_case(f"binary_random_n{n}", np.where(flip, 1 - gold, gold), gold))
    labels.append(labels_case("binary_independent", rng.integers(0, 2, 60), rng.integers(0, 2, 60)))
    g = rng.integers(0, 2, 30)
    labels.append(labels_case("perfect", g, g))
    labels.append(labels_case("inverted", 1 - g, g))
    labels.append(labels_case("all_pred_zero", np.zeros(30, int), g))
    labels.append(labels_case("all_pred_one", np.ones(30, int), g))
    labels.append(labels_case("constant_gold_one", g, np.ones(30, int)))
    labels.append(labels_case("no_positives_anywhere", np.zeros(9, int), np.zeros(9, int)))
    labels.append(labels_case("all_positive_both", np.ones(9, int), np.ones(9, int)))
    labels.append(labels_case("n2_right", [0, 1], [0, 1]))
    labels.append(labels_case("n2_wrong", [1, 0], [0, 1]))
    labels.append(labels_case("n1", [1], [1]))
    labels.append(labels_case("gold_positive_pred_none", [0, 0, 0, 0], [0, 1, 1, 0]))
    for n in (12, 300):
        gold = rng.integers(0, 3, n)
        noise = rng.integers(0, 3, n)
        labels.append(labels_case(f"three_class_n{n}", np.where(rng.random(n) < 0.4, noise, gold), gold))
    labels.append(labels_case("three_class_pred_two_classes", [0, 1, 1, 0, 1, 0, 1], [0, 1, 2, 2, 1, 0, 2]))

    corr = []
    for n in (5, 40, 500):
        x = rng.normal(size=n)
        corr.append(corr_case(f"normal_n{n}", x, 0.6 * x + 0.8 * rng.normal(size=n)))
    # STS-B-like: gold on a 0.2 grid (many ties), predictions rounded to 1 decimal (ties too).
    gold = np.round(rng.uniform(0, 5, 200) * 5) / 5
    pred = np.round(np.clip(gold + rng.normal(0, 0.8, 200), 0, 5), 1)
    corr.append(corr_case("stsb_like_ties", pred, gold))
    corr.append(corr_case("integer_ties", rng.integers(0, 4, 25), rng.integers(0, 4, 25)))
    x = rng.normal(size=20)
    corr.append(corr_case("perfect_linear", x, 3 * x + 1))
    corr.append(corr_case("inverted", x, -x))
    corr.append(corr_case("monotone_nonlinear", x, np.exp(x)))
    corr.append(corr_case("n2", [1.0, 2.0], [3.0, 1.0]))
    corr.append(corr_case("large_offset", 1e6 + rng.normal(size=30), rng.normal(size=30)))
    corr.append(corr_case("constant_x", [2.0] * 6, rng.normal(size=6)))
    corr.append(corr_case("constant_y", rng.normal(size=6), [0.5] * 6))

    doc = {
        "generator": "tools/golden/gen_metrics.py",
        "versions": {"scikit-learn": sklearn.__version__, "scipy": scipy.__version__,
                     "numpy": np.__version__},
        "labels": labels,
        "correlations": corr,
    }
    with open(OUT, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {os.path.normpath(OUT)}: {len(labels)} label cases, {len(corr)} correlation cases")


if __name__ == "__main__":
    main()
