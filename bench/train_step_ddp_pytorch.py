#!/usr/bin/python3
"""PyTorch DistributedDataParallel (gloo) training-step benchmark, the counterpart of tfm's bench_train_dist.

  /usr/bin/python3 bench/train_step_ddp_pytorch.py [--preset base | --config config.json] [--vocab V]
      [--dropout P] [--batch 128] [--src-len 32] [--tgt-len 32] [--steps 3] [--warmup 2]
      [--ranks 2] [--threads 1] [--bucket-cap-mb 25] [--precision f32] [--allreduce-reps 5]
      [--no-hook]

Starts --ranks processes (torch.multiprocessing spawn; MASTER_ADDR 127.0.0.1, a free port; gloo over the
loopback device unless GLOO_SOCKET_IFNAME says otherwise), each on --threads threads
(torch.set_num_threads and OMP_NUM_THREADS), with the reference model (tools/reference_model.py) wrapped
in DistributedDataParallel. Every rank trains on its own batch of the shape of bench/train_step_pytorch.py
(--batch pairs per rank, random word ids, seed --seed + rank, no padding): forward + backward + Adam step,
--warmup untimed steps (the first also lets DDP rebuild its buckets), then --steps timed ones. The model
options are bench/train_step_pytorch.py's.

The all-reduce, three ways:
  allreduce_bytes         the bytes reduced per update: the sum of the gradients' sizes (f32).
  allreduce_standalone_s  after training, one all_reduce of a flat f32 buffer of that size, alone on the
                          machine (mean of --allreduce-reps after one untimed, slowest rank);
                          allreduce_gbps = bytes / s and allreduce_busbw_gbps = 2 (n-1)/n bytes / s.
  allreduce_exposed_s     the part of the reduction the backward did not hide. Measured with a DDP
                          communication hook that wraps the default allreduce_hook (same reduction,
                          same result) and notes, on one clock (CLOCK_MONOTONIC, shared by the ranks),
                          when each bucket is ready (its gradients computed) and when its all-reduce
                          completes. Per step: the latest completion over ranks and buckets minus the
                          latest "last bucket ready" over ranks (the end of the job's backward
                          computation); the mean over the timed steps. Chosen over comparing step times
                          with and without no_sync() because it needs no second run and the difference of
                          two noisy step times is a small number; --no-hook runs DDP's built-in reduction
                          instead (no all-reduce timing then) to check that the hook costs nothing.
  hidden_fraction         1 - exposed / standalone: the share of the all-reduce hidden behind the backward
                          (below 0 when the reduction beside the backward is slower than alone).
Also allreduce_wait_s (per rank, its own last bucket ready to its reduction's end, mean over steps; the
slowest rank: includes waiting for the other ranks' backward), allreduce_span_s (first bucket ready to
the last completion), allreduce_buckets.

Prints one JSON line (rank 0): bench_train_step's fields (framework "pytorch-ddp", mode, precision, preset,
config, model, vocab, batch = per rank, src_len, tgt_len, steps, warmup, threads = ranks x threads_per_rank,
seconds_per_step = the slowest rank's mean, tokens_per_second = all ranks' source + target tokens per
second, target_tokens_per_second, forward_s, backward_s (loss.backward(), which in DDP ends with the wait
for the reduction), update_s, peak_rss_mb (the largest rank's), loss (mean over ranks)), plus ranks,
threads_per_rank, bucket_cap_mb and the all-reduce fields above. Run it through bench/distributed.sh for
PyTorch's best settings (tcmalloc and OpenBLAS preloaded, OMP_WAIT_POLICY=PASSIVE).
"""

import argparse
import json
import os
import resource
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from reference_model import Transformer, learning_rate, make_optimizer  # noqa: E402
from train_step_pytorch import WARMUP_STEPS, add_model_arguments, model_config  # noqa: E402

