"""The table of tfm beside CTranslate2 decoding in interleaved rounds (bench/ctranslate2.sh,
bench/opus_mt_speed.sh). Standard library only.

Each round's JSON lines (bench_decode's or bench/peer_decode.py's) give per mode the mean of its
timed runs ("seconds") and the fastest ("best_seconds"). Two ratios per round, the peer's time over
tfm's (above 1: tfm faster):
- of the means: what a user decoding this batch again and again waits on average;
- of the best runs: each engine at its best. CTranslate2's runs of one round spread far more than
  tfm's (its beam-4 int8 runs 0.7-1.6 s on a 2-core VM where tfm's stayed within 0.36-0.40 s), so
  the means favour tfm; the best runs do not.
The table gives, per mode, the medians over the rounds and the range of the rounds' ratios, for
both; bench/quiet_rounds.py then gives each ratio over the quiet rounds.

  peer_table.py ctranslate2 OUT ROUNDS "f32 int8"                  bench/ctranslate2.sh's table
  peer_table.py opus-mt OUT ROUNDS marian|tfm SIZE THREADS          bench/opus_mt_speed.sh's
(OUT: the script's --out folder; run again on a kept folder, they print its table again.)
"""

import json
import os
import statistics
import sys

import quiet_rounds

SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")  # bench/ct2_convert.py's vocabulary: w<id> otherwise


def read_rounds(out, framework, rounds):
    """[{mode: row}] of FRAMEWORK-round1.jsonl .. FRAMEWORK-roundN.jsonl in the folder `out`."""
    result = []
    for i in range(1, rounds + 1):
        with open(os.path.join(out, f"{framework}-round{i}.jsonl"), encoding="utf-8") as f:
            rows = (json.loads(line) for line in f if line.startswith("{"))
            result.append({r["mode"]: r for r in rows})
    return result


def compare(tfm_rounds, peer_rounds, tfm_mode, peer_mode):
    """A mode's figures over the rounds: medians of both engines' means and best runs, and each
    round's ratio (the peer's time / tfm's) of the means and of the best runs."""
    figures = {}
    for key, field in (("mean", "seconds"), ("best", "best_seconds")):
        ours = [r[tfm_mode][field] for r in tfm_rounds]
        theirs = [r[peer_mode][field] for r in peer_rounds]
        figures[key] = {
            "tfm": statistics.median(ours),
            "peer": statistics.median(theirs),
            "ratios": [b / a for a, b in zip(ours, theirs)],
        }
    return figures


