#!/usr/bin/python3
"""Writes an OPUS-MT-shaped Marian model folder with random weights, for bench/opus_mt_speed.sh.

  python3 tools/random_marian_model.py --out DIR [--size opus-mt|tiny] [--seed 45]
      [--sources N --src-len L --sources-out FILE]

--size opus-mt is the shape of the OPUS-MT models (Helsinki-NLP/opus-mt-en-de: Marian `transformer`,
6 + 6 layers, d_model 512, 8 heads, FFN 2048, swish, post-norm "dan", tied embeddings of a joint
vocabulary of 58,100 pieces); --size tiny is the same layout with 1 + 1 layers, d_model 32, 2 heads,
FFN 64 and 500 pieces (a smoke run). The folder is laid out as an OPUS-MT download and as
tools/make_convert_fixtures.py's marian/ fixture (the names, shapes and special:model.yml it
documents): opus.spm.transformer.npz (numpy.savez of float32 arrays), opus.spm.vocab.yml (</s> 0,
<unk> 1, then the fixture's pieces, then filler pieces "▁x<i>" up to the vocabulary size),
decoder.yml, and the fixture's source.spm and target.spm (text only ever uses the fixture's pieces;
the benchmark gives token lists).

Weights: normal(0, 1/sqrt(fan_in)) for the products, normal(0, 1/sqrt(d)) for the embeddings,
LayerNorm scales 1 and biases 0, other biases normal(0, 0.02). Random weights decode noise: what
matters is the shape, and the same weights reaching both frameworks.

--sources-out writes N lines of L - 1 random pieces (not </s>, <unk>), the sources of the benchmark
(L counts the </s> that both frameworks append).
"""

import argparse
import os
import shutil

import numpy as np

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                       "convert", "marian")
SIZES = {"opus-mt": dict(layers=6, d=512, heads=8, d_ff=2048, vocab=58100),
         "tiny": dict(layers=1, d=32, heads=2, d_ff=64, vocab=500)}


def fixture_pieces():
    """The fixture's id table in id order (tools/make_convert_fixtures.py writes plain or quoted)."""
    pieces = []
    for line in open(os.path.join(FIXTURE, "opus.spm.vocab.yml"), encoding="utf-8"):
        token, _ = line.rstrip("\n").rsplit(":", 1)
        if token.startswith('"') and token.endswith('"'):
            token = token[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        pieces.append(token)
    return pieces


def model_yml(s):
    return "\n".join([
        "bert-train-type-embeddings: true", "dec-cell: gru", f"dec-depth: {s['layers']}",
        f"dim-emb: {s['d']}", f"dim-vocabs:\n  - {s['vocab']}\n  - {s['vocab']}",
        f"enc-depth: {s['layers']}", "layer-normalization: false", "right-left: false",
        "skip: false", "tied-embeddings: false", "tied-embeddings-all: true",
        "tied-embeddings-src: false", "transformer-aan-activation: swish",
        "transformer-decoder-autoreg: self-attention", f"transformer-dim-ffn: {s['d_ff']}",
        "transformer-ffn-activation: swish", "transformer-ffn-depth: 2",
        "transformer-guided-alignment-layer: last", f"transformer-heads: {s['heads']}",
        "transformer-no-projection: false", "transformer-postprocess: dan",
        "transformer-postprocess-emb: d", 'transformer-postprocess-top: ""',
        'transformer-preprocess: ""', "transformer-train-position-embeddings: false",
        "type: transformer", "version: v1.9.56 (2020-04-21)", ""])


def random_weights(rng, s):
    d, d_ff, vocab = s["d"], s["d_ff"], s["vocab"]

    def normal(*shape, std):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    w = {"Wemb": normal(vocab, d, std=d ** -0.5),
         "decoder_ff_logit_out_b": normal(1, vocab, std=0.02)}

    def norm(prefix):
        w[prefix + "_ln_scale"] = np.ones((1, d), np.float32)
        w[prefix + "_ln_bias"] = np.zeros((1, d), np.float32)

    def attention(prefix):
        for n in "qkvo":
            w[f"{prefix}_W{n}"] = normal(d, d, std=d ** -0.5)
            w[f"{prefix}_b{n}"] = normal(1, d, std=0.02)
        norm(prefix + "_Wo")

    for i in range(1, s["layers"] + 1):
        for side in ("encoder", "decoder"):
            p = f"{side}_l{i}"
            attention(p + "_self")
            if side == "decoder":
                attention(p + "_context")
            w[p + "_ffn_W1"], w[p + "_ffn_b1"] = normal(d, d_ff, std=d ** -0.5), normal(1, d_ff, std=0.02)
            w[p + "_ffn_W2"], w[p + "_ffn_b2"] = normal(d_ff, d, std=d_ff ** -0.5), normal(1, d, std=0.02)
            norm(p + "_ffn_ffn")
    return w


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--size", choices=sorted(SIZES), default="opus-mt")
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--sources", type=int, default=32)
    parser.add_argument("--src-len", type=int, default=25)
    parser.add_argument("--sources-out", default="")
    args = parser.parse_args()
    s = SIZES[args.size]
    rng = np.random.default_rng(args.seed)
    pieces = fixture_pieces()
    fixture_size = len(pieces)
    assert pieces[:2] == ["</s>", "<unk>"], "the fixture's table starts with </s> and <unk>"
    pieces += [f"▁x{i}" for i in range(len(pieces), s["vocab"])]
    os.makedirs(args.out, exist_ok=True)
    arrays = random_weights(rng, s)
    arrays["special:model.yml"] = np.frombuffer(model_yml(s).encode() + b"\0", dtype=np.int8)
    np.savez(os.path.join(args.out, "opus.spm.transformer.npz"), **arrays)
    table = open(os.path.join(FIXTURE, "opus.spm.vocab.yml"), encoding="utf-8").read()
    with open(os.path.join(args.out, "opus.spm.vocab.yml"), "w", encoding="utf-8") as f:
        f.write(table)  # the fixture's lines as they are, then the filler pieces
        f.writelines(f"{p}: {i}\n" for i, p in enumerate(pieces) if i >= fixture_size)
    for name in ("decoder.yml", "source.spm", "target.spm"):
        shutil.copyfile(os.path.join(FIXTURE, name), os.path.join(args.out, name))
    if args.sources_out:
        ids = rng.integers(2, s["vocab"], size=(args.sources, args.src_len - 1))
        with open(args.sources_out, "w", encoding="utf-8") as f:
            f.writelines(" ".join(pieces[i] for i in row) + "\n" for row in ids)


if __name__ == "__main__":
    main()
