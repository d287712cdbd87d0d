#!/usr/bin/python3
"""Writes the whole-model reference fixture tests/fixtures/tiny/ that the C++ model is tested against.

  /usr/bin/python3 tools/make_reference_fixture.py [--out tests/fixtures/tiny]
  /usr/bin/python3 tools/make_reference_fixture.py --variant NAME [--out tests/fixtures/variants/NAME]

--variant writes a smaller model of one group of the model variants other toolkits need (VARIANTS
below: the config keys of docs/MODEL_FORMAT.md that Marian, Hugging Face MarianMT and fairseq
models use), in the same files; `--variant all` writes every group.

Files: config.json (the spec's keys), model.safetensors (the initial parameters, F32, the spec's names and
order), reference.safetensors (a padded batch, the logits, the loss, every parameter's gradient and the
losses of 5 Adam steps). Everything is computed in float64 (model.double() on the F32-stored initial
parameters, which float64 represents exactly) and only the results are rounded to F32, so the reference
carries no float32 rounding of its own. The script is deterministic (fixed seeds, one thread) and re-reads
what it wrote to check it. It also prints how far PyTorch's own float32 run lands from the reference (a guide
to tolerances); that depends on the BLAS library, so it is not stored (the float64 results, rounded to F32,
came out bit-identical with the reference BLAS and with OpenBLAS).
"""

import argparse
import json
import os
import struct
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_safetensors import read_safetensors  # noqa: E402
from reference_model import (VOCABULARY_MATRICES, Transformer, config_json, decoder_start,  # noqa: E402
                             learning_rate, make_config, make_optimizer)

SEED = 20240607
WARMUP = 4
ADAM_STEPS = 5
LR_FORMULA = "d_model^-0.5 * min(s^-0.5, s * warmup^-1.5), s = 1-based step"

TINY_CONFIG = make_config({
    "layers": 2, "d_model": 32, "d_ff": 64, "heads": 4, "d_k": 8, "d_v": 8,
    "dropout": 0.0, "attention_dropout": 0.0, "label_smoothing": 0.1,
    "positional": "sinusoidal", "max_positions": 64, "vocab_size": 60, "norm": "post",
    "attention_bias": False, "layer_norm_eps": 1e-5,
    "pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3,
})
# Smaller models (d_model 8, V 24) of the variant groups: together they set every variant key off
# its default at least once, and each sets several at once as the toolkit it is named after does.
_SMALL = {"layers": 2, "d_model": 8, "d_ff": 16, "heads": 2, "d_k": 4, "d_v": 4,
          "dropout": 0.0, "max_positions": 16, "vocab_size": 24}
VARIANTS = {
    # Marian / OPUS-MT: swish, [sin | cos] halves with tensor2tensor's frequencies, biases on the
    # attention projections and the logits, the decoder starting from the pad id.
    "marian": {"activation": "swish", "sinusoid": "halves_t2t", "output_bias": True,
               "attention_bias": True, "decoder_start_id": 0},
    # Hugging Face style: gelu, the halves with the paper's frequencies, a separate source
    # embedding, unscaled embeddings, pre-norm, positions shifted by 2, LayerNorm eps 1e-6.
    "huggingface": {"activation": "gelu", "sinusoid": "halves", "tie_embeddings": "decoder",
                    "scale_embeddings": False, "norm": "pre", "position_offset": 2,
                    "layer_norm_eps": 1e-6},
    # fairseq: learned positions from padding_idx + 1 = 2, three untied vocabulary matrices, an
    # output bias, pre-norm with final norms, attention biases, the decoder starting from eos.
    "fairseq": {"positional": "learned", "position_offset": 2, "tie_embeddings": "none",
                "output_bias": True, "norm": "pre", "attention_bias": True, "decoder_start_id": 3},
    # A deep encoder over a shallow decoder (Marian's enc-depth 6 with dec-depth 2, Kasai et al.'s
    # deep-shallow models): 3 encoder layers and 1 decoder layer, with Marian's swish, sinusoids
    # and start id.
    "depths": {"layers": 3, "decoder_layers": 1, "activation": "swish", "sinusoid": "halves_t2t",
               "decoder_start_id": 0},
}

SOURCE_LENGTHS = (7, 5, 3)
TARGET_LENGTHS = (6, 8, 4)  # without bos/eos; tgt_in = bos y, tgt_out = y eos
FIRST_WORD_ID = 4  # ids below are pad/unk/bos/eos

_DTYPE_NAMES = {torch.float32: ("F32", "<f4"), torch.int32: ("I32", "<i4")}


