#!/usr/bin/python3
"""PyTorch side of the training-step benchmark: forward + backward + Adam step of the reference model.

  /usr/bin/python3 bench/train_step_pytorch.py [--preset base | --config config.json] [--vocab V]
      [--dropout P] [--batch 128] [--src-len 32] [--tgt-len 32] [--steps 3] [--warmup 2]
      [--threads 2] [--modes f32,bf16]

--config reads a model config.json (docs/MODEL_FORMAT.md; e.g. a training run's checkpoint's) instead
of a preset; the vocabulary size is the file's unless --vocab is given (a preset's default vocabulary is
37000), and the dropout the preset's or the file's unless --dropout is given.

The batch has no padding (random word ids, fixed seed). Modes: f32, and bf16 = torch.autocast('cpu',
dtype=torch.bfloat16) around forward and loss (parameters, gradients and Adam state stay f32). --warmup
warm-up steps (2, as tfm's bench_train_step), then --steps timed steps. Prints one JSON line per mode with
the same fields as tfm's bench_train_step. With several modes each runs in its own process so that
peak_rss_mb is that mode's.
Run it through bench/train_step.sh for PyTorch's best settings (tcmalloc, OMP_WAIT_POLICY=PASSIVE).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from reference_model import (  # noqa: E402
    Transformer, learning_rate, make_config, make_optimizer, preset_config)

MODES = ("f32", "bf16")
WARMUP_STEPS = 4000  # the paper's schedule; only sets the lr values, not the cost


def add_model_arguments(parser):
    """--preset | --config, --vocab, --dropout: the model, as model_config() reads them."""
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--preset", default="base")
    model.add_argument("--config", help="model config.json instead of a preset")
    parser.add_argument("--vocab", type=int, default=None,
                        help="vocabulary size (default: 37000 with a preset, the file's with --config)")
    parser.add_argument("--dropout", type=float, default=None,
                        help="dropout (default: the preset's or the config file's)")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="PyTorch training-step benchmark")
    add_model_arguments(parser)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--src-len", type=int, default=32)
    parser.add_argument("--tgt-len", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed steps first (allocator pools, oneDNN primitive caches, Adam state)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--modes", default="f32,bf16", help="comma-separated: f32, bf16")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in args.modes if m not in MODES]
    if bad or not args.modes:
        parser.error(f"--modes: unknown {bad}; choose from {', '.join(MODES)}")
    if args.steps < 1 or args.batch < 1 or args.src_len < 1 or args.tgt_len < 1:
        parser.error("--steps, --batch, --src-len and --tgt-len must be positive")
    if args.warmup < 0:
        parser.error("--warmup must not be negative")
    try:
        args.model_config = model_config(args)
    except (OSError, ValueError) as error:  # json.JSONDecodeError is a ValueError
        parser.error(str(error))
    if max(args.src_len, args.tgt_len) > args.model_config["max_positions"]:
        parser.error("--src-len/--tgt-len exceed the model's max_positions "
                     f"({args.model_config['max_positions']})")
    return args


def model_config(args):
    """The reference model's config dict from --preset or --config, with --vocab and --dropout applied."""
    overrides = {}
    if args.dropout is not None:
        overrides["dropout"] = args.dropout
    if args.config is None:
        overrides["vocab_size"] = 37000 if args.vocab is None else args.vocab
        return preset_config(args.preset, **overrides)
    with open(args.config, encoding="utf-8") as f:
        values = json.load(f)
    if not isinstance(values, dict):
        raise ValueError(f"{args.config}: expected a JSON object")
    if args.vocab is not None:
        overrides["vocab_size"] = args.vocab
    values.update(overrides)
    try:
        return make_config(values)
    except ValueError as error:
        raise ValueError(f"{args.config}: {error}") from None


def run_mode(args, mode):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = args.model_config
    model = Transformer(cfg)
    model.train()
    optimizer = make_optimizer(model)
    # Word ids only (>= 4), so no pad anywhere: every position is a real token.
    src = torch.randint(4, cfg["vocab_size"], (args.batch, args.src_len))
    tgt_in = torch.randint(4, cfg["vocab_size"], (args.batch, args.tgt_len))
    tgt_out = torch.randint(4, cfg["vocab_size"], (args.batch, args.tgt_len))

    def step(number):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            logits = model(src, tgt_in)
            loss = model.loss(logits, tgt_out)
        loss.backward()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(number, cfg["d_model"], WARMUP_STEPS)
        optimizer.step()
        return loss.item()

    # Warm-up, as many steps as tfm's bench_train_step: allocator pools, oneDNN primitive caches,
    # Adam state.
    for i in range(args.warmup):
        step(1 + i)
    start = time.perf_counter()
    for i in range(args.steps):
        loss = step(1 + args.warmup + i)
    seconds = (time.perf_counter() - start) / args.steps
    src_tokens = args.batch * args.src_len
    tgt_tokens = args.batch * args.tgt_len
    return {
        "framework": "pytorch", "mode": mode, "precision": mode,
        "preset": "" if args.config else args.preset,
        "config": args.config or "", "vocab": cfg["vocab_size"], "batch": args.batch,
        "src_len": args.src_len, "tgt_len": args.tgt_len, "threads": args.threads,
        "steps": args.steps, "warmup": args.warmup, "seconds_per_step": seconds,
        "tokens_per_second": (src_tokens + tgt_tokens) / seconds,
        "target_tokens_per_second": tgt_tokens / seconds,
        # ru_maxrss is in KiB on Linux.
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "loss": loss, "torch_version": torch.__version__,
    }



def main():
    args = parse_args()
    if len(args.modes) == 1:
        print(json.dumps(run_mode(args, args.modes[0])), flush=True)
        return
    # One process per mode: peak RSS is per process, and the modes must not share allocator state.
    argv = [a for a in sys.argv[1:]]
    if "--modes" in argv:
        i = argv.index("--modes")
        del argv[i:i + 2]
    argv = [a for a in argv if not a.startswith("--modes=")]
    for mode in args.modes:
        result = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--modes", mode])
        if result.returncode != 0:
            sys.exit(result.returncode)


if __name__ == "__main__":
    main()
