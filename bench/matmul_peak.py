#!/usr/bin/python3
"""The GPU's measured ceilings, the denominators of the GPU benchmarks: bf16 matrix rate and copy bandwidth.

  python3 bench/matmul_peak.py [--size 8192] [--warmup 3] [--runs 10] [--dtypes bf16]
      [--copy-mib 2048] [--device cuda]

Matrix rate: C = A B of size^3 on random normal data (zeros would flatter it: the tensor cores draw less
power on them and hold higher clocks), --warmup untimed products, then --runs timed back to back between
two CUDA events; TFLOP/s = 2 size^3 runs / seconds. bf16 is the denominator of the training MFU
(bench/model_flops.py); --dtypes bf16,f32,tf32 adds strict f32 and TF32 for reference.
Copy bandwidth: a device-to-device copy of --copy-mib MiB, timed as above, counted as bytes read plus
bytes written (2 x size per copy), the figure to hold a memory-bound kernel against.
Prints one JSON line. --device cpu runs the same code on the CPU (perf_counter) for a check without a GPU.
"""

import argparse
import json
import time

import torch

DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32, "tf32": torch.float32}


def timed(device, fn, warmup, runs):
    """Seconds per call of fn, over runs calls after warmup untimed ones."""
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(runs):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0 / runs
    begin = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - begin) / runs


def matmul_tflops(device, name, size, warmup, runs):
    if device.type == "cuda":
        # Strict f32 unless tf32 is asked for (PyTorch's default is strict f32 for matmul).
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    dtype = DTYPES[name]
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=dtype, generator=gen)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=gen)
    out = torch.empty(size, size, device=device, dtype=dtype)
    seconds = timed(device, lambda: torch.matmul(a, b, out=out), warmup, runs)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    return 2.0 * size**3 / seconds / 1e12, seconds


def copy_gbps(device, mib, warmup, runs):
    n = mib * 1024 * 1024
    src = torch.empty(n, dtype=torch.uint8, device=device).random_(0, 256)
    dst = torch.empty_like(src)
    seconds = timed(device, lambda: dst.copy_(src), warmup, runs)
    return 2.0 * n / seconds / 1e9, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--dtypes", default="bf16", help="comma-separated: bf16, f32, tf32")
    parser.add_argument("--copy-mib", type=int, default=2048, help="0: no copy measurement")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    dtypes = [d for d in args.dtypes.split(",") if d]
    bad = [d for d in dtypes if d not in DTYPES]
    if bad or args.size < 1 or args.runs < 1 or args.warmup < 0:
        parser.error(f"bad --dtypes {bad} or --size/--runs/--warmup")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("matmul_peak.py: torch.cuda.is_available() is False")
    device = torch.device(args.device)
    row = {"bench": "matmul_peak", "device": args.device,
           "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch_version": torch.__version__, "size": args.size, "warmup": args.warmup,
           "runs": args.runs}
    for name in dtypes:
        tflops, seconds = matmul_tflops(device, name, args.size, args.warmup, args.runs)
        row[f"{name}_tflops"] = round(tflops, 1)
        row[f"{name}_seconds"] = round(seconds, 6)
    if args.copy_mib > 0:
        gbps, seconds = copy_gbps(device, args.copy_mib, args.warmup, args.runs)
        row["copy_mib"] = args.copy_mib
        row["copy_gbps_read_plus_write"] = round(gbps, 1)
        row["copy_seconds"] = round(seconds, 6)
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
