#!/usr/bin/python3
"""A training run's curve against wall-clock time, as a markdown table, from its metrics.jsonl.

  python3 scripts/gpu/curve.py RUN/metrics.jsonl

One row per validation (seconds, update, epoch, validation loss, greedy validation BLEU), then the
run's mean updates per second and training tokens per second over its logged train records.
"""

import json
import sys


def main(path):
    valid, train = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record.get("type") == "valid":
                valid.append(record)
            elif record.get("type") == "train":
                train.append(record)
    print(f"\nCurve of {path} (validation against wall-clock time):\n")
    print("| seconds | update | epoch | valid loss | greedy valid BLEU |")
    print("|---:|---:|---:|---:|---:|")
    for r in valid:
        bleu = f"{r['bleu']:.2f}" if "bleu" in r else "n/a"
        print(f"| {r['elapsed_s']:.1f} | {r['step']} | {r.get('epoch', '')} | {r['loss']:.4f} | {bleu} |")
    if len(train) >= 2:
        first, last = train[0], train[-1]
        seconds = last["elapsed_s"] - first["elapsed_s"]
        updates = last["step"] - first["step"]
        tokens = sum(r["tokens_per_second"] for r in train[1:]) / (len(train) - 1)
        print(f"\n{updates / seconds:.1f} updates/s from update {first['step']} to {last['step']} "
              f"(validation and checkpoints included); mean logged {tokens:,.0f} tokens/s")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: curve.py RUN/metrics.jsonl")
    main(sys.argv[1])
