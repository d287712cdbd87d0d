"""Shared fixtures of the Python tests: the `tfm` program of the build tree and a tiny model.

The model is trained here through tfm.train for 8 updates (a 1-layer Transformer, d_model 16, a
60-piece BPE vocabulary learned from generated sentences), as tests/public_api_test_util.h does
for the C++ tests: a fraction of a second. Its translations are noise, but they are the model's, and
the CLI must produce the same ones.
"""

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

import tfm

REPOSITORY = Path(__file__).resolve().parents[2]

ENGLISH = ["a", "man", "dog", "runs", "in", "the", "park", "two", "girls", "play", "red", "ball"]
GERMAN = ["ein", "mann", "hund", "läuft", "im", "park", "zwei", "mädchen", "spielen", "rot", "ball"]

SOURCES = [
    "a man runs in the park.",
    "the dog.",
    "two girls play with a red ball in the park.",
    "a red dog runs.",
    "the girls play in the park with two dogs.",
]


def sentences(count, words, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 10))) + "." for _ in range(count)]


def write_lines(path, lines):
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def write_recipe(directory):
    """A tiny recipe and its corpus in directory; returns the recipe's path."""
    directory = Path(directory)
    write_lines(directory / "en.txt", sentences(300, ENGLISH, 1))
    write_lines(directory / "de.txt", sentences(300, GERMAN, 2))
    recipe = directory / "recipe.yaml"
    recipe.write_text(
        "model:\n  layers: 1\n  d_model: 16\n  d_ff: 32\n  heads: 2\n  d_k: 8\n  d_v: 8\n"
        "  max_positions: 64\n"
        f"data:\n  train_source: {directory / 'en.txt'}\n  train_target: {directory / 'de.txt'}\n"
        "  vocab_size: 60\n  max_tokens: 400\n"
        "optimizer:\n  warmup: 4\n"
        "training:\n  log_every: 100\n  threads: 1\n"
        "checkpoints:\n  every_steps: 8\n",
        encoding="utf-8")
    return recipe


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
