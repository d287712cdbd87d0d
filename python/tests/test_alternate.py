"""bench/alternate.py: builds of a benchmark run in alternation and compared round by round, on
figures made up here (the real binaries take minutes and give noisy figures)."""

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import alternate  # noqa: E402


def gemm_json(rates):
    """gemm_bench's JSON for rows of these GFLOP/s."""
    rows = [{"name": name, "FLOP/s": rate * 1e9} for name, rate in rates.items()]
    return json.dumps({"benchmarks": rows})


class FakeRuns:
    """Answers each command with the next figures of its binary, and records the order of the runs."""

    def __init__(self, answers):
        self.answers = {binary: list(texts) for binary, texts in answers.items()}
        self.order = []

    def __call__(self, command):
        self.order.append(command[0])
        return self.answers[command[0]].pop(0)


def test_the_order_alternates_so_that_a_drifting_machine_slows_every_binary_alike():
    assert alternate.order_of(0, ["a", "b", "c"]) == ["a", "b", "c"]
    assert alternate.order_of(1, ["a", "b", "c"]) == ["c", "b", "a"]
    assert alternate.order_of(2, ["a", "b"]) == ["a", "b"]


def test_gemm_rows_compare_rates_within_each_round(capsys):
    # The machine halves its speed in round 2: each round's ratio stays 1.1 for row x.
    runs = FakeRuns({
        "A": [gemm_json({"x": 100.0, "y": 50.0}), gemm_json({"x": 50.0, "y": 50.0}),
              gemm_json({"x": 100.0, "y": 40.0})],
        "B": [gemm_json({"x": 110.0, "y": 45.0}), gemm_json({"x": 55.0, "y": 60.0}),
              gemm_json({"x": 110.0, "y": 40.0})],
    })
    rounds = alternate.main(["gemm", "--rounds", "3", "--filter", "x|y", "A", "B"], run=runs)
    assert runs.order == ["A", "B", "B", "A", "A", "B"]
    assert alternate.ratios(rounds, "A", "B", "x, GFLOP/s") == pytest.approx([1.1, 1.1, 1.1])
    assert alternate.ratios(rounds, "A", "B", "y, GFLOP/s") == pytest.approx([0.9, 1.2, 1.0])
    table = capsys.readouterr().out
    assert "| x, GFLOP/s | B | 110.0 (55.0-110.0) | 1.100 (1.100-1.100) | 1.10 1.10 1.10 |" in table
    assert "| y, GFLOP/s | B | 45.0 (40.0-60.0) | 1.000 (0.900-1.200) | 0.90 1.20 1.00 |" in table


def test_a_row_that_one_build_lacks_is_left_out():
    runs = FakeRuns({"A": [gemm_json({"x": 100.0})], "B": [gemm_json({"x": 200.0, "new": 5.0})]})
    rounds = alternate.main(["gemm", "--rounds", "1", "--filter", ".", "A", "B"], run=runs)
    assert "new" not in alternate.table(rounds, ["A", "B"])
    assert alternate.ratios(rounds, "A", "B", "x, GFLOP/s") == [2.0]


def test_rows_without_flops_compare_their_operations_or_bytes_a_second():
    def rows(op_rate, byte_rate):
        return json.dumps({"benchmarks": [{"name": "step", "OP/s": op_rate * 1e9},
                                          {"name": "quantise", "B/s": byte_rate * 1e9}]})
    runs = FakeRuns({"A": [rows(1000, 20)], "B": [rows(1100, 30)]})
    rounds = alternate.main(["gemm", "--rounds", "1", "--filter", ".", "A", "B"], run=runs)
    assert alternate.ratios(rounds, "A", "B", "step, GOP/s") == pytest.approx([1.1])
    assert alternate.ratios(rounds, "A", "B", "quantise, GB/s") == pytest.approx([1.5])


def test_decode_ratios_are_seconds_of_the_first_over_the_others(capsys):
    line = lambda best, mean: "a log line\n" + json.dumps({"best_seconds": best, "seconds": mean})
    runs = FakeRuns({"A": [line(0.4, 0.5), line(0.8, 1.0)], "B": [line(0.2, 0.25), line(0.5, 0.5)]})
    rounds = alternate.main(["decode", "--rounds", "2", "A", "B", "--", "--beams", "4"], run=runs)
    assert alternate.ratios(rounds, "A", "B", "fastest decode, s") == pytest.approx([2.0, 1.6])
    assert alternate.ratios(rounds, "A", "B", "mean decode, s") == pytest.approx([2.0, 2.0])
    assert "1.800 (1.600-2.000)" in capsys.readouterr().out


def test_train_lists_the_share_outside_the_products_without_a_ratio(capsys):
    line = lambda fastest, mean, outside: json.dumps(
        {"min_seconds_per_step": fastest, "seconds_per_step": mean, "outside_gemm_fraction": outside})
    runs = FakeRuns({"A": [line(0.2, 0.25, 0.24)], "B": [line(0.1, 0.125, 0.2)]})
    rounds = alternate.main(["train", "--rounds", "1", "A", "B"], run=runs)
    assert alternate.ratios(rounds, "A", "B", "fastest step, s") == [2.0]
    table = capsys.readouterr().out
    assert "| outside the products | B | 0.2000 (0.2000-0.2000) |  |  |" in table


def test_the_options_after_the_separator_reach_the_binaries():
    runs = FakeRuns({"A": [json.dumps({"best_seconds": 1.0, "seconds": 1.0})],
                     "B": [json.dumps({"best_seconds": 1.0, "seconds": 1.0})]})
    seen = []
    alternate.main(["decode", "--rounds", "1", "A", "B", "--", "--beams", "4"],
                   run=lambda command: seen.append(command) or runs(command))
    assert seen == [["A", "--beams", "4"], ["B", "--beams", "4"]]


@pytest.mark.parametrize("argv, message", [
    (["gemm", "A", "B"], "gemm needs --filter"),
    (["decode", "A"], "at least two binaries"),
    (["decode", "--rounds", "0", "A", "B"], "--rounds must be at least 1"),
])
def test_bad_options_are_refused_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit):
        alternate.main(argv, run=lambda command: "")
    assert message in capsys.readouterr().err


def fake_binary(folder, name, text, code=0):
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{text}'\nexit {code}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_the_script_runs_binaries_and_names_one_that_fails(tmp_path):
    good = fake_binary(tmp_path, "good", json.dumps({"best_seconds": 0.5, "seconds": 0.5}))
    fast = fake_binary(tmp_path, "fast", json.dumps({"best_seconds": 0.25, "seconds": 0.5}))
    done = subprocess.run([sys.executable, str(BENCH / "alternate.py"), "decode", "--rounds", "2",
                           good, fast], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "2.000 (2.000-2.000)" in done.stdout
    broken = fake_binary(tmp_path, "broken", "no figures", code=3)
    done = subprocess.run([sys.executable, str(BENCH / "alternate.py"), "decode", "--rounds", "1",
                           good, broken], capture_output=True, text=True)
    assert done.returncode != 0 and "broken" in done.stderr and "exited with 3" in done.stderr
    silent = fake_binary(tmp_path, "silent", "no figures")
    done = subprocess.run([sys.executable, str(BENCH / "alternate.py"), "decode", "--rounds", "1",
                           good, silent], capture_output=True, text=True)
    assert done.returncode != 0 and "silent printed no JSON line" in done.stderr
