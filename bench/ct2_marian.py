#!/usr/bin/python3
"""tfm's Marian converter against CTranslate2's own (OPUS-MT) converter, on the Marian fixtures.

  PYTHONPATH=build/release/python python3 bench/ct2_marian.py [--fixtures tests/fixtures/convert]
      [--tfm build/release/tfm] [--beam 4] [--max-length 16] [--ct2 BUILD_DIR]

For each Marian fixture (marian: post-norm, swish, tied; marian_prenorm: pre-norm, relu, untied) three
versions of the same weights are compared:

  as published   the fixture itself: `tfm convert --from marian`, and CTranslate2 v4.8.1's
                 converters/opus_mt.py (its Marian converter) on the same folder;
  same positions the fixture with Marian's own position table ([sin | cos], log(10000)/(d/2 - 1),
                 src/graph/node_initializers.cpp) stored as the array Wpos, which both converters
                 take as the position table (and both still scale the embeddings by sqrt(d));
  same epsilon   that, with CTranslate2's config.json given layer_norm_epsilon 1e-6 (Marian's
                 transformer.h; CTranslate2's converter writes none and CTranslate2 then uses 1e-5).

For each: CTranslate2's logits of the fixture's teacher-forced batch (return_logits_vocab) against
reference.safetensors, the float64 computation of Marian's semantics that tests/test_convert.cc
holds tfm's logits to (relative error <= 2e-5); the log-probabilities tfm's score_batch and
CTranslate2's score_batch give the fixture sentences' pairs; and the beam outputs of both on the
fixture sentences (length penalty 0, at most --max-length tokens). Exit status 1 when the "same
epsilon" version differs (logits beyond 2e-5 of the reference or any output). --ct2: see
bench/ct2_common.py (skips with a line, status 0, when CTranslate2 is absent).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ct2_common  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from read_safetensors import read_safetensors  # noqa: E402

FIXTURES = ("marian", "marian_prenorm")
# tools/make_convert_fixtures.py's sentences: sources (English) and targets (German) pairwise.
PAIRS = [("the cat sat on the mat", "die katze sass auf der matte"),
         ("a dog ran in the park", "der hund lief im park"),
         ("we translate small sentences", "wir uebersetzen kleine saetze"),
         ("models from other toolkits", "modelle aus anderen werkzeugen")]
SOURCES = [s for s, _ in PAIRS] + ["the dog sat in the park", "small models", "der hund", "we"]


def marian_positions(rows, d):
    """Marian's sinusoidalPositionEmbeddings: [sin | cos] with log(10000) / (d/2 - 1)."""
    half = d // 2
    rate = np.exp(np.arange(half, dtype=np.float64) * -(np.log(10000.0) / (half - 1)))
    angle = np.arange(rows, dtype=np.float64)[:, None] * rate[None, :]
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1).astype(np.float32)


def with_positions(fixture, out):
    """A copy of the fixture folder whose .npz also holds Wpos = Marian's own table."""
    shutil.copytree(fixture, out)
    npz = os.path.join(out, "opus.spm.transformer.npz")
    arrays = dict(np.load(npz))
    d = (arrays["Wemb"] if "Wemb" in arrays else arrays["encoder_Wemb"]).shape[1]
    arrays["Wpos"] = marian_positions(128, d)
    np.savez(npz, **arrays)
    return out


def ct2_model(ctranslate2, folder, out, epsilon=None):
    ctranslate2.converters.OpusMTConverter(folder).convert(out, quantization="float32")
    if epsilon is not None:
        path = os.path.join(out, "config.json")
        config = json.load(open(path))
        config["layer_norm_epsilon"] = epsilon
        json.dump(config, open(path, "w"), indent=2)
    return ctranslate2.Translator(out, device="cpu", compute_type="float32", intra_threads=2)


