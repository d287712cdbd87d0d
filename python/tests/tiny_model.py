"""A tiny model's recipe and corpus, made from generated sentences: shared by the Python tests
(conftest.py) and the check of an installed module (installed_check.py), which runs where pytest and
the source tree's conftest are not wanted.
"""

import random
from pathlib import Path

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
