#!/usr/bin/env python3
"""Sums ncu's per-kernel times (`ncu --metrics gpu__time_duration.sum --csv`) by kernel name.

Usage: scripts/gpu/ncu_summary.py ncu.csv [--top 30]

Prints the total kernel time, then the kernels by total time: milliseconds, share, launches and
name (template arguments and parameter lists cut, so one kernel's launches add up).
"""
import argparse
import collections
import csv
import io
import re
import sys

UNIT_MS = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}


def short_name(name: str) -> str:
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"\(.*$", "", name)  # parameter list
    depth, kept = 0, []
    for ch in name:  # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            kept.append(ch)
    name = "".join(kept)
    return re.sub(r"^(void |tfm::internal::cuda::)+", "", name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    text = open(args.csv, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        print(f"{args.csv}: no ncu CSV table (first lines: {text[:300]!r})", file=sys.stderr)
        return 1
    totals = collections.defaultdict(float)
    launches = collections.Counter()
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        ms = value * UNIT_MS.get(row.get("Metric Unit", "nsecond"), 1e-6)
        name = short_name(row["Kernel Name"])
        totals[name] += ms
        launches[name] += 1
    total = sum(totals.values())
    print(f"kernels: {sum(launches.values())} launches, {total:.2f} ms in all")
    print(f"{'ms':>9} {'share':>6} {'launches':>8}  kernel")
    for name, ms in sorted(totals.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{ms:9.3f} {100 * ms / total:5.1f}% {launches[name]:8d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
