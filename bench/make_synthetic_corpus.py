#!/usr/bin/env python3
"""Writes a synthetic parallel corpus of N pairs for the corpus-scale benchmark (bench/corpus_scale.sh).

Each pair joins 1 to 4 pairs of a shipped corpus (Multi30k English-German training set, 29,000
pairs), picked at random, sources with sources and targets with targets, so the lines differ and
their lengths spread like WMT's: about 27 words a side against Multi30k's 12. Deterministic for a
given seed.

Usage: bench/make_synthetic_corpus.py PAIRS OUT_DIR [--data DIR] [--seed S] [--target de|fr]
Writes OUT_DIR/train.en and OUT_DIR/train.de (or .fr: Multi30k's French) (plain UTF-8, one sentence
a line).
"""
import argparse
import gzip
import os
import random
import sys


def read_lines(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=int)
    parser.add_argument("out_dir")
    default_data = os.environ.get("TFM_DATA_DIR") or os.path.join(
        os.path.dirname(__file__), "..", "..", "shared", "data")
    parser.add_argument("--data", default=default_data, help="folder holding multi30k/")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--target", choices=["de", "fr"], default="de")
    args = parser.parse_args()
    if args.pairs <= 0:
        sys.exit("make_synthetic_corpus.py: PAIRS must be positive")
    sources = read_lines(os.path.join(args.data, "multi30k", "train.en.gz"))
    targets = read_lines(os.path.join(args.data, "multi30k", f"train.{args.target}.gz"))
    if len(sources) != len(targets):
        sys.exit(f"make_synthetic_corpus.py: multi30k train.en and train.{args.target} differ")
    os.makedirs(args.out_dir, exist_ok=True)
    rng = random.Random(args.seed)
    n = len(sources)
    paths = [os.path.join(args.out_dir, name) for name in ("train.en", f"train.{args.target}")]
    partial = [path + ".part" for path in paths]
    block = 100000
    with open(partial[0], "w", encoding="utf-8") as src, open(partial[1], "w",
                                                              encoding="utf-8") as tgt:
        for start in range(0, args.pairs, block):
            src_lines, tgt_lines = [], []
            for _ in range(min(block, args.pairs - start)):
                picks = [rng.randrange(n) for _ in range(rng.randint(1, 4))]
                src_lines.append(" ".join(sources[i] for i in picks))
                tgt_lines.append(" ".join(targets[i] for i in picks))
            src.write("\n".join(src_lines) + "\n")
            tgt.write("\n".join(tgt_lines) + "\n")
            done = start + len(src_lines)
            if done % 2000000 < block or done == args.pairs:
                print(f"make_synthetic_corpus.py: {done} / {args.pairs} pairs", file=sys.stderr)
    for part, path in zip(partial, paths):
        os.replace(part, path)


if __name__ == "__main__":
    main()