clock = time.perf_counter  # CLOCK_MONOTONIC on Linux: one clock for every process of the machine


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="PyTorch DDP (gloo) training-step benchmark")
    add_model_arguments(parser)
    parser.add_argument("--batch", type=int, default=128, help="sentence pairs per rank")
    parser.add_argument("--src-len", type=int, default=32)
    parser.add_argument("--tgt-len", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--ranks", type=int, default=2, help="processes")
    parser.add_argument("--threads", type=int, default=1, help="threads per rank")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    parser.add_argument("--precision", choices=("f32", "bf16"), default="f32",
                        help="bf16: torch.autocast around forward and loss")
    parser.add_argument("--allreduce-reps", type=int, default=5,
                        help="timed repetitions of the standalone all-reduce")
    parser.add_argument("--no-hook", action="store_true",
                        help="DDP's built-in reduction, without the timing hook (no exposed time)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if min(args.steps, args.batch, args.src_len, args.tgt_len, args.ranks, args.threads,
           args.allreduce_reps) < 1:
        parser.error("--steps, --batch, --src-len, --tgt-len, --ranks, --threads and --allreduce-reps "
                     "must be positive")
    if args.warmup < 0 or args.bucket_cap_mb <= 0:
        parser.error("--warmup must not be negative and --bucket-cap-mb must be positive")
    try:
        args.model_config = model_config(args)
    except (OSError, ValueError) as error:
        parser.error(str(error))
    if max(args.src_len, args.tgt_len) > args.model_config["max_positions"]:
        parser.error("--src-len/--tgt-len exceed the model's max_positions "
                     f"({args.model_config['max_positions']})")
    return args


class BucketTimes:
    """The timing hook's state: per bucket index, when it was ready and when its all-reduce completed."""

    def __init__(self):
        self.ready, self.done = {}, {}

    def reset(self):
        self.ready, self.done = {}, {}


def timed_allreduce_hook(state, bucket):
    """DDP's default allreduce_hook, noting when the bucket is ready and when its reduction completes."""
    index = bucket.index()
    state.ready[index] = clock()

    def completed(fut):
        state.done[index] = clock()
        return fut.value()

    return default_hooks.allreduce_hook(None, bucket).then(completed)


def standalone_allreduce(nbytes, reps):
    """Seconds of one all_reduce of a flat f32 buffer of nbytes on this rank (mean of reps)."""
    buffer = torch.ones(nbytes // 4, dtype=torch.float32)
    dist.all_reduce(buffer)  # connections, pages of the buffer
    dist.barrier()
    start = clock()
    for _ in range(reps):
        dist.all_reduce(buffer)
    return (clock() - start) / reps


def worker(rank, args):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    cfg = args.model_config
    torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = Transformer(cfg)
    model.train()
    ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
    times = BucketTimes()
    if not args.no_hook:
        ddp.register_comm_hook(times, timed_allreduce_hook)
    optimizer = make_optimizer(model)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)

    # Each rank its own data and dropout masks. Word ids only (>= 4): no pad anywhere.
    torch.manual_seed(args.seed + 1000 * (rank + 1))
    src = torch.randint(4, cfg["vocab_size"], (args.batch, args.src_len))
    tgt_in = torch.randint(4, cfg["vocab_size"], (args.batch, args.tgt_len))
    tgt_out = torch.randint(4, cfg["vocab_size"], (args.batch, args.tgt_len))

    def step(number):
        times.reset()
        optimizer.zero_grad(set_to_none=True)
        t0 = clock()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model.loss(ddp(src, tgt_in), tgt_out)
        t1 = clock()
        loss.backward()  # DDP: reduces bucket by bucket during it, and waits for the reduction at its end
        t2 = clock()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(number, cfg["d_model"], WARMUP_STEPS)
        optimizer.step()
        t3 = clock()
        buckets = {}
        if times.ready:
            buckets = {"first_ready": min(times.ready.values()), "last_ready": max(times.ready.values()),
                       "done": max(times.done.values()), "count": len(times.ready)}
        return {"forward": t1 - t0, "backward": t2 - t1, "update": t3 - t2, "step": t3 - t0,
                "loss": loss.item(), **buckets}

    for i in range(args.warmup):
        step(1 + i)
    dist.barrier()
    records = [step(1 + args.warmup + i) for i in range(args.steps)]
    standalone = standalone_allreduce(nbytes, args.allreduce_reps)
    mine = {"records": records, "standalone": standalone,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    everyone = [None] * args.ranks
    dist.all_gather_object(everyone, mine)
    if rank == 0:
        print(json.dumps(summary(args, everyone, nbytes)), flush=True)
    # No teardown: destroying the Reducer (holding the GIL) joins gloo's worker threads, and one may
    # still be freeing a tensor of the Python hook (needing the GIL): a deadlock, seen in one of a few runs.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def summary(args, ranks, nbytes):
    """The JSON row from every rank's per-step records."""
    n, steps = args.ranks, args.steps

    def slowest(key):
        return max(statistics.fmean(s[key] for s in r["records"]) for r in ranks)

    seconds = slowest("step")
    src_tokens, tgt_tokens = n * args.batch * args.src_len, n * args.batch * args.tgt_len
    standalone = max(r["standalone"] for r in ranks)
    row = {
        "framework": "pytorch-ddp", "mode": args.precision, "precision": args.precision,
        "preset": "" if args.config else args.preset, "config": args.config or "",
        "model": args.model_config, "vocab": args.model_config["vocab_size"], "batch": args.batch,
        "src_len": args.src_len, "tgt_len": args.tgt_len, "threads": n * args.threads, "steps": steps,
        "warmup": args.warmup,
        "ranks": n, "threads_per_rank": args.threads, "bucket_cap_mb": args.bucket_cap_mb,
        "src_tokens": src_tokens, "tgt_tokens": tgt_tokens,
        "seconds_per_step": round(seconds, 4),
        "tokens_per_second": round((src_tokens + tgt_tokens) / seconds, 1),
        "target_tokens_per_second": round(tgt_tokens / seconds, 1),
        "forward_s": round(slowest("forward"), 4), "backward_s": round(slowest("backward"), 4),
        "update_s": round(slowest("update"), 4),
        "allreduce_bytes": nbytes,
        "allreduce_standalone_s": round(standalone, 4),
        "allreduce_gbps": round(nbytes / standalone / 1e9, 3),
        "allreduce_busbw_gbps": round(2 * (n - 1) / n * nbytes / standalone / 1e9, 3),
    }
    if not args.no_hook:
        per_step = [[r["records"][i] for r in ranks] for i in range(steps)]
        exposed = statistics.fmean(max(s["done"] for s in step) - max(s["last_ready"] for s in step)
                                   for step in per_step)
        span = statistics.fmean(max(s["done"] for s in step) - min(s["first_ready"] for s in step)
                                for step in per_step)
        row.update({
            "allreduce_buckets": ranks[0]["records"][-1]["count"],
            "allreduce_exposed_s": round(exposed, 4),
            "allreduce_wait_s": round(max(statistics.fmean(s["done"] - s["last_ready"]
                                                           for s in r["records"]) for r in ranks), 4),
            "allreduce_span_s": round(span, 4),
            "hidden_fraction": round(1.0 - exposed / standalone, 3),
        })
    row.update({
        "peak_rss_mb": round(max(r["peak_rss_mb"] for r in ranks), 1),
        "loss": round(statistics.fmean(r["records"][-1]["loss"] for r in ranks), 4),
        "torch_version": torch.__version__,
    })
    return row


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = parse_args()
    if not dist.is_available() or not dist.is_gloo_available():
        sys.exit(f"train_step_ddp_pytorch.py: this PyTorch ({torch.__version__}) has no gloo backend "
                 f"(torch.distributed.is_available() = {dist.is_available()}, "
                 f"is_gloo_available() = {dist.is_available() and dist.is_gloo_available()})")
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # the spawned interpreters' OpenMP
    mp.spawn(worker, args=(args,), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
