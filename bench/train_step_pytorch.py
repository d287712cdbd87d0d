#!/usr/bin/python3
"""PyTorch side of the training-step benchmark: forward + backward + Adam step of the reference model.

  /usr/bin/python3 bench/train_step_pytorch.py [--preset base | --config config.json] [--vocab V]
      [--dropout P] [--batch 128 | --tokens N] [--src-len 32] [--tgt-len 32] [--steps 3] [--warmup 2]
      [--threads 2] [--modes f32,bf16]
      [--device cpu | cuda] [--compile] [--attention sdpa | matmul] [--no-fused-adam] [--peak-tflops P]

  e.g. on a GPU, the paper's batch of ~25000 + 25000 tokens (782 rows of 32 + 32):
  python3 bench/train_step_pytorch.py --device cuda --preset big --tokens 25000 --steps 10 --warmup 3 \
      --compile --peak-tflops 790

--config reads a model config.json (docs/MODEL_FORMAT.md; e.g. a training run's checkpoint's) instead
of a preset; the vocabulary size is the file's unless --vocab is given (a preset's default vocabulary is
37000), and the dropout the preset's or the file's unless --dropout is given.

The batch has no padding (random word ids, fixed seed). Modes: f32, and bf16 = torch.autocast('cpu',
dtype=torch.bfloat16) around forward and loss (parameters, gradients and Adam state stay f32). --warmup
warm-up steps (2, as tfm's bench_train_step), then --steps timed steps. Prints one JSON line per mode with
the same fields as tfm's bench_train_step. With several modes each runs in its own process so that
peak_rss_mb is that mode's.
Run it through bench/train_step.sh for PyTorch's best settings (tcmalloc, OMP_WAIT_POLICY=PASSIVE).

--tokens N sets the batch to ceil(N / src_len) rows of src_len source and tgt_len target tokens: with the
default lengths 32 + 32, --tokens 25000 is 782 rows, 25024 source + 25024 target tokens (the paper's
"approximately 25000 source tokens and 25000 target tokens", without padding).

--device cuda (bench/gpu.sh runs it) uses PyTorch's best settings for a GPU: modes default to bf16 =
torch.autocast('cuda', dtype=torch.bfloat16) (f32 master weights, gradients and Adam state, as tfm);
attention through torch.nn.functional.scaled_dot_product_attention (the flash kernel: the batch has no
padding, so the model runs without a source mask: reference_model's padded=False, same math); Adam with
fused=True (one kernel for all parameters); --compile: torch.compile of forward + loss (if compiling fails
the run goes on eagerly and the row's "compile" says why). f32 on CUDA is strict f32 (TF32 off, PyTorch's
default). Each timed step is bracketed by CUDA events (no host synchronisation inside a step: the loss is
read after the last one); seconds_per_step is the wall time of the timed steps between two
torch.cuda.synchronize() over their number, and min/max come from the events. Extra fields on CUDA:
step time min/max, peak_gpu_mb (torch.cuda.max_memory_allocated over the whole run: weights, Adam state,
activations), flops_per_step (bench/model_flops.py), model_tflops_per_second, and mfu against
--peak-tflops (bench/matmul_peak.py's measured bf16 rate).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from model_flops import train_flops_per_step  # noqa: E402
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
    batch = parser.add_mutually_exclusive_group()
    batch.add_argument("--batch", type=int, default=None, help="sentence pairs per batch (default 128)")
    batch.add_argument("--tokens", type=int, default=None,
                       help="batch of ceil(TOKENS / src-len) rows instead of --batch")
    parser.add_argument("--src-len", type=int, default=32)
    parser.add_argument("--tgt-len", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed steps first (allocator pools, oneDNN primitive caches, Adam state)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--modes", default=None,
                        help="comma-separated: f32, bf16 (default: f32,bf16 on cpu, bf16 on cuda)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile forward + loss (falls back to eager if it fails)")
    parser.add_argument("--compile-mode", default="default",
                        help="torch.compile's mode (default, reduce-overhead, max-autotune, ...)")
    parser.add_argument("--attention", choices=("sdpa", "matmul"), default=None,
                        help="sdpa: scaled_dot_product_attention (default on cuda); matmul: written out "
                             "(default on cpu)")
    parser.add_argument("--no-fused-adam", action="store_true",
                        help="on cuda: torch.optim.Adam's default implementation instead of fused=True")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the GPU's measured bf16 matrix rate, for mfu (bench/matmul_peak.py)")
    args = parser.parse_args(argv)
    if args.modes is None:
        args.modes = "bf16" if args.device == "cuda" else "f32,bf16"
    if args.attention is None:
        args.attention = "sdpa" if args.device == "cuda" else "matmul"
    if args.tokens is not None:
        if args.tokens < 1 or args.src_len < 1:
            parser.error("--tokens and --src-len must be positive")
        args.batch = -(-args.tokens // args.src_len)
    elif args.batch is None:
        args.batch = 128
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
    if args.device == "cuda":
        return run_mode_cuda(args, mode)
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


def run_mode_cuda(args, mode):
    """One mode on the GPU with PyTorch's best settings (the module's docstring); returns the JSON row."""
    if not torch.cuda.is_available():
        raise SystemExit("train_step_pytorch.py: --device cuda but torch.cuda.is_available() is False")
    device = torch.device("cuda")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.cuda.reset_peak_memory_stats()
    cfg = args.model_config
    # Built on the CPU and moved: the same initial weights as the CPU run of the same seed.
    model = Transformer(cfg).to(device)
    model.set_attention(args.attention)
    model.train()
    fused = not args.no_fused_adam
    optimizer = make_optimizer(model, **({"fused": True} if fused else {}))
    src = torch.randint(4, cfg["vocab_size"], (args.batch, args.src_len)).to(device)
    tgt_in = torch.randint(4, cfg["vocab_size"], (args.batch, args.tgt_len)).to(device)
    tgt_out = torch.randint(4, cfg["vocab_size"], (args.batch, args.tgt_len)).to(device)
    bf16 = mode == "bf16"

    def forward_loss(src, tgt_in, tgt_out):
        # Word ids only (>= 4): no pad, so no source mask (padded=False) and flash attention can run.
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = model(src, tgt_in, padded=False)
            return model.loss(logits, tgt_out)

    compiled = "off"
    loss_fn = forward_loss
    if args.compile:
        if not hasattr(torch, "compile"):
            compiled = f"failed: torch {torch.__version__} has no torch.compile"
        else:
            loss_fn = torch.compile(forward_loss, mode=None if args.compile_mode == "default"
                                    else args.compile_mode)
            compiled = "on" if args.compile_mode == "default" else f"on ({args.compile_mode})"

    def step(number):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(src, tgt_in, tgt_out)
        loss.backward()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(number, cfg["d_model"], WARMUP_STEPS)
        optimizer.step()
        return loss

    # The first step compiles (with --compile): timed on its own, and where a failure shows.
    first_step_seconds = None
    for i in range(args.warmup):
        start = time.perf_counter()
        try:
            step(1 + i)
            torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 - any compiler failure: go on eagerly, say why
            if loss_fn is forward_loss:
                raise
            message = str(error).strip()
            reason = f"{type(error).__name__}: {message.splitlines()[0] if message else ''}"
            print(f"train_step_pytorch.py: torch.compile failed, running eagerly: {reason}",
                  file=sys.stderr, flush=True)
            compiled = f"failed: {reason[:300]}"
            loss_fn = forward_loss
            step(1 + i)
            torch.cuda.synchronize()
        if i == 0:
            first_step_seconds = time.perf_counter() - start
    if args.compile and args.warmup == 0:
        print("train_step_pytorch.py: --compile with --warmup 0: compiling is inside the timed steps",
              file=sys.stderr, flush=True)

    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(args.steps)]
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(args.steps):
        events[i][0].record()
        loss = step(1 + args.warmup + i)
        events[i][1].record()
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.steps
    step_seconds = [a.elapsed_time(b) / 1000.0 for a, b in events]
    src_tokens = args.batch * args.src_len
    tgt_tokens = args.batch * args.tgt_len
    flops = train_flops_per_step(cfg, args.batch, args.src_len, args.tgt_len)
    mib = 1024.0 * 1024.0
    row = {
        "framework": "pytorch", "mode": mode, "precision": mode, "device": "cuda",
        "gpu": torch.cuda.get_device_name(device),
        "preset": "" if args.config else args.preset,
        "config": args.config or "", "model": cfg, "vocab": cfg["vocab_size"], "batch": args.batch,
        "src_len": args.src_len, "tgt_len": args.tgt_len,
        "src_tokens": src_tokens, "tgt_tokens": tgt_tokens, "threads": args.threads,
        "steps": args.steps, "warmup": args.warmup,
        "attention": args.attention, "fused_adam": fused, "compile": compiled,
        "first_step_seconds": round(first_step_seconds, 3) if first_step_seconds else None,
        "seconds_per_step": round(seconds, 5),
        "min_seconds_per_step": round(min(step_seconds), 5),
        "max_seconds_per_step": round(max(step_seconds), 5),
        "tokens_per_second": round((src_tokens + tgt_tokens) / seconds, 1),
        "target_tokens_per_second": round(tgt_tokens / seconds, 1),
        "peak_gpu_mb": round(torch.cuda.max_memory_allocated(device) / mib, 1),
        "peak_gpu_reserved_mb": round(torch.cuda.max_memory_reserved(device) / mib, 1),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "flops_per_step": flops,
        "model_tflops_per_second": round(flops / seconds / 1e12, 2),
        "peak_tflops": args.peak_tflops,
        "mfu": round(flops / seconds / (args.peak_tflops * 1e12), 4) if args.peak_tflops else None,
        "loss": loss.item(), "torch_version": torch.__version__,
    }
    return row



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
