"""Checks an installed tfm module (the wheel in a venv, the .deb's files, a `cmake --install`
prefix): it is imported from where it was installed, reports the project's version, trains a tiny
model (tiny_model.py, 8 updates), translates with it, reads its weights as numpy arrays, and, given
a `tfm` program, that the program translates the same sentences to the same words.

Usage: python3 installed_check.py --module-dir DIR [--version X.Y.Z] [--cli TFM]

Run it from a folder outside the source tree, with only the installation on the path: this file's
folder (python/tests, for tiny_model.py) is the one part of the checkout it imports from. It ends with
one line "installed tfm ...: ok", or fails with the reason (status 1).
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from tiny_model import SOURCES, write_lines, write_recipe


def fail(message):
    print(f"installed_check.py: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module-dir", required=True, type=Path,
                        help="the folder the package must be imported from (.../tfm)")
    parser.add_argument("--version", help="the version tfm.__version__ must be")
    parser.add_argument("--cli", type=Path, help="a tfm program that must translate the same")
    args = parser.parse_args()

    import tfm
    imported = Path(tfm.__file__).resolve().parent
    if imported != args.module_dir.resolve():
        fail(f"tfm was imported from {imported}, not from {args.module_dir}")
    if Path(tfm._tfm.__file__).resolve().parent != imported:
        fail(f"tfm._tfm was imported from {tfm._tfm.__file__}, not from {imported}")
    if args.version and tfm.__version__ != args.version:
        fail(f"tfm.__version__ is {tfm.__version__}, not {args.version}")
    if abs(tfm.bleu(["a b c d"], ["a b c d"]).score - 100.0) > 1e-9:
        fail("tfm.bleu of a sentence against itself is not 100")

    with tempfile.TemporaryDirectory(prefix="tfm-installed-check-") as scratch:
        scratch = Path(scratch)
        result = tfm.train(write_recipe(scratch), run_dir=scratch / "run", max_steps=8)
        model = Path(result.last_checkpoint)
        translator = tfm.Translator(model, threads=1)
        results = translator.translate_batch(SOURCES, beam_size=2, max_length_offset=12)
        hypotheses = [r.hypotheses[0] for r in results]
        if len(hypotheses) != len(SOURCES) or not all(isinstance(h, str) for h in hypotheses):
            fail(f"translate_batch gave {hypotheses!r} for {len(SOURCES)} sentences")
        config, weights = tfm.load_model(model)
        if config.get("d_model") != 16 or not weights:
            fail(f"load_model gave d_model {config.get('d_model')} and {len(weights)} weights")
        if type(next(iter(weights.values()))).__module__ != "numpy":
            fail("load_model's weights are not numpy arrays")
        if args.cli:
            source = scratch / "source.en"
            write_lines(source, SOURCES)
            done = subprocess.run([str(args.cli), "translate", "-m", str(model), "-i", str(source),
                                   "-b", "2", "--max-length-offset", "12", "--threads", "1"],
                                  capture_output=True, encoding="utf-8")
            if done.returncode != 0:
                fail(f"{args.cli} translate failed ({done.returncode}): {done.stderr}")
            if done.stdout.splitlines() != hypotheses:
                fail(f"{args.cli} translate gave {done.stdout.splitlines()!r}, the module "
                     f"{hypotheses!r}")

    also = f", as {args.cli} translates" if args.cli else ""
    print(f"installed tfm {tfm.__version__} at {imported}: trained a tiny model for 8 updates, "
          f"translated {len(SOURCES)} sentences{also}: ok")


if __name__ == "__main__":
    main()
