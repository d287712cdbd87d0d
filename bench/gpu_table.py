#!/usr/bin/python3
"""The markdown table of bench/gpu.sh's run: tfm beside PyTorch on the GPU, ratios and MFU.

  python3 bench/gpu_table.py OUT_DIR [--peak-tflops P]      (or JSONL files instead of OUT_DIR)

Reads every JSON line of OUT_DIR/*.jsonl: bench/matmul_peak.py's row (the bf16 peak, the MFU's
denominator, unless --peak-tflops is given), training rows (tfm's bench_train_step and
bench/train_step_pytorch.py, "seconds_per_step" present) and decoding rows (bench_decode and
bench/decode_pytorch.py, "out_len" present). Model FLOPs and MFU come from bench/model_flops.py for both
frameworks, from each row's model config, batch and lengths, so both are counted alike whatever a program
reports itself. PyTorch's row for a comparison is its fastest of the same model, batch and precision (eager
or torch.compile: its best settings; the table says which). Ratios are tokens per second, tfm / PyTorch.
The projected time of the paper's schedules (base 100k steps, big 300k; the paper: 12 hours and 3.5 days
on 8 P100) is steps x seconds per step on this one GPU, at this batch.
"""

import argparse
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_flops import flops_of_row  # noqa: E402

SCHEDULE_STEPS = {"base": 100_000, "big": 300_000}
PAPER_TIME = {"base": "12 h on 8 P100", "big": "3.5 days on 8 P100"}
PEAK_MEMORY_KEYS = ("peak_gpu_mb", "peak_device_mb", "peak_cuda_mb")  # what tfm's row may call it


def read_rows(paths):
    rows = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    print(f"gpu_table.py: {path}: not JSON: {line[:80]}", file=sys.stderr)
    return rows


def model_name(row):
    return row.get("preset") or row.get("config") or "model"


def peak_memory(row):
    return next((row[k] for k in PEAK_MEMORY_KEYS if row.get(k) is not None), None)


def fmt(value, spec=",.0f", suffix=""):
    return "-" if value is None else f"{value:{spec}}{suffix}"


def duration(seconds):
    if seconds is None:
        return "-"
    hours = seconds / 3600
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


def pytorch_setting(row):
    compiled = row.get("compile", "off")
    if compiled.startswith("on"):
        return "compile"
    return "eager" if compiled == "off" else "eager (compile failed)"


def train_table(rows, peak):
    lines = []
    keys = []
    for r in rows:
        key = (model_name(r), r.get("precision"), r["batch"], r["src_len"], r["tgt_len"])
        if key not in keys:
            keys.append(key)
    for key in keys:
        name, precision, batch, src_len, tgt_len = key
        same = [r for r in rows if (model_name(r), r.get("precision"), r["batch"], r["src_len"],
                                    r["tgt_len"]) == key]
        tfm = max((r for r in same if r["framework"] == "tfm"), key=lambda r: r["tokens_per_second"],
                  default=None)
        torch_rows = [r for r in same if r["framework"] == "pytorch"]
        torch_best = max(torch_rows, key=lambda r: r["tokens_per_second"], default=None)
        part = f"train {name} {precision}, {batch}x({src_len}+{tgt_len})"
        flops = flops_of_row(same[0])

        def per(row, fn):
            return "-" if row is None else fn(row)

        def mfu(row):
            return None if not peak else flops / row["seconds_per_step"] / (peak * 1e12)

        def step(row):
            lo, hi = row.get("min_seconds_per_step"), row.get("max_seconds_per_step")
            spread = f" ({lo * 1000:.1f}-{hi * 1000:.1f})" if lo is not None and hi is not None else ""
            return f"{row['seconds_per_step'] * 1000:.1f}{spread}"

        ratio = (tfm["tokens_per_second"] / torch_best["tokens_per_second"]
                 if tfm and torch_best else None)
        setting = pytorch_setting(torch_best) if torch_best else ""
        others = ", ".join(f"{pytorch_setting(r)} {r['tokens_per_second']:,.0f}"
                           for r in torch_rows if r is not torch_best)
        how = f" ({setting}{'; ' + others if others else ''})" if torch_best else ""
        lines.append(f"| {part} | tokens/s (source + target) | "
                     f"{per(tfm, lambda r: fmt(r['tokens_per_second']))} | "
                     f"{per(torch_best, lambda r: fmt(r['tokens_per_second']))}{how} | "
                     f"{fmt(ratio, '.2f', 'x')} |")
        lines.append(f"| {part} | ms/step, mean (min-max) | {per(tfm, step)} | {per(torch_best, step)} | |")
        lines.append(f"| {part} | model TFLOP/step; MFU of {fmt(peak, '.0f')} TFLOP/s bf16 | "
                     f"{flops / 1e12:.2f}; {per(tfm, lambda r: fmt(mfu(r), '.1%'))} | "
                     f"{per(torch_best, lambda r: fmt(mfu(r), '.1%'))} | |")
        lines.append(f"| {part} | peak GPU memory MB | {per(tfm, lambda r: fmt(peak_memory(r)))} | "
                     f"{per(torch_best, lambda r: fmt(peak_memory(r)))} | |")
        if name in SCHEDULE_STEPS:
            steps = SCHEDULE_STEPS[name]
            lines.append(f"| {part} | projected {steps // 1000}k steps, 1 GPU (paper: "
                         f"{PAPER_TIME[name]}) | "
                         f"{per(tfm, lambda r: duration(steps * r['seconds_per_step']))} | "
                         f"{per(torch_best, lambda r: duration(steps * r['seconds_per_step']))} | |")
    return lines


