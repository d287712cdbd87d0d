#!/usr/bin/python3
"""bench/distributed.sh's helper: its JSON lines, and the table it prints from them.

  distributed_table.py settings KEY=VALUE...              one "settings" line
  distributed_table.py error MODEL RUN REPEAT STDERR_FILE  one error line for a failed run
  distributed_table.py table FILE [SECONDS]               the table of a distributed.sh OUT file

The table, per model: for each run (tfm-process, tfm-ranks, pytorch-ddp, pytorch-process; named by
framework and processes x threads) the median over the repeats of each figure, and the min-max of
tokens/s; then tfm-ranks / pytorch-ddp tokens/s (ratio of the medians, and the range of the per-repeat
ratios: the runs of one repeat ran one after the other), and each framework's ranks / its one process.
Standard library only.
"""

import datetime
import json
import re
import statistics
import sys
import textwrap

RUNS = ("tfm-process", "tfm-ranks", "pytorch-ddp", "pytorch-process")
RATIOS = (("tfm-ranks", "pytorch-ddp"), ("tfm-ranks", "tfm-process"), ("pytorch-ddp", "pytorch-process"))


def settings_line(pairs):
    row = {"settings": True, "date": datetime.date.today().isoformat()}
    for pair in pairs:
        key, _, value = pair.partition("=")
        row[key] = value
    return row


def error_line(model, run, repeat, stderr_path):
    """The error: the program's own last message (`bench_train_dist: ...`, a Python exception), else
    the last line with words (mpirun ends its reports with a line of dashes)."""
    with open(stderr_path, encoding="utf-8", errors="replace") as f:
        lines = [line.strip() for line in f if re.search(r"[A-Za-z]", line)]
    own = [line for line in lines if re.match(r"(bench_\w+|\w+\.py|\w*(Error|Exception)\b)", line)]
    message = (own or lines or ["failed without a message"])[-1]
    return {"dist_model": model, "run": run, "repeat": int(repeat), "error": message}


def label(rows):
    """'tfm 2x1': framework and processes x threads per process, from the run's first row."""
    r = rows[0]
    ranks = r.get("ranks", 1)
    threads = r.get("threads_per_rank", r.get("threads"))
    return f"{r['framework']} {ranks}x{threads}"


def plural(count, noun):
    return f"{count} {noun}" + ("" if count == 1 else "s")


def median(rows, key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def number(value, fmt):
    return "-" if value is None else format(value, fmt)


def describe(model, rows, settings):
    r = next((r for r in rows if isinstance(r.get("model"), dict)), rows[0])
    if model == "recipe" and settings.get("recipe"):
        source = f"the model of {settings['recipe']}"
    else:
        source = f"config {r['config']}" if r.get("config") else f"preset {r.get('preset') or model}"
    m = r.get("model")
    shape = (f"layers {m['layers']}, d_model {m['d_model']}, d_ff {m['d_ff']}, heads {m['heads']}, "
             if isinstance(m, dict) else "")
    return (f"{model}: {source} ({shape}vocab {r.get('vocab')}); {r['batch']} pairs of {r['src_len']} + "
            f"{r['tgt_len']} tokens per process; {plural(r['steps'], 'timed step')} after "
            f"{r.get('warmup', '?')} warm-up")


def model_table(model, runs, settings):
    rows_all = [r for rows in runs.values() for r in rows]
    repeats = settings.get("repeats", "?")
    print(describe(model, rows_all, settings) + f"; {repeats} repeat" + ("" if repeats == "1" else "s"))
    header = (f"{'run':<17} {'tokens/s':>9} {'min-max':>13} {'s/step':>8} {'backward s':>10} "
              f"{'AR MB':>7} {'AR alone s':>10} {'GB/s':>6} {'busbw':>6} {'exposed s':>9} {'hidden':>6}")
    print(header)
    print("-" * len(header))
    for run in RUNS:
        rows = runs.get(run)
        if not rows:
            continue
        tokens = [r["tokens_per_second"] for r in rows]
        dist = rows[0].get("ranks", 1) > 1
        ar_bytes = median(rows, "allreduce_bytes") if dist else None
        print(f"{label(rows):<17} {median(rows, 'tokens_per_second'):>9.0f} "
              f"{f'{min(tokens):.0f}-{max(tokens):.0f}':>13} {median(rows, 'seconds_per_step'):>8.3f} "
              f"{number(median(rows, 'backward_s'), '.3f'):>10} "
              f"{number(ar_bytes and ar_bytes / 1e6, '.1f'):>7} "
              f"{number(median(rows, 'allreduce_standalone_s') if dist else None, '.4f'):>10} "
              f"{number(median(rows, 'allreduce_gbps') if dist else None, '.2f'):>6} "
              f"{number(median(rows, 'allreduce_busbw_gbps') if dist else None, '.2f'):>6} "
              f"{number(median(rows, 'allreduce_exposed_s') if dist else None, '.4f'):>9} "
              f"{number(median(rows, 'hidden_fraction') if dist else None, '.0%'):>6}")
    for top, bottom in RATIOS:
        if not runs.get(top) or not runs.get(bottom):
            continue
        ratio = median(runs[top], "tokens_per_second") / median(runs[bottom], "tokens_per_second")
        bottom_by_repeat = {r["repeat"]: r["tokens_per_second"] for r in runs[bottom]}
        paired = [r["tokens_per_second"] / bottom_by_repeat[r["repeat"]] for r in runs[top]
                  if r["repeat"] in bottom_by_repeat]
        print(f"{label(runs[top])} / {label(runs[bottom])} tokens/s: {ratio:.2f}x "
              f"(per repeat {min(paired):.2f}-{max(paired):.2f}x)")


def print_table(path, seconds=None):
    settings, results, errors = {}, {}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip().startswith("{"):
                continue
            r = json.loads(line)
            if r.get("settings"):
                settings = r
            elif "error" in r:
                errors.append(r)
            else:
                results.setdefault(r["dist_model"], {}).setdefault(r["run"], []).append(r)
    details = [settings.get("date"), f"commit {settings.get('commit', '-')}",
               f"PyTorch DDP bucket_cap_mb {settings.get('bucket_cap_mb', '?')}"]
    if seconds is not None:
        details.append(f"{seconds} s in all")
    print()
    print("tfm data-parallel benchmark: " + ", ".join(d for d in details if d))
    for model, runs in results.items():
        print()
        model_table(model, runs, settings)
    print()
    print(textwrap.fill(
        "Medians over the repeats. tokens/s: all processes' source + target tokens per second. AR: the "
        "all-reduce of one update's gradients: MB, one all-reduce of that size alone (s, GB/s = bytes/s, "
        "busbw = 2(n-1)/n bytes/s); exposed s: the part of it after the end of the backward computation; "
        "hidden = 1 - exposed / alone.", 110))
    for i, e in enumerate(errors, 1):
        print(f"[{i}] {e['dist_model']} {e['run']} repeat {e['repeat']} failed: {e['error']}")
    print(f"raw JSON lines: {path}")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    command, args = argv[1], argv[2:]
    if command == "settings":
        print(json.dumps(settings_line(args)))
    elif command == "error" and len(args) == 4:
        print(json.dumps(error_line(*args)))
    elif command == "table" and len(args) in (1, 2):
        print_table(args[0], int(args[1]) if len(args) == 2 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
