"""tfm.train: the training loop of `tfm train`, with progress reported to a Python callback."""

import os
import signal
import time
from pathlib import Path

import pytest

import tfm
from conftest import SOURCES, write_lines, write_recipe


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    directory = tmp_path_factory.mktemp("train")
    path = write_recipe(directory)
    lines = (directory / "en.txt").read_text(encoding="utf-8").splitlines()
    write_lines(directory / "valid.en", lines[:20])
    lines = (directory / "de.txt").read_text(encoding="utf-8").splitlines()
    write_lines(directory / "valid.de", lines[:20])
    return path


def test_train_reports_progress_and_its_checkpoint_loads(recipe, tmp_path):
    reports = []
    directory = recipe.parent
    result = tfm.train(recipe, {"training.log_every": 2,
                                "data.valid_source": directory / "valid.en",
                                "data.valid_target": directory / "valid.de",
                                "validation.every_steps": 3,
                                "validation.bleu": True},
                       run_dir=tmp_path / "run", max_steps=6, progress=reports.append)
    assert isinstance(result, tfm.TrainingResult)
    assert (result.steps, result.interrupted) == (6, False)
    assert result.elapsed_seconds > 0
    train = [r for r in reports if r.kind == "train"]
    valid = [r for r in reports if r.kind == "valid"]
    assert [r.step for r in train] == [2, 4, 6]
    assert [r.step for r in valid] == [3, 6]
    for r in train:
        assert r.loss > 0 and r.perplexity > 1 and r.learning_rate > 0
        assert r.tokens_per_second > 0 and r.epoch == 1 and r.bleu == -1
    for r in valid:
        assert r.loss > 0 and 0 <= r.bleu <= 100
    assert result.last_valid_loss == valid[-1].loss
    assert result.last_valid_bleu == valid[-1].bleu

    translator = tfm.Translator(result.last_checkpoint)
    assert translator.layers == 1
    assert len(translator.translate_batch(SOURCES[:2], max_length_offset=5)) == 2


def test_overrides_as_assignments_and_resuming(recipe, tmp_path):
    first = tfm.train(recipe, ["training.log_every=100"], run_dir=tmp_path / "run", max_steps=3)
    assert first.steps == 3
    resumed = tfm.train(recipe, run_dir=tmp_path / "run", max_steps=5, resume=True)
    assert resumed.steps == 5


def test_an_exception_in_the_callback_stops_the_run(recipe, tmp_path):
    def stop(report):
        if report.step >= 2:
            raise ValueError("enough at step %d" % report.step)

    with pytest.raises(ValueError, match="enough at step 2"):
        tfm.train(recipe, {"training.log_every": 1}, run_dir=tmp_path / "run", max_steps=6,
                  progress=stop)


def test_ctrl_c_saves_a_checkpoint_and_returns_as_tfm_train_does(recipe, tmp_path):
    # SIGINT while the loop runs (sent from the callback, so that it arrives mid-run): the run
    # finishes its update, saves a checkpoint and returns interrupted; Python's own handler is
    # back afterwards.
    def interrupt(report):
        if report.step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    result = tfm.train(recipe, {"training.log_every": 1}, run_dir=tmp_path / "run",
                       max_steps=1000, progress=interrupt)
    assert result.interrupted
    assert 3 <= result.steps < 1000
    assert Path(result.last_checkpoint, "model.safetensors").is_file()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises before this ends


def test_training_errors(recipe, tmp_path):
    with pytest.raises(tfm.Error, match="no-such-recipe.yaml"):
        tfm.train(tmp_path / "no-such-recipe.yaml")
    with pytest.raises(tfm.Error, match="training.colour"):
        tfm.train(recipe, {"training.colour": "red"}, run_dir=tmp_path / "run")
    with pytest.raises(TypeError):
        tfm.train(recipe, "training.log_every=2")


def test_budgets_that_are_not_numbers_or_negative_are_errors(recipe, tmp_path):
    # Issue 43 D13: NaN, -2 and -5 were dropped silently, leaving the run without a limit.
    for options in ({"max_minutes": float("nan")}, {"max_minutes": -5.0},
                    {"max_minutes": float("inf")}, {"max_steps": -2}, {"threads": -7}):
        with pytest.raises(tfm.Error, match="must be"):
            tfm.train(recipe, run_dir=tmp_path / "run", **options)
    assert not (tmp_path / "run").exists()