def table(rows, rounds):
    """Markdown lines: rows are (mode, figures from compare, same outputs as text)."""
    lines = [
        f"| mode | tfm s a batch (median of {rounds} rounds' means) | CTranslate2 s a batch | "
        "CTranslate2 / tfm time | rounds' range | tfm best run s | CTranslate2 best run s | "
        "CTranslate2 / tfm, best runs | rounds' range | same outputs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, figures, same in rows:
        cells = [mode]
        for key in ("mean", "best"):
            f = figures[key]
            cells += [f"{f['tfm']:.3f}", f"{f['peer']:.3f}", f"**{f['peer'] / f['tfm']:.2f}x**",
                      f"{min(f['ratios']):.2f}-{max(f['ratios']):.2f}x"]
        lines.append("| " + " | ".join(cells + [same]) + " |")
    return lines


def ratios_for_quiet_rounds(rows):
    """{label: the rounds' ratios} for quiet_rounds.report: each mode's means and best runs."""
    ratios = {}
    for mode, figures, _ in rows:
        ratios[f"{mode}, means"] = figures["mean"]["ratios"]
        ratios[f"{mode}, best runs"] = figures["best"]["ratios"]
    return ratios


def selected_isa(log_path):
    """The instruction set CTranslate2 said it selected (CT2_VERBOSE=1's "Selected ISA: X" in its
    log), or None."""
    if not os.path.exists(log_path):
        return None
    with open(log_path, encoding="utf-8", errors="replace") as f:
        found = [line.rsplit(":", 1)[1].strip() for line in f if "Selected ISA:" in line]
    return found[-1] if found else None


def ctranslate2_table(out, precisions, rounds):
    """bench/ctranslate2.sh's table: tfm's modes "beam4", "beam4-int8", ... against CTranslate2's
    "beam4-f32", "beam4-int8", ...; same outputs: tfm's tokens written in the converter's
    vocabulary against CTranslate2's (the last round's)."""
    tfm, ct2 = read_rounds(out, "tfm", rounds), read_rounds(out, "ct2", rounds)
    rows = []
    for precision in precisions:
        with open(os.path.join(out, f"tfm-{precision}.json"), encoding="utf-8") as f:
            tfm_out = json.load(f)
        with open(os.path.join(out, f"ct2-{precision}.json"), encoding="utf-8") as f:
            ct2_out = json.load(f)
        for ct2_mode in ct2[0]:
            if not ct2_mode.endswith("-" + precision):
                continue
            base = ct2_mode[: -len(precision) - 1]
            tfm_mode = base if precision == "f32" else f"{base}-{precision}"
            ours = [[SPECIALS[i] if i < 4 else f"w{i}" for i in s] for s in tfm_out[tfm_mode]]
            same = sum(x == y for x, y in zip(ours, ct2_out[ct2_mode]))
            rows.append((ct2_mode, compare(tfm, ct2, tfm_mode, ct2_mode), f"{same} of {len(ours)}"))
    return rows


def print_report(out, rows, rounds):
    """The table, CTranslate2's instruction set, then the quiet rounds (bench/quiet_rounds.py)."""
    lines = table(rows, rounds)
    isa = selected_isa(os.path.join(out, "ct2.log"))
    if isa:
        lines += ["", f"CTranslate2's own kernels ran with {isa} (its log: \"Selected ISA\"; "
                  "--ct2-isa sets CT2_FORCE_CPU_ISA)."]
    peaks = os.path.join(out, "peaks.txt")
    lines += quiet_rounds.report(peaks, rounds, ratios_for_quiet_rounds(rows))
    print("\n".join(lines))


def opus_mt_table(out, rounds, ct2_from):
    """bench/opus_mt_speed.sh's table: the same mode names on both sides; outputs compared only
    where CTranslate2's model came from tfm's (CTranslate2's own converter writes another position
    table: docs/CONVERTING.md)."""
    tfm, ct2 = read_rounds(out, "tfm", rounds), read_rounds(out, "ct2", rounds)
    outputs = {}  # (framework, precision): {mode: hypotheses}, each file read once

    def hypotheses(framework, mode):
        key = (framework, mode.rsplit("-", 1)[1])
        if key not in outputs:
            with open(os.path.join(out, f"{key[0]}-{key[1]}.json"), encoding="utf-8") as f:
                outputs[key] = json.load(f)
        return outputs[key][mode]

    rows = []
    for mode in tfm[0]:
        same = "not compared (another position table)"
        if ct2_from == "tfm":
            a, b = hypotheses("tfm", mode), hypotheses("ct2", mode)
            same = f"{sum(x == y for x, y in zip(a, b))} of {len(a)}"
        rows.append((mode, compare(tfm, ct2, mode, mode), same))
    return rows


def main(argv):
    if len(argv) == 4 and argv[0] == "ctranslate2":
        out, rounds = argv[1], int(argv[2])
        print_report(out, ctranslate2_table(out, argv[3].split(), rounds), rounds)
        return 0
    if len(argv) == 6 and argv[0] == "opus-mt":
        out, rounds, ct2_from, size, threads = argv[1], int(argv[2]), argv[3], argv[4], argv[5]
        batch = next(iter(read_rounds(out, "tfm", 1)[0].values()))["batch"]
        converter = ("its own OPUS-MT converter" if ct2_from == "marian"
                     else "tfm convert --to ctranslate2")
        print(f"{size} model, batch {batch}, {threads} threads, CTranslate2's model from "
              f"{converter}, median of {rounds} interleaved rounds\n")
        print_report(out, opus_mt_table(out, rounds, ct2_from), rounds)
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
