#!/usr/bin/python3
"""The markdown table of bench_train_step's JSON lines, each run under the "== label" line before it.

  python3 scripts/gpu/steps_table.py STEPS.txt      (written by scripts/gpu/train_check.sh)
"""
import json, sys
print("| run | ms/step | forward ms | backward ms | tokens/s | peak GPU MB |")
print("|---|---:|---:|---:|---:|---:|")
label = ""
for line in open(sys.argv[1]):
    if line.startswith("=="):
        label = line[3:].strip()
    elif line.startswith("{"):
        r = json.loads(line)
        print(f"| {label} | {1e3 * r['seconds_per_step']:.1f} | {1e3 * r['forward_s']:.1f} | "
              f"{1e3 * r['backward_s']:.1f} | {r['tokens_per_second']:,.0f} | {r['peak_device_mb']:,.0f} |")