def logits_error(ct2, vocab, name):
    """max |CTranslate2's logit - reference| / max |reference| over the fixture's batch."""
    ref, _ = read_safetensors(os.path.join(ARGS.fixtures, "reference.safetensors"))
    src, tgt_in, want = (ref[f"{name}.{k}"].numpy() for k in ("src", "tgt_in", "logits"))
    pad = len(vocab)  # tfm's appended <pad> (the decoder start): not a Marian token
    sources = [[vocab[i] for i in row if i != pad] for row in src]
    sources = [s[:-1] if s[-1] == "</s>" else s for s in sources]  # CTranslate2 appends </s>
    prefixes = [[vocab[i] for i in row[1:]] for row in tgt_in]
    results = ct2.translate_batch(sources, prefixes, beam_size=1, min_decoding_length=0,
                                  max_decoding_length=tgt_in.shape[1], return_logits_vocab=True)
    got = np.stack([np.stack([np.asarray(v).reshape(-1) for v in r.logits[0]]) for r in results])
    return float(np.abs(got - want).max() / np.abs(want).max())


def compare(name, label, tfm_dir, ct2, vocab, tfm_module):
    translator = tfm_module.Translator(tfm_dir, threads=2)
    error = logits_error(ct2, vocab, name)
    ours = translator.score_batch([s for s, _ in PAIRS], [t for _, t in PAIRS])
    theirs = ct2.score_batch([translator.tokenize(s) for s, _ in PAIRS],
                             [r.tokens[:-1] for r in ours])
    same_tokens = all(list(a.tokens) == list(b.tokens) for a, b in zip(ours, theirs))
    lp = float("inf")
    if all(len(a.log_probs) == len(b.log_probs) for a, b in zip(ours, theirs)):
        lp = max(float(np.abs(np.asarray(a.log_probs) - np.asarray(b.log_probs)).max())
                 for a, b in zip(ours, theirs))
    hyp_ours = [r.tokens[0] for r in translator.translate_batch(
        SOURCES, beam_size=ARGS.beam, length_penalty=0, max_length=ARGS.max_length)]
    hyp_theirs = [r.hypotheses[0] for r in ct2.translate_batch(
        [translator.tokenize(s) for s in SOURCES], beam_size=ARGS.beam, length_penalty=0,
        min_decoding_length=0, max_decoding_length=ARGS.max_length)]
    same = sum(a == b for a, b in zip(hyp_ours, hyp_theirs))
    print(f"| {name} | {label} | {error:.1e} | {lp:.1e}{'' if same_tokens else ' (tokens differ)'} "
          f"| {same} of {len(SOURCES)} |")
    return error <= 2e-5 and same == len(SOURCES) and same_tokens


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", default="tests/fixtures/convert")
    parser.add_argument("--tfm", default="build/release/tfm")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=16)
    ct2_common.add_argument(parser)
    ARGS = parser.parse_args()
    ctranslate2 = ct2_common.import_ctranslate2(ARGS.ct2, "ct2_marian.py")
    if ctranslate2 is None:
        return 0
    import tfm
    from ctranslate2.converters.marian import load_vocab

    print("| fixture | version | CTranslate2 logits vs Marian's (float64), relative | "
          "score_batch log p, tfm vs CTranslate2, max abs | beam outputs identical |")
    print("|---|---|---:|---:|---:|")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in FIXTURES:
            fixture = os.path.join(ARGS.fixtures, name)
            vocab = load_vocab(os.path.join(fixture, "opus.spm.vocab.yml"))
            folders = {"as published": fixture,
                       "same positions": with_positions(fixture, os.path.join(tmp, name + "-wpos"))}
            for label, epsilon in (("as published", None), ("same positions", None),
                                   ("same epsilon", 1e-6)):
                folder = folders["same positions" if label == "same epsilon" else label]
                tag = f"{name}-{label.replace(' ', '-')}"
                tfm_dir = os.path.join(tmp, "tfm-" + tag)
                subprocess.run([ARGS.tfm, "convert", "--from", "marian", "-i", folder, "-o", tfm_dir],
                               check=True, stdout=subprocess.DEVNULL)
                ct2 = ct2_model(ctranslate2, folder, os.path.join(tmp, "ct2-" + tag), epsilon)
                agree = compare(name, label, tfm_dir, ct2, vocab, tfm)
                if label == "same epsilon":
                    ok = ok and agree
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
