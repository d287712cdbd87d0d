#!/usr/bin/env python3
"""Where a training step's time goes: a `perf script` listing (pid, tid, ip, sym, dso) of a
bench_train_step run, summed per thread into parts, as a share of each thread's samples.

The calling thread (the process's first, tid = pid) is busy for the whole step, so its shares are
shares of the step's wall time; the other threads' shares say how much of their time is work and how
much waiting in OpenMP.

Parts: the products (oneDNN's jitted code and libdnnl, our blocked kernels), OpenMP (libgomp: the
threads waiting at a barrier or for work), the kernel (interrupts, page faults, futexes), the C library
(malloc, memcpy), and each of tfm's functions by name.

    perf script -F pid,tid,ip,sym,dso -i perf.data | bench/profile_step.py [--top N]
"""
import argparse
import collections
import re
import sys

LINE = re.compile(r"^\s*(\d+)/(\d+)\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")
KERNEL_SET = re.compile(r"tfm::internal::cpu::[a-z0-9_]+::")
OUR_KERNEL = re.compile(r"Kernel::(micro_kernel|pack_a|pack_b)\b")


def part_of(sym, dso):
    name = dso.rsplit("/", 1)[-1]
    # Our kernels' micro-kernels and packers are called from blocked::gemm_block, or inlined there.
    if name.startswith("perf-") or "dnnl" in name or "gemm" in sym or OUR_KERNEL.search(sym):
        return "products (oneDNN's jitted code, libdnnl, our GEMM kernels)"
    if "gomp" in name:
        return "OpenMP (libgomp: waiting at barriers and for work)"
    if name.startswith("[kernel"):
        return "the kernel (interrupts, page faults, futexes)"
    if name.startswith("libc.") or name.startswith("ld-linux"):
        return "the C library (malloc, memcpy, memset)"
    if sym == "[unknown]":
        return "unknown code in " + name
    sym = KERNEL_SET.sub("", sym)
    sym = sym.replace("(anonymous namespace)::", "").replace("tfm::internal::", "")
    return re.sub(r"\(.*", "", sym)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=20, help="parts listed per thread")
    args = parser.parse_args()
    threads = collections.defaultdict(collections.Counter)
    pids = {}
    for line in sys.stdin:
        match = LINE.match(line)
        if match:
            pid, tid, sym, dso = match.groups()
            threads[tid][part_of(sym, dso)] += 1
            pids[tid] = pid
    if not threads:
        sys.exit("profile_step.py: no samples in the input (perf script -F pid,tid,ip,sym,dso)")
    # The calling thread first, then the others, the busiest first.
    order = sorted(threads, key=lambda tid: (tid != pids[tid], -sum(threads[tid].values())))
    for tid in order[:2]:
        parts = threads[tid]
        total = sum(parts.values())
        who = "the calling thread" if tid == pids[tid] else "another thread"
        print(f"{who} (tid {tid}, {total} samples):")
        for part, count in parts.most_common(args.top):
            print(f"  {100.0 * count / total:5.1f}%  {part}")


if __name__ == "__main__":
    main()
