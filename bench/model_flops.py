#!/usr/bin/python3
"""Model FLOPs of one training step of the Transformer, and the utilisation (MFU) they give: one formula
for tfm and PyTorch, which both sides' table scripts (bench/gpu_table.py) call.

  python3 bench/model_flops.py [--preset base | --config config.json] [--vocab V] --batch B
      --src-len S --tgt-len T [--seconds-per-step X --peak-tflops P]

Counted: the multiply-adds of the matrix products, 2 FLOPs each; a backward costs twice its forward
(the gradients of the inputs and of the weights), so a step is 3 x forward. This is the usual
"6 x parameters in products x tokens" plus the attention products; everything else (LayerNorm, softmax,
dropout, Adam, the embedding lookup) is left out, and so is what an implementation recomputes (flash
attention's backward recomputes the scores): model FLOPs, not the hardware's.

With d = d_model, f = d_ff, h = heads, k = d_k, v = d_v, V = vocab_size, N = layers, a batch of B rows of
S source and T target tokens:

  W_att  = d h (2 k + 2 v)       weights of one attention's Q, K, V, O projections
  W_ffn  = 2 d f                 weights of one feed-forward block
  encoder, per layer:  2 B S (W_att + W_ffn)               projections + FFN on the source tokens
                       + 2 B h S^2 (k + v)                 Q K^T and P V, every key visible
  decoder, per layer:  2 B T (W_att + W_ffn)               self-attention projections + FFN
                       + 2 B h (k + v) T (T + 1) / 2       causal Q K^T and P V: query i sees i + 1 keys
                       + 2 B T d h (k + v)                 cross-attention Q and O on the target tokens
                       + 2 B S d h (k + v)                 cross-attention K and V on the source (memory)
                       + 2 B h S T (k + v)                 cross-attention Q K^T and P V
  output projection:   2 B T d V                           logits = y E^T (E shared with the embeddings)

  forward = N (encoder layer + decoder layer) + output projection;  step = 3 x forward

(Biases add no products.) The causal self-attention counts only the visible half (T (T + 1) / 2 query-key
pairs), the work a kernel that skips masked blocks does; counting the full T^2, as some papers do, would add
under 0.5% for base at T = 32. MFU = step FLOPs / seconds per step / peak, with the peak the GPU's measured
bf16 matrix rate (bench/matmul_peak.py), not the data sheet's.
"""

import argparse
import json


def train_flops_per_step(cfg, batch, src_len, tgt_len):
    """Model FLOPs of forward + backward of one step (see the module's docstring); cfg: config.json's keys."""
    return 3 * forward_flops(cfg, batch, src_len, tgt_len)


def forward_flops(cfg, batch, src_len, tgt_len):
    d, f, h = cfg["d_model"], cfg["d_ff"], cfg["heads"]
    k, v, vocab, layers = cfg["d_k"], cfg["d_v"], cfg["vocab_size"], cfg["layers"]
    b, s, t = batch, src_len, tgt_len
    w_att = d * h * (2 * k + 2 * v)
    w_ffn = 2 * d * f
    encoder = 2 * b * s * (w_att + w_ffn) + 2 * b * h * s * s * (k + v)
    decoder = (2 * b * t * (w_att + w_ffn)
               + b * h * (k + v) * t * (t + 1)  # 2 x T (T + 1) / 2
               + 2 * b * t * d * h * (k + v)
               + 2 * b * s * d * h * (k + v)
               + 2 * b * h * s * t * (k + v))
    output = 2 * b * t * d * vocab
    return layers * (encoder + decoder) + output


def mfu(flops_per_step, seconds_per_step, peak_tflops):
    """Share of the peak (a fraction, not %) that the model FLOPs reach; None without a peak."""
    if not peak_tflops or not seconds_per_step:
        return None
    return flops_per_step / seconds_per_step / (peak_tflops * 1e12)


def config_of_row(row):
    """The model config (config.json's keys) of a benchmark's JSON row: its "model" object (tfm's
    bench_train_step and bench/train_step_pytorch.py write one), else its preset and vocab (needs torch,
    for tools/reference_model.py's presets)."""
    if isinstance(row.get("model"), dict):
        cfg = dict(row["model"])
    else:
        import os
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                        "tools"))
        from reference_model import preset_config  # noqa: E402
        cfg = preset_config(row.get("preset") or "base")
    if row.get("vocab"):
        cfg["vocab_size"] = row["vocab"]
    return cfg


def flops_of_row(row):
    """train_flops_per_step of a training benchmark's JSON row (batch, src_len, tgt_len, model/preset)."""
    return train_flops_per_step(config_of_row(row), row["batch"], row["src_len"], row["tgt_len"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--preset", default="base")
    model.add_argument("--config", help="model config.json instead of a preset")
    parser.add_argument("--vocab", type=int, default=None, help="default: 37000 with a preset")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--src-len", type=int, required=True)
    parser.add_argument("--tgt-len", type=int, required=True)
    parser.add_argument("--seconds-per-step", type=float)
    parser.add_argument("--peak-tflops", type=float)
    args = parser.parse_args()
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            row = {"model": json.load(f), "vocab": args.vocab}
    else:
        row = {"preset": args.preset, "vocab": args.vocab or 37000}
    cfg = config_of_row(row)
    flops = train_flops_per_step(cfg, args.batch, args.src_len, args.tgt_len)
    out = {"flops_per_step": flops, "tflop_per_step": round(flops / 1e12, 4)}
    if args.seconds_per_step:
        out["model_tflops_per_second"] = round(flops / args.seconds_per_step / 1e12, 2)
        value = mfu(flops, args.seconds_per_step, args.peak_tflops)
        if value is not None:
            out["mfu"] = round(value, 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
