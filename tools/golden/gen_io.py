"""Golden fixture for the safetensors reader/writer (tests/unit/safetensors_test.cpp).

One file written by common.save(): every dtype the project supports, a 0-d tensor, an empty
tensor and metadata (including non-ASCII text, which json.dumps escapes as \\uXXXX). The
C++ test checks the values against literals and that save_safetensors reproduces this file
byte for byte. Metadata keys are inserted in sorted order because the C++ side holds them
in a std::map (sorted) and both writers emit them in iteration order.
"""
import os

import torch

from common import save


def generate(out_dir):
    tensors = {
        "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5 - 1.0,
        "f64": torch.tensor([0.1, -1e300, 3.141592653589793], dtype=torch.float64),
        "bf16": torch.tensor([1.0, -2.5, 0.15625, 0.1], dtype=torch.bfloat16),
        "f16": torch.tensor([1.0, -2.0, 65504.0, 2.0 ** -14, 2.0 ** -24], dtype=torch.float16),
        "i8": torch.tensor([-128, -1, 0, 127], dtype=torch.int8),
        "i32": torch.tensor([-2147483648, 7, 2147483647], dtype=torch.int32),
        "i64": torch.tensor([-(2 ** 62), 1, 2 ** 40 + 3], dtype=torch.int64),
        "u8": torch.tensor([[0, 1], [200, 255]], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5, dtype=torch.float32),
        "empty": torch.zeros(0, 3, dtype=torch.float64),
    }
    metadata = {"format": "pt", "note": "written by tools/golden/gen_io.py",
                "unicode": "h\u00e9llo \u2713"}
    save(os.path.join(out_dir, "io_python_writer.safetensors"), tensors, metadata)
    return 1