def write_safetensors(path, tensors, metadata):
    """tensors: ordered dict name -> F32 or I32 tensor, stored contiguously in that order."""
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    chunks = []
    offset = 0
    for name, t in tensors.items():
        dtype_name, np_dtype = _DTYPE_NAMES[t.dtype]
        raw = t.detach().contiguous().numpy().astype(np_dtype).tobytes()
        header[name] = {"dtype": dtype_name, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)


def initialise(model):
    """Non-trivial initial values so that every parameter's gradient matters: xavier-uniform linear
    weights, embedding normal(0, d^-0.5), LayerNorm weights 1 + 0.1 randn, every bias 0.1 randn."""
    d = model.cfg["d_model"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in VOCABULARY_MATRICES or name.endswith("positions.weight"):
                nn.init.normal_(p, 0.0, d**-0.5)
            elif name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                nn.init.xavier_uniform_(p)


def make_batch(cfg):
    """Right-padded src [3, S], tgt_in [3, T], tgt_out [3, T] as int32, word ids from 4..V-1."""
    b = len(SOURCE_LENGTHS)
    s, t = max(SOURCE_LENGTHS), max(TARGET_LENGTHS) + 1
    src = torch.full((b, s), cfg["pad_id"], dtype=torch.int32)
    tgt_in = torch.full((b, t), cfg["pad_id"], dtype=torch.int32)
    tgt_out = torch.full((b, t), cfg["pad_id"], dtype=torch.int32)
    for i, (ls, lt) in enumerate(zip(SOURCE_LENGTHS, TARGET_LENGTHS)):
        src[i, :ls] = torch.randint(FIRST_WORD_ID, cfg["vocab_size"], (ls,), dtype=torch.int32)
        words = torch.randint(FIRST_WORD_ID, cfg["vocab_size"], (lt,), dtype=torch.int32)
        tgt_in[i, 0] = decoder_start(cfg)
        tgt_in[i, 1:lt + 1] = words
        tgt_out[i, :lt] = words
        tgt_out[i, lt] = cfg["eos_id"]
    return src, tgt_in, tgt_out


def load_params(model, params):
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name].to(p.dtype))


def forward_backward(model, src, tgt_in, tgt_out):
    model.zero_grad(set_to_none=True)
    logits = model(src.long(), tgt_in.long())
    loss = model.loss(logits, tgt_out.long())
    loss.backward()
    return logits.detach(), loss.detach()


def adam_losses(cfg, params, src, tgt_in, tgt_out, dtype=torch.float64):
    """Losses before each of 5 Adam updates (lr schedule with warmup 4) and after the last."""
    model = Transformer(cfg, init=False).to(dtype)
    load_params(model, params)
    model.train()
    optimizer = make_optimizer(model)
    losses = []
    for step in range(1, ADAM_STEPS + 1):
        _, loss = forward_backward(model, src, tgt_in, tgt_out)
        losses.append(loss.item())
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, cfg["d_model"], WARMUP)
        optimizer.step()
    with torch.no_grad():
        losses.append(model.loss(model(src.long(), tgt_in.long()), tgt_out.long()).item())
    return torch.tensor(losses, dtype=torch.float64)


def float32_deviation(cfg, params, src, tgt_in, tgt_out, logits64, loss64, grads64, losses64):
    """How far PyTorch's own float32 run lands from the float64 reference (a guide to tolerances)."""
    model = Transformer(cfg, init=False)
    load_params(model, params)
    logits, loss = forward_backward(model, src, tgt_in, tgt_out)
    losses32 = adam_losses(cfg, params, src, tgt_in, tgt_out, torch.float32)
    adam_err = (losses32 - losses64).abs().max().item()
    grad_err = max((p.grad.double() - grads64[n]).abs().max().item() for n, p in model.named_parameters())
    return {"f32_max_abs_diff_logits": f"{(logits.double() - logits64).abs().max().item():.3e}",
            "f32_abs_diff_loss": f"{abs(loss.item() - loss64.item()):.3e}",
            "f32_max_abs_diff_grad": f"{grad_err:.3e}",
            "f32_max_abs_diff_adam_losses": f"{adam_err:.3e}"}


