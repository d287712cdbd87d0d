#!/usr/bin/python3
"""bench/compare_builds.sh's helper: every tfm figure of bench/suite.sh's JSON lines, before and after.

  compare_table.py BEFORE.jsonl... -- AFTER.jsonl...

Prints one line per figure: the median of the before runs, of the after runs, after/before (higher
is faster for rates) and each side's spread (min-max). Standard library only.
"""

import json
import statistics
import sys


def figures(path):
    """{figure name: value} of one suite run: GFLOP/s per product, tokens/s per training run and
    target tokens/s per decoding run (higher is better for all)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if "error" in r or r.get("framework", "tfm") != "tfm":
                continue
            part = r.get("suite")
            if part == "gemm":
                out[f"gemm {r['name']} GFLOP/s"] = r["gflops"]
            elif part in ("train_base", "train_recipe"):
                out[f"{part} {r['precision']} tokens/s"] = r["tokens_per_second"]
            elif part == "decode_base":
                out[f"decode {r['mode']} {r.get('precision', 'f32')} target tokens/s"] = r[
                    "target_tokens_per_second"]
    return out


def main(argv):
    split = argv.index("--")
    sides = [[figures(p) for p in argv[:split]], [figures(p) for p in argv[split + 1:]]]
    names = [n for n in sides[0][0] if all(n in run for side in sides for run in side)]
    missing = sorted({n for side in sides for run in side for n in run} - set(names))
    width = max(len(n) for n in names)
    print(f"{'figure':<{width}}  {'before':>9}  {'after':>9}  {'after/before':>12}  spread before / after")
    worst = 1.0
    for n in names:
        b = [run[n] for run in sides[0]]
        a = [run[n] for run in sides[1]]
        ratio = statistics.median(a) / statistics.median(b)
        worst = min(worst, ratio)
        spread = f"{min(b):.0f}-{max(b):.0f} / {min(a):.0f}-{max(a):.0f}"
        print(f"{n:<{width}}  {statistics.median(b):9.1f}  {statistics.median(a):9.1f}  {ratio:12.3f}  {spread}")
    print(f"lowest after/before: {worst:.3f} ({len(names)} figures; runs: {len(sides[0])} before, "
          f"{len(sides[1])} after)")
    if missing:
        print("not in every run (left out): " + ", ".join(missing))


if __name__ == "__main__":
    main(sys.argv[1:])
