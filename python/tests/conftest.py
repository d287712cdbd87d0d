"""Shared fixtures of the Python tests: the `tfm` program of the build tree and a tiny model.

The model is trained here through tfm.train for 8 updates (a 1-layer Transformer, d_model 16, a
60-piece BPE vocabulary learned from generated sentences; its recipe: tiny_model.py), as
tests/public_api_test_util.h does for the C++ tests: a fraction of a second. Its translations are
noise, but they are the model's, and the CLI must produce the same ones.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import tfm
from tiny_model import ENGLISH, GERMAN, SOURCES, sentences, write_lines, write_recipe  # noqa: F401

REPOSITORY = Path(__file__).resolve().parents[2]

@pytest.fixture(scope="session")
def cli():
    """The path of the `tfm` program (CTest sets TFM_CLI; else the release build's)."""
    path = Path(os.environ.get("TFM_CLI", REPOSITORY / "build" / "release" / "tfm"))
    assert path.is_file(), f"no tfm program at {path}: build it, or set TFM_CLI"
    return path


@pytest.fixture(scope="session")
def run_cli(cli):
    """Runs `tfm ARGS...`; returns its standard output (a failure fails the test with stderr)."""
    def run(*args, input_text=None):
        done = subprocess.run([str(cli), *map(str, args)], input=input_text, capture_output=True,
                              encoding="utf-8")
        assert done.returncode == 0, f"tfm {' '.join(map(str, args))}: {done.stderr}"
        return done.stdout
    return run


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """A tiny trained model directory (config.json, model.safetensors, vocab.model)."""
    directory = tmp_path_factory.mktemp("tiny")
    result = tfm.train(write_recipe(directory), run_dir=directory / "run", max_steps=8)
    model = directory / "model"
    shutil.copytree(result.last_checkpoint, model)
    return model


@pytest.fixture(scope="session")
def translator(model_dir):
    return tfm.Translator(model_dir, threads=1)