def build(out_dir, cfg=TINY_CONFIG):
    torch.set_num_threads(1)  # fixed reduction order
    torch.manual_seed(SEED)
    init_model = Transformer(cfg, init=False)
    initialise(init_model)
    params = {n: p.detach().clone() for n, p in init_model.named_parameters()}
    src, tgt_in, tgt_out = make_batch(cfg)

    model = Transformer(cfg, init=False).double()
    load_params(model, params)
    model.train()  # dropout is 0, so train and eval agree; train is what the C++ test runs
    logits, loss = forward_backward(model, src, tgt_in, tgt_out)
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    for n, g in grads.items():
        if not bool((g != 0).any()):
            raise AssertionError(f"gradient of {n} is all zero: the fixture would not exercise it")
    losses = adam_losses(cfg, params, src, tgt_in, tgt_out)
    if abs(losses[0].item() - loss.item()) > 1e-12:
        raise AssertionError("the first Adam-step loss differs from the reference loss")
    deviation = float32_deviation(cfg, params, src, tgt_in, tgt_out, logits, loss, grads, losses)

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config_json(cfg), f, indent=2)
        f.write("\n")
    model_meta = {"format": "pt", "seed": SEED, "torch_version": torch.__version__}
    write_safetensors(os.path.join(out_dir, "model.safetensors"), params, model_meta)

    reference = {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out, "logits": logits.float(),
                 "loss": loss.float()}
    reference.update({f"grad.{n}": g.float() for n, g in grads.items()})
    reference["adam_losses"] = losses.float()
    reference_meta = {
        "computed_in": "float64 (model.double() on the F32 initial parameters); stored as F32",
        "label_smoothing": cfg["label_smoothing"], "loss": "mean over non-pad targets",
        "optimizer": "torch.optim.Adam(betas=(0.9, 0.98), eps=1e-9, weight_decay=0)",
        "warmup": WARMUP, "lr_formula": LR_FORMULA, "adam_steps": ADAM_STEPS,
        "adam_losses": "loss before update s for s = 1..5, then the loss after update 5",
        "seed": SEED, "torch_version": torch.__version__,
    }
    write_safetensors(os.path.join(out_dir, "reference.safetensors"), reference, reference_meta)
    self_check(out_dir, params, reference)
    return cfg, reference, deviation


def self_check(out_dir, params, reference):
    """Re-reads the written files: bytes must round-trip, and the stored F32 parameters must reproduce the
    stored loss in float64."""
    with open(os.path.join(out_dir, "config.json")) as f:
        cfg = make_config(json.load(f))
    for file_name, written in (("model.safetensors", params), ("reference.safetensors", reference)):
        tensors, _ = read_safetensors(os.path.join(out_dir, file_name))
        if list(tensors) != list(written):
            raise AssertionError(f"{file_name}: tensor names or order differ after re-reading")
        for name, t in written.items():
            if tensors[name].dtype != t.dtype or not torch.equal(tensors[name], t):
                raise AssertionError(f"{file_name}: tensor {name} differs after re-reading")
    stored, _ = read_safetensors(os.path.join(out_dir, "model.safetensors"))
    ref, _ = read_safetensors(os.path.join(out_dir, "reference.safetensors"))
    model = Transformer(cfg, init=False).double()
    load_params(model, stored)
    _, loss = forward_backward(model, ref["src"], ref["tgt_in"], ref["tgt_out"])
    if np.float32(loss.item()) != ref["loss"].item():
        raise AssertionError("reloaded parameters do not reproduce the stored loss")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="output directory (default tests/fixtures/tiny, or "
                        "tests/fixtures/variants/NAME with --variant)")
    parser.add_argument("--variant", choices=sorted(VARIANTS) + ["all"],
                        help="a variant group's fixture instead of the tiny base model's")
    args = parser.parse_args()
    if args.variant is None:
        jobs = [(args.out or os.path.join(root, "tests", "fixtures", "tiny"), TINY_CONFIG)]
    else:
        if args.variant == "all" and args.out:
            parser.error("--out takes one group, not all")
        names = sorted(VARIANTS) if args.variant == "all" else [args.variant]
        jobs = [(args.out or os.path.join(root, "tests", "fixtures", "variants", name),
                 make_config({**_SMALL, **VARIANTS[name]})) for name in names]
    for out, config in jobs:
        cfg, reference, deviation = build(out, config)
        print(f"wrote {out}: S={reference['src'].shape[1]} T={reference['tgt_in'].shape[1]} "
              f"V={cfg['vocab_size']} loss={reference['loss'].item():.6f}")
        print("adam_losses:", " ".join(f"{x:.6f}" for x in reference["adam_losses"].tolist()))
        print("float32 PyTorch vs float64 reference:", json.dumps(deviation))


if __name__ == "__main__":
    main()
