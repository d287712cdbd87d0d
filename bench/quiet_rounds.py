"""The quiet rounds of a run of interleaved rounds (bench/ctranslate2.sh, bench/opus_mt_speed.sh).

A VM whose host takes cycles away from it moves its FMA peak within minutes, and its rounds then
compare tfm and the peer at different speeds of the machine. The scripts measure the peak before
and after each round (bench/quiet_rounds.sh's fma_peak, lines "ROUND BEFORE AFTER" in a file); a
round is quiet when its two peaks are within STEADY of each other and within NEAR_BEST of the
highest peak of the run. Standard library only.

  quiet_rounds.py peak f32|bf16   gemm_bench's JSON on stdin -> its peak_fma (f32) or peak_dot_bf16
                                  (bf16) in GFLOP/s, the fastest repetition (or nothing: no such row)
"""

import json
import sys

import suite_table

STEADY = 0.03
NEAR_BEST = 0.05


def read_peaks(path):
    """{round: (before, after)} for the lines that have both peaks."""
    peaks = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) == 3:
                peaks[int(fields[0])] = (float(fields[1]), float(fields[2]))
    return peaks


def quiet_rounds(peaks, rounds, best):
    """The quiet rounds among 1..rounds (best: the run's highest peak), or None when some round has
    no peaks."""
    if any(i not in peaks for i in range(1, rounds + 1)):
        return None
    return [i for i in range(1, rounds + 1)
            if min(peaks[i]) >= (1 - STEADY) * max(peaks[i]) and min(peaks[i]) >= (1 - NEAR_BEST) * best]


def report(path, rounds, ratios_by_mode):
    """Lines for the table's foot: each round's peaks, which rounds were quiet, and each mode's
    range of ratios over them (ratios_by_mode: mode -> the rounds' ratios in order)."""
    peaks = read_peaks(path)
    best = max((max(p) for p in peaks.values()), default=0.0)
    quiet = quiet_rounds(peaks, rounds, best)
    if quiet is None:
        return ["", "Quiet rounds not told apart: build/release/gemm_bench has no FMA peak row here."]
    lines = ["", "FMA peak before and after each round, GFLOP/s: "
             + ", ".join(f"{i}: {peaks[i][0]:.0f} and {peaks[i][1]:.0f}" for i in sorted(peaks))
             + f". Quiet rounds (the two within {STEADY:.0%}, both within {NEAR_BEST:.0%} of {best:.0f}): "
             + f"{len(quiet)} of {rounds}" + (f" ({', '.join(map(str, quiet))})." if quiet else ".")]
    for mode, ratios in ratios_by_mode.items():
        quiet_ratios = [ratios[i - 1] for i in quiet]
        if quiet_ratios:
            lines.append(f"- {mode}: the quiet rounds' ratios {min(quiet_ratios):.2f}-{max(quiet_ratios):.2f}x")
    return lines


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "peak" or sys.argv[2] not in ("f32", "bf16"):
        sys.exit(__doc__)
    try:
        rate = suite_table.peak_rates_of(json.load(sys.stdin)).get(sys.argv[2])
    except ValueError:  # no output: gemm_bench failed
        rate = None
    print(f"{rate:.1f}" if rate else "")
