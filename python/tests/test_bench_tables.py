"""The bench scripts' tables beside a peer (bench/peer_table.py, bench/quiet_rounds.py) on rounds
written here: the ratios of the means and of the best runs, the quiet rounds, the outputs compared
in the converter's vocabulary, and CTranslate2's instruction set read from its log. (The scripts
themselves need CTranslate2 and minutes of decoding; their tables must not mislead either.)"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import peer_table  # noqa: E402
import quiet_rounds  # noqa: E402


def row(mode, seconds, best):
    return {"mode": mode, "seconds": seconds, "best_seconds": best, "batch": 2}


def write_rounds(folder, framework, rounds):
    """rounds: [[row, ...] per round] -> FRAMEWORK-roundN.jsonl, with a stray non-JSON line."""
    for i, rows in enumerate(rounds, start=1):
        lines = ["a log line that is not JSON"] + [json.dumps(r) for r in rows]
        (folder / f"{framework}-round{i}.jsonl").write_text("\n".join(lines) + "\n")


def test_compare_gives_the_ratios_of_the_means_and_of_the_best_runs():
    tfm = [{"beam4": row("beam4", 1.0, 0.9)}, {"beam4": row("beam4", 2.0, 1.8)},
           {"beam4": row("beam4", 1.5, 1.4)}]
    peer = [{"beam4-f32": row("beam4-f32", 3.0, 1.8)}, {"beam4-f32": row("beam4-f32", 4.0, 3.6)},
            {"beam4-f32": row("beam4-f32", 3.3, 2.1)}]
    figures = peer_table.compare(tfm, peer, "beam4", "beam4-f32")
    assert figures["mean"]["tfm"] == 1.5 and figures["mean"]["peer"] == 3.3
    assert figures["mean"]["ratios"] == pytest.approx([3.0, 2.0, 2.2])
    assert figures["best"]["tfm"] == 1.4 and figures["best"]["peer"] == 2.1
    assert figures["best"]["ratios"] == pytest.approx([2.0, 2.0, 1.5])
    lines = peer_table.table([("beam4-f32", figures, "2 of 2")], 3)
    assert lines[2] == ("| beam4-f32 | 1.500 | 3.300 | **2.20x** | 2.00-3.00x | 1.400 | 2.100 | "
                        "**1.50x** | 1.50-2.00x | 2 of 2 |")


def test_a_round_is_quiet_when_its_peaks_hold_still_near_the_best(tmp_path):
    peaks = tmp_path / "peaks.txt"
    # 1: steady and near the best; 2: moved 10% within the round; 3: steady but 20% below the best.
    peaks.write_text("1 400 410\n2 360 400\n3 330 330\n")
    assert quiet_rounds.quiet_rounds(quiet_rounds.read_peaks(peaks), 3, 410) == [1]
    lines = quiet_rounds.report(peaks, 3, {"beam4-f32, best runs": [1.9, 2.5, 2.6]})
    assert "Quiet rounds" in lines[1] and "1 of 3 (1)." in lines[1]
    assert lines[2] == "- beam4-f32, best runs: the quiet rounds' ratios 1.90-1.90x"
    # A round without its two peaks: no verdict at all.
    peaks.write_text("1 400 410\n2 400\n")
    assert quiet_rounds.quiet_rounds(quiet_rounds.read_peaks(peaks), 2, 410) is None


def test_the_ctranslate2_table_from_a_run_folder(tmp_path):
    write_rounds(tmp_path, "tfm", [[row("beam4", 1.0, 0.8), row("beam4-int8", 0.5, 0.5)],
                                   [row("beam4", 1.2, 1.0), row("beam4-int8", 0.6, 0.4)]])
    write_rounds(tmp_path, "ct2", [[row("beam4-f32", 2.0, 1.6), row("beam4-int8", 1.5, 1.0)],
                                   [row("beam4-f32", 2.6, 1.8), row("beam4-int8", 1.5, 1.2)]])
    # tfm writes token ids; the converter's vocabulary names them <pad> <unk> <s> </s> w4 w5 ...
    (tmp_path / "tfm-f32.json").write_text(json.dumps({"beam4": [[5, 3], [6, 3]]}))
    (tmp_path / "ct2-f32.json").write_text(
        json.dumps({"beam4-f32": [["w5", "</s>"], ["w7", "</s>"]]}))
    (tmp_path / "tfm-int8.json").write_text(json.dumps({"beam4-int8": [[5, 3], [6, 3]]}))
    (tmp_path / "ct2-int8.json").write_text(
        json.dumps({"beam4-int8": [["w5", "</s>"], ["w6", "</s>"]]}))
    (tmp_path / "peaks.txt").write_text("1 400 400\n2 400 300\n")
    (tmp_path / "ct2.log").write_text("[info] CPU: AuthenticAMD\n[info]  - Selected ISA: AVX512\n")
    rows = peer_table.ctranslate2_table(str(tmp_path), ["f32", "int8"], 2)
    assert [(mode, same) for mode, _, same in rows] == [("beam4-f32", "1 of 2"),
                                                         ("beam4-int8", "2 of 2")]
    assert rows[0][1]["best"]["ratios"] == pytest.approx([2.0, 1.8])
    printed = subprocess.run([sys.executable, str(BENCH / "peer_table.py"), "ctranslate2",
                              str(tmp_path), "2", "f32 int8"], capture_output=True, text=True,
                             check=True).stdout
    assert ("| beam4-f32 | 1.100 | 2.300 | **2.09x** | 2.00-2.17x | 0.900 | 1.700 | **1.89x** |"
            in printed)
    assert "ran with AVX512" in printed
    assert "1 of 2 (1)." in printed
    assert "- beam4-int8, best runs: the quiet rounds' ratios 2.00-2.00x" in printed


def test_the_opus_mt_table_names_what_it_did_not_compare(tmp_path):
    write_rounds(tmp_path, "tfm", [[row("greedy-f32", 1.0, 1.0)]])
    write_rounds(tmp_path, "ct2", [[row("greedy-f32", 3.0, 2.0)]])
    (tmp_path / "peaks.txt").write_text("1 400 400\n")
    printed = subprocess.run([sys.executable, str(BENCH / "peer_table.py"), "opus-mt",
                              str(tmp_path), "1", "marian", "opus-mt", "2"],
                             capture_output=True, text=True, check=True).stdout
    assert printed.startswith("opus-mt model, batch 2, 2 threads, CTranslate2's model from its own")
    assert "**3.00x** | 3.00-3.00x | 1.000 | 2.000 | **2.00x** |" in printed
    assert "not compared (another position table)" in printed
    assert "Selected ISA" not in printed and "ran with" not in printed  # no ct2.log: nothing said


def test_wrong_arguments_print_the_usage():
    done = subprocess.run([sys.executable, str(BENCH / "peer_table.py"), "nonsense"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "peer_table.py ctranslate2 OUT ROUNDS" in done.stderr


def test_the_peak_of_gemm_benchs_report_is_its_fastest_repetition():
    report = {"benchmarks": [
        {"name": "peak_fma/real_time", "run_type": "iteration", "FLOP/s": 4.0e11},
        {"name": "peak_fma/real_time", "run_type": "iteration", "FLOP/s": 4.3e11},
        {"name": "peak_fma/real_time_mean", "run_type": "aggregate", "FLOP/s": 4.5e11},
        {"name": "peak_dot_bf16/real_time", "run_type": "iteration", "FLOP/s": 8.1e11}]}

    def peak(dtype, text):
        return subprocess.run([sys.executable, str(BENCH / "quiet_rounds.py"), "peak", dtype],
                              input=text, capture_output=True, text=True, check=True).stdout.strip()
    assert peak("f32", json.dumps(report)) == "430.0"  # not the aggregate's 450
    assert peak("bf16", json.dumps(report)) == "810.0"
    assert peak("bf16", json.dumps({"benchmarks": report["benchmarks"][:3]})) == ""
    assert peak("f32", "") == ""  # gemm_bench printed nothing: no peak, no error


def test_the_suites_decoding_rows_give_the_best_runs_ratio_too(tmp_path):
    base = {"suite": "decode_base", "device": "cpu", "mode": "greedy", "precision": "f32",
            "vocab": 32000, "batch": 32, "src_len": 25, "out_len": 25, "runs": 3, "warmup": 1,
            "peak_rss_mb": 600.0}
    tfm = dict(base, framework="tfm", seconds=0.40, best_seconds=0.38,
               target_tokens_per_second=2000.0, outside_gemm_fraction=0.16)
    torch = dict(base, framework="pytorch", seconds=1.20, best_seconds=1.046,
                 target_tokens_per_second=2000.0 / 3)
    path = tmp_path / "suite.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ({"suite": "settings"}, tfm, torch)) + "\n")
    printed = subprocess.run([sys.executable, str(BENCH / "suite_table.py"), "table", str(path)],
                             capture_output=True, text=True, check=True).stdout
    rows = {line.split("|")[2].strip(): [c.strip() for c in line.split("|")[3:-1]]
            for line in printed.splitlines() if line.startswith("| decode base greedy")}
    assert rows["target tokens/s"][0] == "2000" and rows["target tokens/s"][6] == "3.00x"
    best = rows["s per batch, best run"]
    assert best[0] == "0.380" and best[4] == "1.05" and best[6] == "2.75x"  # 1.046 / 0.38


def test_the_attention_rows_say_when_their_inputs_came_from_memory():
    import suite_table
    label = suite_table.product_label
    hot = {"kind": "attention_train", "B": 128, "heads": 4, "T": 16, "d": 64, "flushMB": 0}
    assert label(hot) == ("attention, forward + backward (our tile kernels): 128x4 heads, 16 tokens, "
                          "head width 64")
    assert label(dict(hot, flushMB=64)).endswith(
        "head width 64, inputs from memory (64 MB written between)")
    old = dict(hot)
    del old["flushMB"]  # a report from before the argument
    assert label(old) == label(hot)


def test_the_opus_mt_table_compares_outputs_when_ctranslate2s_model_came_from_tfm(tmp_path):
    write_rounds(tmp_path, "tfm", [[row("greedy-f32", 1.0, 1.0), row("greedy-int8", 0.5, 0.5)]])
    write_rounds(tmp_path, "ct2", [[row("greedy-f32", 2.0, 2.0), row("greedy-int8", 1.0, 1.0)]])
    (tmp_path / "peaks.txt").write_text("1 400 400\n")
    (tmp_path / "tfm-f32.json").write_text(json.dumps({"greedy-f32": [["a", "b"], ["c"]]}))
    (tmp_path / "ct2-f32.json").write_text(json.dumps({"greedy-f32": [["a", "b"], ["d"]]}))
    (tmp_path / "tfm-int8.json").write_text(json.dumps({"greedy-int8": [["a"], ["c"]]}))
    (tmp_path / "ct2-int8.json").write_text(json.dumps({"greedy-int8": [["a"], ["c"]]}))
    rows = peer_table.opus_mt_table(str(tmp_path), 1, "tfm")
    assert [(mode, same) for mode, _, same in rows] == [("greedy-f32", "1 of 2"),
                                                         ("greedy-int8", "2 of 2")]
