#!/usr/bin/env python3
"""The wall time of each WMT14 recipe's full schedule on this machine, projected from measured
training speed, beside the paper's (12 hours for base, 3.5 days for big, on 8 NVIDIA P100).

Measures tokens/s of a training step (forward, backward, Adam) of each recipe's model at its
vocabulary size (base and big at 37000 for English-German, big at 32000 for English-French) with
bench_train_step: bf16 products (the recipes' precision: auto on this CPU), batches of 128 pairs of
32 + 32 tokens (8192 tokens; WMT's sentences average about 27 subword tokens a side), all threads.
The projection is updates x update_tokens / tokens per second: 100k or 300k updates of 50,000 padded
tokens (the recipes; a padded token costs what a real one does, and tfm's batches of WMT-length
sentences are 95% real: docs/BENCHMARKS.md, "Corpus scale"). A GPU's measured speed, given with
--gpu (from bench/gpu.sh on a lent GPU), is projected the same way.

Usage: bench/wmt14_projection.py [--steps 3] [--threads 2] [--bench build/release/bench_train_step]
                                 [--gpu 'H100:base=832253' --gpu 'H100:big=408448']
"""
import argparse
import json
import os
import subprocess

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))

RECIPES = [
    # name, preset, vocabulary, updates, the paper's time (hours), the paper's BLEU
    ("wmt14-en-de-base", "base", 37000, 100_000, 12.0, "27.3"),
    ("wmt14-en-de-big", "big", 37000, 300_000, 84.0, "28.4"),
    ("wmt14-en-fr-big", "big", 32000, 300_000, 84.0, "41.8 (41.0)"),
]
UPDATE_TOKENS = 50_000


def hours_text(hours):
    if hours < 48:
        return f"{hours:,.1f} h"
    return f"{hours / 24:,.1f} days"


def measure(bench, preset, vocab, steps, threads):
    args = [bench, "--preset", preset, "--vocab", str(vocab), "--precision", "bf16", "--batch",
            "128", "--src-len", "32", "--tgt-len", "32", "--steps", str(steps), "--threads",
            str(threads)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--bench", default=os.path.join(ROOT, "build", "release",
                                                        "bench_train_step"))
    parser.add_argument("--gpu", action="append", default=[],
                        help="LABEL:PRESET=TOKENS_PER_S, a GPU's measured training speed "
                             "(repeatable)")
    args = parser.parse_args()

    gpu = {}  # label -> {preset: tokens/s}
    for item in args.gpu:
        label, rest = item.split(":")
        preset, value = rest.split("=")
        gpu.setdefault(label, {})[preset] = float(value)

    print("| recipe | model, vocabulary | tokens/s here (s/step, min-max) | one update of 50,000 "
          "tokens | full schedule here | paper (8 P100) |" +
          "".join(f" {label} (measured speed) |" for label in gpu))
    print("|---|---|---:|---:|---:|---:|" + "---:|" * len(gpu))
    for name, preset, vocab, updates, paper_hours, bleu in RECIPES:
        row = measure(args.bench, preset, vocab, args.steps, args.threads)
        update_s = UPDATE_TOKENS / (row["tokens_per_second"])
        hours = updates * update_s / 3600
        gpu_cells = ""
        for speeds in gpu.values():
            if preset in speeds:
                gpu_cells += f" {hours_text(updates * UPDATE_TOKENS / speeds[preset] / 3600)} |"
            else:
                gpu_cells += " |"
        print(f"| {name} | {preset}, {vocab} | {row['tokens_per_second']:,.0f} "
              f"({row['seconds_per_step']:.2f}, {row['min_seconds_per_step']:.2f}-"
              f"{row['max_seconds_per_step']:.2f}) | {update_s:,.1f} s | {hours_text(hours)} | "
              f"{hours_text(paper_hours)}, BLEU {bleu} |{gpu_cells}")


if __name__ == "__main__":
    main()
