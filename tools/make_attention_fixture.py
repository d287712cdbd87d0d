#!/usr/bin/python3
"""Writes tests/fixtures/tiny/attention.safetensors: every attention weight of the tiny reference model
(tests/fixtures/tiny/model.safetensors) for two sentence pairs, which the C++ decode::attention_maps (the
weights that tfm attention draws) is tested against.

  /usr/bin/python3 tools/make_attention_fixture.py [--fixture tests/fixtures/tiny]

The two pairs run as one right-padded batch (sources of 6 and 3 tokens, targets of 5 and 7), so the stored
weights also show that padding takes no weight. Computed in float64 (tools/reference_model.py's written-out
attention, model.double() on the F32 parameters), stored as F32, per pair without its padding:
  pair{i}.source, pair{i}.target          I32 token ids (no bos/eos)
  pair{i}.encoder.{l}  [h, S, S]           encoder self-attention of layer l
  pair{i}.decoder.{l}  [h, T, T]           decoder self-attention, T = target + 1 (inputs bos y1..yn)
  pair{i}.cross.{l}    [h, T, S]           encoder-decoder attention
Deterministic: running it again rewrites a byte-identical file.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_reference_fixture import write_safetensors  # noqa: E402
from read_safetensors import read_safetensors  # noqa: E402
from reference_model import MultiHeadAttention, Transformer, make_config  # noqa: E402
import json  # noqa: E402

SOURCES = ([5, 17, 42, 8, 33, 9], [12, 7, 51])
TARGETS = ([21, 4, 36, 58, 11], [6, 44, 19, 27, 13, 50, 30])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", default="tests/fixtures/tiny")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with open(os.path.join(args.fixture, "config.json")) as f:
        cfg = make_config(json.load(f))
    params, _ = read_safetensors(os.path.join(args.fixture, "model.safetensors"))
    model = Transformer(cfg, init=False).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name].to(p.dtype))
    model.eval()
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.keep_weights = True

    pad, bos = cfg["pad_id"], cfg["bos_id"]
    width = max(map(len, SOURCES))
    length = max(map(len, TARGETS)) + 1
    src = torch.full((len(SOURCES), width), pad, dtype=torch.long)
    tgt_in = torch.full((len(TARGETS), length), pad, dtype=torch.long)
    for i, (s, t) in enumerate(zip(SOURCES, TARGETS)):
        src[i, :len(s)] = torch.tensor(s)
        tgt_in[i, 0] = bos
        tgt_in[i, 1:len(t) + 1] = torch.tensor(t)
    with torch.no_grad():
        model(src, tgt_in)

    out = {}
    for i, (s, t) in enumerate(zip(SOURCES, TARGETS)):
        S, T = len(s), len(t) + 1
        out[f"pair{i}.source"] = torch.tensor(s, dtype=torch.int32)
        out[f"pair{i}.target"] = torch.tensor(t, dtype=torch.int32)
        for l, layer in enumerate(model.encoder.layers):
            w = layer.self_attn.kept_weights[i]
            assert not bool((w[:, :, S:] != 0).any()), "weight on source padding"
            out[f"pair{i}.encoder.{l}"] = w[:, :S, :S].float()
        for l, layer in enumerate(model.decoder.layers):
            out[f"pair{i}.decoder.{l}"] = layer.self_attn.kept_weights[i][:, :T, :T].float()
            out[f"pair{i}.cross.{l}"] = layer.cross_attn.kept_weights[i][:, :T, :S].float()
    meta = {"computed_in": "float64; stored as F32", "torch_version": torch.__version__,
            "model": "model.safetensors of the same folder"}
    write_safetensors(os.path.join(args.fixture, "attention.safetensors"), out, meta)


if __name__ == "__main__":
    main()
