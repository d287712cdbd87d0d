#!/usr/bin/python3
"""tfm -> CTranslate2 round trip: the same translations in CTranslate2 as in tfm.

  PYTHONPATH=build/release/python python3 bench/ct2_roundtrip.py --model MODEL_DIR --input FILE
      [--tfm build/release/tfm] [--beam 4]

Exports MODEL_DIR with `tfm convert --to ctranslate2` (float32 and --quantization int8), translates the
lines of FILE with tfm's Python module and with CTranslate2's (`ctranslate2.Translator`, on the same
pieces: tfm's tokenize, </s> appended by CTranslate2 as the exported config.json says) and reports how
many outputs are identical: all of them in float32 (the same weights and search), and in int8 the
agreement CTranslate2 has with itself across its own int8 and float32 runs.

Skips (exit status 0, a line saying so) when the ctranslate2 module is not installed: it is not built
here yet (OpenNMT/CTranslate2 v4.8.1 from its sources).
"""

import argparse
import os
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--tfm", default="build/release/tfm")
    parser.add_argument("--beam", type=int, default=4)
    args = parser.parse_args()
    try:
        import ctranslate2
    except ImportError:
        print("ct2_roundtrip.py: skipped: the ctranslate2 Python module is not installed")
        return 0
    import tfm

    lines = [line.rstrip("\n") for line in open(args.input, encoding="utf-8")]
    translator = tfm.Translator(args.model)
    sources = [translator.tokenize(line) for line in lines]
    # tfm encodes the text itself (</s> appended for an imported model); CTranslate2 gets the pieces
    # and appends </s> as the exported config.json's add_source_eos says.
    ours = [r.tokens[0] for r in translator.translate_batch(lines, beam_size=args.beam)]
    with tempfile.TemporaryDirectory() as tmp:
        outputs = {}
        for quantization in ("float32", "int8"):
            out = os.path.join(tmp, quantization)
            subprocess.run([args.tfm, "convert", "--to", "ctranslate2", "-m", args.model, "-o", out,
                            "--quantization", quantization], check=True)
            ct2 = ctranslate2.Translator(out, device="cpu", compute_type=(
                "float32" if quantization == "float32" else "int8_float32"))
            results = ct2.translate_batch(sources, beam_size=args.beam)
            outputs[quantization] = [r.hypotheses[0] for r in results]
    same = sum(a == b for a, b in zip(ours, outputs["float32"]))
    int8_self = sum(a == b for a, b in zip(outputs["int8"], outputs["float32"]))
    int8_ours = sum(a == b for a, b in zip(outputs["int8"], ours))
    print(f"float32: {same}/{len(lines)} outputs identical to tfm's")
    print(f"int8: {int8_ours}/{len(lines)} identical to tfm's f32; CTranslate2 int8 vs its own "
          f"float32: {int8_self}/{len(lines)}")
    return 0 if same == len(lines) else 1


if __name__ == "__main__":
    sys.exit(main())