def decode_table(rows):
    lines = []
    keys = []
    # Paired by search (beam4, beam4-bf16, ...) and batch: decode_pytorch.py reads a model directory and
    # does not know the preset's name, so the name is tfm's row's.
    for r in rows:
        key = (r["mode"], r["batch"])
        if key not in keys:
            keys.append(key)
    for mode, batch in keys:
        same = [r for r in rows if (r["mode"], r["batch"]) == (mode, batch)]
        tfm = next((r for r in same if r["framework"] == "tfm"), None)
        torch_row = next((r for r in same if r["framework"] == "pytorch"), None)
        name = next((r["preset"] for r in same if r.get("preset")), "model")
        ratio = (tfm["target_tokens_per_second"] / torch_row["target_tokens_per_second"]
                 if tfm and torch_row else None)
        part = f"decode {name} {mode}, batch {batch}"
        same_out = ""
        if tfm and torch_row and mode in torch_row.get("identical_to_tfm", {}):
            same_out = f"; {torch_row['identical_to_tfm'][mode]}/{batch} outputs identical"
        lines.append(
            f"| {part} | target tokens/s{same_out} | "
            f"{fmt(tfm['target_tokens_per_second']) if tfm else '-'} | "
            f"{fmt(torch_row['target_tokens_per_second']) if torch_row else '-'} | "
            f"{fmt(ratio, '.2f', 'x')} |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("inputs", nargs="+", help="bench/gpu.sh's --out directory, or JSONL files")
    parser.add_argument("--peak-tflops", type=float, default=None)
    args = parser.parse_args()
    paths = []
    for p in args.inputs:
        paths += sorted(glob.glob(os.path.join(p, "*.jsonl"))) if os.path.isdir(p) else [p]
    rows = read_rows(paths)
    peaks = [r for r in rows if r.get("bench") == "matmul_peak"]
    peak = args.peak_tflops or (peaks[-1].get("bf16_tflops") if peaks else None)
    train = [r for r in rows if "seconds_per_step" in r and "framework" in r]
    decode = [r for r in rows if "out_len" in r and "framework" in r]
    if peaks:
        p = peaks[-1]
        print(f"GPU: {p.get('gpu')}; measured bf16 {p.get('size')}^3 products "
              f"{fmt(p.get('bf16_tflops'), '.0f')} "
              f"TFLOP/s, device copy {fmt(p.get('copy_gbps_read_plus_write'), ',.0f')} GB/s "
              f"(read + write); PyTorch {p.get('torch_version')}")
    else:
        print(f"GPU: no matmul_peak row; MFU against {fmt(peak, '.0f')} TFLOP/s")
    print()
    print("| part | measure | tfm | PyTorch | tfm/PyTorch |")
    print("|---|---|---:|---:|---:|")
    for line in train_table(train, peak) + decode_table(decode):
        print(line)
    if not train and not decode:
        print("| (no training or decoding rows) | | | | |")


if __name__ == "__main__":
    main()
