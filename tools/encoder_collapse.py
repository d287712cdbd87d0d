#!/usr/bin/python3
"""Whether a Transformer's encoder still reads its input (docs/PARSING.md, "Why pre-norm").

  /usr/bin/python3 tools/encoder_collapse.py MODEL_DIR [MODEL_DIR ...]
  /usr/bin/python3 tools/encoder_collapse.py --train-pytorch RUN_DIR [--steps 450] [--norm post]

The first form loads each model directory (a checkpoint of `tfm train`) into the PyTorch reference model
(tools/reference_model.py) and prints, for one sentence, the spread across positions of the embedding sums
and of each encoder layer's output (the mean over features of the standard deviation over positions), and
how far the encoder's first output vector moves between two different sentences. A collapsed encoder gives
the same vector at every position of every sentence: both numbers near 0.

The second form trains the PyTorch reference model itself with RUN_DIR's recipe (its config.json from the
first checkpoint, its vocab.model, and the parser data of scripts/parse_ptb.sh in RUN_DIR/data) with Adam
(0.9, 0.98, 1e-9), the paper's schedule (warmup 1000), label smoothing, batches of 4096 padded tokens and
one thread, and prints the same two numbers every 50 updates: does the collapse happen without tfm? --norm
overrides the run's norm placement (the sample recipe's runs are pre-norm; `--norm post` is the paper's).
Needs python3-torch, python3-numpy and python3-sentencepiece (Debian).
"""

import argparse
import json
import os
import random
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_model as rm  # noqa: E402

# Token ids of two unlike sentences (any ids past the special ones will do).
SENTENCES = ([5, 9, 10, 11, 12, 13, 14, 100, 200, 300, 3], [100, 200, 300, 3])


def load_model(model_dir):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg.pop("task", None)
    model = rm.Transformer(cfg, init=False)
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        data = f.read()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    state = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = (8 + size + offset for offset in entry["data_offsets"])
        state[name] = torch.from_numpy(np.frombuffer(data[begin:end], dtype=np.float32).reshape(entry["shape"]).copy())
    model.load_state_dict(state, strict=True)
    return model.eval()


def spread(x):
    """Mean over features of the standard deviation over positions of [1, T, d]."""
    return x.std(dim=1).mean().item()


@torch.no_grad()
def layer_spreads(model):
    cfg = model.cfg
    src = torch.tensor([SENTENCES[0]])
    x = model.embedding(src) * cfg["d_model"] ** 0.5
    x = x + rm.sinusoidal_encoding(src.shape[1], cfg["d_model"], torch.float32)
    spreads = [spread(x)]
    model.eval()
    outputs = [model.encoder(model.embedding, torch.tensor([s]), None) for s in SENTENCES]
    # The layers one by one (as Encoder.forward, without its final pre-norm LayerNorm).
    for layer in model.encoder.layers:
        x = layer(x, None)
        spreads.append(spread(x))
    between = (outputs[0][0, 0] - outputs[1][0, 0]).norm().item()
    return spreads, spread(outputs[0]), between


def report(model_dir):
    spreads, final, between = layer_spreads(load_model(model_dir))
    layers = ", ".join(f"{s:.3g}" for s in spreads[1:])
    print(f"{model_dir}: spread across positions: embedding {spreads[0]:.3g}, layers {layers}; "
          f"encoder output {final:.3g}; first vector moves {between:.3g} between two sentences")


def train_pytorch(run_dir, steps, norm):
    import sentencepiece

    torch.set_num_threads(1)
    torch.manual_seed(1)
    random.seed(1)
    checkpoints = sorted(os.listdir(os.path.join(run_dir, "checkpoints")))
    with open(os.path.join(run_dir, "checkpoints", checkpoints[0], "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg.pop("task", None)
    if norm:
        cfg["norm"] = norm
    vocab = sentencepiece.SentencePieceProcessor(model_file=os.path.join(run_dir, "vocab.model"))
    with open(os.path.join(run_dir, "data", "train.words"), encoding="utf-8") as f:
        src = [vocab.encode(line.strip()) + [cfg.get("eos_id", 3)] for line in f]
    with open(os.path.join(run_dir, "data", "train.sequences"), encoding="utf-8") as f:
        tgt = [vocab.encode(line.strip()) for line in f]
    model = rm.Transformer(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    # Length-sorted batches of at most 4096 padded source + target tokens, shuffled each pass.
    batches, batch, longest_src, longest_tgt = [], [], 0, 0
    for i in sorted(range(len(src)), key=lambda i: (len(tgt[i]), len(src[i]))):
        s, t = len(src[i]), len(tgt[i]) + 1
        if batch and (max(longest_src, s) + max(longest_tgt, t)) * (len(batch) + 1) > 4096:
            batches.append(batch)
            batch, longest_src, longest_tgt = [], 0, 0
        batch.append(i)
        longest_src, longest_tgt = max(longest_src, s), max(longest_tgt, t)
    batches.append(batch)

    def pad(rows):
        width = max(map(len, rows))
        return torch.tensor([row + [cfg.get("pad_id", 0)] * (width - len(row)) for row in rows])

    step = 0
    while step < steps:
        random.shuffle(batches)
        for batch in batches:
            step += 1
            for group in optimizer.param_groups:
                group["lr"] = rm.learning_rate(step, cfg["d_model"], 1000)
            model.train()
            logits = model(pad([src[i] for i in batch]), pad([[cfg.get("bos_id", 2)] + tgt[i] for i in batch]))
            loss = model.loss(logits, pad([tgt[i] + [cfg.get("eos_id", 3)] for i in batch]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 50 == 0:
                _, final, between = layer_spreads(model)
                print(f"update {step}: loss {loss.item():.3f}, encoder output spread {final:.3g}, "
                      f"first vector moves {between:.3g} between two sentences", flush=True)
            if step >= steps:
                break


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", help="model directories to inspect")
    parser.add_argument("--train-pytorch", metavar="RUN_DIR", help="train the reference model on RUN_DIR's data")
    parser.add_argument("--steps", type=int, default=450, help="updates of --train-pytorch (default 450)")
    parser.add_argument("--norm", choices=("post", "pre"), help="--train-pytorch with this norm placement")
    args = parser.parse_args()
    if args.train_pytorch:
        train_pytorch(args.train_pytorch, args.steps, args.norm)
    for model_dir in args.models:
        report(model_dir)
    if not args.train_pytorch and not args.models:
        parser.error("give model directories, or --train-pytorch RUN_DIR")


if __name__ == "__main__":
    main()
