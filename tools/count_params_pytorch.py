#!/usr/bin/python3
"""Prints `preset count` (sum of p.numel() of the PyTorch reference) for every preset, vocab 37000.

  /usr/bin/python3 tools/count_params_pytorch.py

Models are built on the meta device (shapes only, no memory). Rows: base, big, the Table 3 rows, and base
and big with attention biases (`base+bias`, `big+bias`). The spec's four counts are asserted.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_model import PRESETS, SPEC_COUNTS, Transformer, preset_config  # noqa: E402

VOCAB = 37000


def count(name, **overrides):
    cfg = preset_config(name, vocab_size=VOCAB, **overrides)
    model = Transformer(cfg, device="meta", init=False)
    return sum(p.numel() for p in model.parameters())


def main():
    rows = [(name, count(name)) for name in PRESETS]
    rows += [(f"{name}+bias", count(name, attention_bias=True)) for name in ("base", "big")]
    for label, n in rows:
        print(f"{label} {n}")
    counts = dict(rows)
    for (name, bias), expected in SPEC_COUNTS.items():
        label = f"{name}+bias" if bias else name
        if counts[label] != expected:
            sys.exit(f"count of {label} is {counts[label]}, the spec says {expected}")


if __name__ == "__main__":
    main()
