#!/usr/bin/env python3
"""Two or more builds of one benchmark binary, run in alternation, compared round by round.

    bench/alternate.py gemm   [--rounds N] [--min-time S] --filter REGEX GEMM_BENCH_A GEMM_BENCH_B ...
    bench/alternate.py decode [--rounds N] BENCH_DECODE_A BENCH_DECODE_B ... -- [bench_decode options]
    bench/alternate.py train  [--rounds N] BENCH_TRAIN_STEP_A BENCH_TRAIN_STEP_B ... -- [options]

A round runs every binary once, in the order given on even rounds and reversed on odd ones, so that a
machine whose speed drifts (the 2-core VMs move by 10-50% within minutes: docs/BENCHMARKS.md,
"Measuring on this machine") slows the binaries alike. Each binary's figure is compared with the first
binary's of the same round, and the table gives, for every binary after the first, the median of the
rounds' ratios, their range and each round's ratio: a change shows as a ratio that holds in most rounds,
not as a difference of two means taken minutes apart. Ratios are "times faster than the first binary"
(above 1: faster): GFLOP/s over GFLOP/s for gemm_bench's rows (a row without FLOP/s: its OP/s, items,
elements or bytes a second), seconds of the first over seconds of the other for bench_decode
(`best_seconds`, the fastest decode of a run, and `seconds`, the mean) and bench_train_step
(`min_seconds_per_step` and `seconds_per_step`; its `outside_gemm_fraction` is listed as it is). Keep
the machine quiet while it runs.
"""

import argparse
import json
import statistics
import subprocess
import sys

# The figures each kind compares: (the JSON key, its label, whether larger is faster).
DECODE_FIGURES = [("best_seconds", "fastest decode, s", False), ("seconds", "mean decode, s", False)]
TRAIN_FIGURES = [("min_seconds_per_step", "fastest step, s", False),
                 ("seconds_per_step", "mean step, s", False),
                 ("outside_gemm_fraction", "outside the products", None)]
GEMM_RATES = ["FLOP/s", "OP/s", "items_per_second", "elements/s", "B/s"]


def order_of(round_index, binaries):
    """The binaries in the order they run in this round: as given, then reversed, and so on."""
    return list(binaries) if round_index % 2 == 0 else list(reversed(binaries))


def last_json_line(text, binary):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"alternate.py: {binary} printed no JSON line")


def gemm_figures(text, binary):
    """{"row name, G<unit>": rate in billions} from gemm_bench --benchmark_format=json."""
    try:
        rows = json.loads(text)["benchmarks"]
    except (ValueError, KeyError) as error:
        raise SystemExit(f"alternate.py: {binary} did not print gemm_bench's JSON ({error})")
    figures = {}
    for row in rows:
        if row.get("error_occurred"):
            continue
        unit = next((key for key in GEMM_RATES if key in row), None)
        if unit is not None:
            figures[f"{row['name']}, G{unit}"] = float(row[unit]) / 1e9
    return figures


def run_round(kind, binaries, options, round_index, run):
    """{binary: {figure label: (value, larger is faster)}} of one round."""
    results = {}
    for binary in order_of(round_index, binaries):
        if kind == "gemm":
            command = [binary, f"--benchmark_filter={options.filter}",
                       f"--benchmark_min_time={options.min_time}", "--benchmark_format=json"]
            text = run(command)
            results[binary] = {name: (rate, True)
                               for name, rate in gemm_figures(text, binary).items()}
        else:
            row = last_json_line(run([binary] + options.rest), binary)
            figures = DECODE_FIGURES if kind == "decode" else TRAIN_FIGURES
            results[binary] = {label: (float(row[key]), faster) for key, label, faster in figures
                               if key in row}
    return results


def ratios(rounds, first, other, label):
    """The rounds' ratios of `other` to `first` for one figure (above 1: other faster)."""
    out = []
    for result in rounds:
        (a, larger_faster), (b, _) = result[first][label], result[other][label]
        out.append(b / a if larger_faster else a / b)
    return out


def spread(values, digits):
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(rounds, binaries):
    """Markdown: per figure, each binary's median (range), and the ratio to the first binary."""
    labels = [label for label in rounds[0][binaries[0]]
              if all(label in result[b] for result in rounds for b in binaries)]
    lines = ["| figure | binary | median (range) | ratio to the first: median (range) | each round |",
             "|---|---|---|---|---|"]
    for label in labels:
        comparable = rounds[0][binaries[0]][label][1] is not None
        for binary in binaries:
            values = [result[binary][label][0] for result in rounds]
            cells = [label, binary, spread(values, 4 if max(values) < 10 else 1), "", ""]
            if comparable and binary != binaries[0]:
                r = ratios(rounds, binaries[0], binary, label)
                cells[3] = spread(r, 3)
                cells[4] = " ".join(f"{x:.2f}" for x in r)
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_command(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last_line = (done.stderr.strip().splitlines() or [""])[-1]
        raise SystemExit(f"alternate.py: {' '.join(command)} exited with {done.returncode}: "
                         f"{last_line}")
    return done.stdout


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=["gemm", "decode", "train"])
    parser.add_argument("--rounds", type=int, default=6, help="rounds (default 6)")
    parser.add_argument("--filter", help="gemm: gemm_bench's --benchmark_filter")
    parser.add_argument("--min-time", type=float, default=0.15,
                        help="gemm: each row's --benchmark_min_time in seconds (default 0.15)")
    parser.add_argument("binaries", nargs="+", help="the builds' binaries; the first is the base")
    rest = []
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1:]
    options = parser.parse_args(argv)
    options.rest = rest
    if options.rounds < 1:
        parser.error("--rounds must be at least 1")
    if len(options.binaries) < 2:
        parser.error("give at least two binaries to compare")
    if options.kind == "gemm" and not options.filter:
        parser.error("gemm needs --filter (gemm_bench's rows to run)")
    return options


def main(argv=None, run=run_command):
    options = parse(sys.argv[1:] if argv is None else argv)
    rounds = []
    for index in range(options.rounds):
        print(f"alternate.py: round {index + 1} of {options.rounds}", file=sys.stderr)
        rounds.append(run_round(options.kind, options.binaries, options, index, run))
    print(table(rounds, options.binaries))
    return rounds


if __name__ == "__main__":
    main()
