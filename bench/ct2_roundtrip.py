#!/usr/bin/python3
"""tfm -> CTranslate2 round trip: the same translations in CTranslate2 as in tfm.

  PYTHONPATH=build/release/python python3 bench/ct2_roundtrip.py --model MODEL_DIR --input FILE
      [--tfm build/release/tfm] [--beam 4] [--max-length 32] [--ct2 BUILD_DIR]

Exports MODEL_DIR with `tfm convert --to ctranslate2` (float32 and --quantization int8), translates the
lines of FILE with tfm's Python module and with CTranslate2's (`ctranslate2.Translator`, on the same
pieces: tfm's tokenize, </s> appended by CTranslate2 as the exported config.json says), and reports how
many outputs are identical: all of them in float32 (the same weights and search), and in int8 the
agreement CTranslate2 has with itself across its own int8 and float32 runs.

The searches are set alike: beam --beam, length penalty 0 (tfm's is ((5 + n) / 6)^alpha,
CTranslate2's n^alpha: with alpha 0 both rank by the sum of log p), no minimum length (CTranslate2's
default min_decoding_length is 1) and --max-length tokens at most in both (tfm's default is the
source's length + 50, CTranslate2's 256).

Exit status 1 when a float32 output differs. --ct2: see bench/ct2_common.py (skips with a line,
status 0, when CTranslate2 is absent).
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ct2_common  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--tfm", default="build/release/tfm")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=32)
    ct2_common.add_argument(parser)
    args = parser.parse_args()
    ctranslate2 = ct2_common.import_ctranslate2(args.ct2, "ct2_roundtrip.py")
    if ctranslate2 is None:
        return 0
    import tfm

    lines = [line.rstrip("\n") for line in open(args.input, encoding="utf-8")]
    sources = None
    ours = {}
    for precision in ("f32", "int8"):
        translator = tfm.Translator(args.model, compute_type=precision, threads=2)
        sources = [translator.tokenize(line) for line in lines]
        # tfm encodes the text itself (</s> appended for an imported model); CTranslate2 gets the
        # pieces and appends </s> as the exported config.json's add_source_eos says.
        ours[precision] = [r.tokens[0] for r in translator.translate_batch(
            lines, beam_size=args.beam, length_penalty=0, max_length=args.max_length)]
    theirs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for quantization in ("float32", "int8"):
            out = os.path.join(tmp, quantization)
            subprocess.run([args.tfm, "convert", "--to", "ctranslate2", "-m", args.model, "-o", out,
                            "--quantization", quantization], check=True)
            ct2 = ctranslate2.Translator(out, device="cpu", intra_threads=2, compute_type=(
                "float32" if quantization == "float32" else "int8_float32"))
            results = ct2.translate_batch(sources, beam_size=args.beam, length_penalty=0,
                                          min_decoding_length=0,
                                          max_decoding_length=args.max_length)
            theirs[quantization] = [r.hypotheses[0] for r in results]

    def agree(a, b):
        return f"{sum(x == y for x, y in zip(a, b))}/{len(lines)}"

    n = len(lines)
    same = sum(a == b for a, b in zip(ours["f32"], theirs["float32"]))
    print(f"{os.path.basename(os.path.normpath(args.model))}: float32: {same}/{n} outputs identical "
          f"to tfm's f32; int8: CTranslate2 int8 vs its own float32 {agree(theirs['int8'], theirs['float32'])}, "
          f"tfm int8 vs tfm f32 {agree(ours['int8'], ours['f32'])}, "
          f"CTranslate2 int8 vs tfm int8 {agree(theirs['int8'], ours['int8'])}")
    for i, (a, b) in enumerate(zip(ours["f32"], theirs["float32"])):
        if a != b:
            print(f"  line {i}: tfm {' '.join(a)} | CTranslate2 {' '.join(b)}")
    return 0 if same == n else 1


if __name__ == "__main__":
    sys.exit(main())
