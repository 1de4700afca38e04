#!/usr/bin/env python3
"""Regenerates every golden fixture in tests/fixtures/ from PyTorch.

Usage: /usr/bin/python3 tools/gen_golden.py [family ...]
Needs PyTorch (Debian's python3-torch or PyPI); the test suite itself does not.
Runs tools/golden/gen_<family>.py's generate(out_dir) for each family (all by default).
"""
import importlib
import os
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures"


def main():
    torch.manual_seed(0)
    sys.path.insert(0, str(ROOT / "tools" / "golden"))
    families = sys.argv[1:] or sorted(p.stem[4:] for p in (ROOT / "tools" / "golden").glob("gen_*.py"))
    for fam in families:
        mod = importlib.import_module("gen_" + fam)
        n = mod.generate(str(OUT))
        print(f"{fam}: {n} fixtures")


if __name__ == "__main__":
    main()
