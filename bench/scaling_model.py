#!/usr/bin/python3
"""Projected data-parallel training speed of tfm on more ranks, from measured figures (docs/DISTRIBUTED.md).

  python3 bench/scaling_model.py --step-s S --backward-s B --tokens T [--params P] [--last-bucket-mb M]
      [--speedup X] [--ranks 8,64] [--link NAME=GBPS ...] [--latency-us U] [--buckets K]

Per rank and update (weak scaling: each rank keeps its batch of T source + target tokens):
  compute        = step_s / speedup                 (the measured 1-rank update; speedup: how much
                                                      faster a node computes than the measured one)
  all-reduce     = 2 (N - 1) / N x bytes / bandwidth + 2 (N - 1) x K x latency
                   (ring all-reduce of 4 bytes per parameter in K buckets; bandwidth per link)
  exposed        = max(all-reduce - overlap x backward, all-reduce of the last bucket)
                   (buckets are summed while the backward runs; the last one, holding the shared
                   embedding that the backward completes last, can only start after it; overlap:
                   the share of the backward during which the transfers progress, 1 with a core or
                   a NIC to spare for them)
  tokens/s (N)   = N x T / (compute + exposed)
Efficiency is tokens/s (N) / (N x tokens/s (1)).
"""

import argparse


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--step-s", type=float, required=True, help="measured seconds per update, 1 rank")
    p.add_argument("--backward-s", type=float, required=True, help="measured backward seconds of it")
    p.add_argument("--tokens", type=float, required=True, help="source + target tokens per rank and update")
    p.add_argument("--params", type=float, default=63.0e6, help="parameters (63e6 base, 214e6 big)")
    p.add_argument("--last-bucket-mb", type=float, default=0.0,
                   help="MB of the bucket the backward completes last (the embedding's)")
    p.add_argument("--speedup", type=float, default=1.0, help="node compute relative to the measured one")
    p.add_argument("--ranks", default="8,64")
    p.add_argument("--link", action="append", default=[],
                   help="NAME=GB/s per link (default: 25GbE=2.9, i.e. 25 Gb/s at 93%% payload)")
    p.add_argument("--latency-us", type=float, default=30.0, help="per message step")
    p.add_argument("--buckets", type=int, default=16)
    p.add_argument("--overlap", type=float, default=1.0, help="share of the backward the transfers use")
    a = p.parse_args()
    links = [tuple(x.split("=")) for x in a.link] or [("25GbE", "2.9")]
    nbytes = 4 * a.params
    compute = a.step_s / a.speedup
    backward = a.backward_s / a.speedup
    single = a.tokens / compute
    print(f"compute {compute:.4g} s per update ({backward:.4g} s backward), {a.tokens:.0f} tokens per rank,"
          f" gradient {nbytes / 1e6:.0f} MB in {a.buckets} buckets, overlap {a.overlap:g};"
          f" 1 rank: {single:.0f} tokens/s")
    print(f"{'link':>10} {'ranks':>6} {'all-reduce s':>13} {'exposed s':>10} {'tokens/s':>12} {'efficiency':>10}")
    for name, gbps in links:
        bandwidth = float(gbps) * 1e9
        for n in [int(r) for r in a.ranks.split(",")]:
            ring = 2 * (n - 1) / n
            total = ring * nbytes / bandwidth + 2 * (n - 1) * a.buckets * a.latency_us * 1e-6
            last = ring * a.last_bucket_mb * 1e6 / bandwidth + 2 * (n - 1) * a.latency_us * 1e-6
            exposed = max(total - a.overlap * backward, last)
            rate = n * a.tokens / (compute + exposed)
            print(f"{name:>10} {n:>6} {total:>13.4g} {exposed:>10.4g} {rate:>12.0f} {rate / (n * single):>10.2f}")


if __name__ == "__main__":
    main()
