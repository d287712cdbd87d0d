#!/usr/bin/python3
"""Writes a tfm model directory as a CTranslate2 model directory, for bench/ctranslate2.sh.

  python3 bench/ct2_convert.py --model DIR --out CT2_DIR [--quantization float32|int8]
      [--never-end] [--positions 1024]
  python3 bench/ct2_convert.py --model DIR --sources-out SOURCES.txt

--sources-out writes the model directory's sources.safetensors (bench_decode --model-dir's) as text
lines of that vocabulary's tokens, the input of bench/peer_decode.py.

CTranslate2's own converters read OpenNMT, fairseq or Marian checkpoints, not tfm's (`tfm convert --to
ctranslate2` writes the same model.bin for a model directory with a vocabulary; bench_decode's has
none). This writes its model format directly, as its converter
(python/ctranslate2/specs/model_spec.py, TransformerSpec) would for a post-norm Transformer:

  model.bin     binary version 6: the spec name "TransformerSpec", revision 5, then every variable
                (name, shape, dtype, bytes); the encoder's and decoder's self-attention take one fused
                [3d, d] q/k/v weight (linear_0), the cross-attention a query weight (linear_0) and a
                fused [2d, d] key/value weight (linear_1); tfm's shared embedding is written for the
                encoder's and decoder's embeddings and the output projection.
  config.json   the special tokens (tfm's <pad> <unk> <s> </s>, ids 0-3), no bos/eos added to the
                source (tfm's bench_decode feeds the source ids as they are), layer norm epsilon.
  shared_vocabulary.json and tokenizer.json
                a word-level vocabulary of the model's ids: token i is "w<i>" (the specials keep their
                names), so a line "w17 w9 w4021" is the ids 17 9 4021 to both frameworks.

--quantization int8 stores the weights of every linear layer and the embeddings as CTranslate2's
converter does with `--quantization int8`: per output row, scale = 127 / max|w|, int8 = rint(w * scale),
the scale beside them (`weight_scale`). The model then runs in CTranslate2's int8_float32.

--never-end gives the output projection a bias of -1e4 on </s> (0 elsewhere): CTranslate2 then never
ends a hypothesis, as tfm's bench_decode never does (its eos gets log p = -inf, --min-length = --out-len),
so both decode the same number of tokens. exp(-1e4) is 0 in f32: the other tokens' log-probabilities
are those of a softmax over the vocabulary without </s>; tfm's include </s>'s term, which changes
them by about exp(z_eos - z_max), far below what would reorder a beam of a random model.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from read_safetensors import read_safetensors  # noqa: E402

BINARY_VERSION = 6
SPEC_NAME = "TransformerSpec"
SPEC_REVISION = 5
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")  # tfm's ids 0..3 (data/vocab.h)
DTYPE_IDS = {np.dtype("float32"): 0, np.dtype("int8"): 1, np.dtype("int16"): 2,
             np.dtype("int32"): 3}  # CTranslate2's DataType order (include/ctranslate2/types.h)


def read_f32_tensors(path):
    """{name: float32 array} of a safetensors file of F32 tensors (tools/read_safetensors.py)."""
    tensors, _ = read_safetensors(path)
    for name, tensor in tensors.items():
        if tensor.dtype != torch.float32:
            sys.exit(f"ct2_convert.py: {path}: tensor {name} is {tensor.dtype}, expected F32")
    return {name: tensor.numpy() for name, tensor in tensors.items()}


def write_sources(model_dir, path):
    """sources.safetensors ([batch, src_len] ids) as lines of "w<id>" tokens."""
    tensors, _ = read_safetensors(os.path.join(model_dir, "sources.safetensors"))
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(" ".join(f"w{i}" for i in row) + "\n" for row in tensors["sources"].tolist())


def sinusoidal_positions(positions, d_model):
    """tfm's table (nn/layers.cc): sin at even columns, cos at odd ones, angles in double."""
    table = np.zeros((positions, d_model), dtype=np.float64)
    pos = np.arange(positions, dtype=np.float64)[:, None]
    wavelength = np.power(10000.0, np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table[:, 0::2] = np.sin(pos / wavelength)
    table[:, 1::2] = np.cos(pos / wavelength[: d_model // 2])
    return table.astype(np.float32)


class Variables:
    """The variables of model.bin, each linear or embedding weight quantised when asked."""

    def __init__(self, int8):
        self.int8 = int8
        self.items = {}

    def scalar(self, name, value, dtype):
        self.items[name] = np.array(value, dtype=dtype)

    def weight(self, name, value):
        value = np.ascontiguousarray(value, dtype=np.float32)
        if not self.int8:
            self.items[name] = value
            return
        amax = np.abs(value).max(axis=1)
        amax[amax == 0] = 127.0
        scale = (127.0 / amax).astype(np.float32)
        self.items[name] = np.rint(value * scale[:, None]).astype(np.int8)
        self.items[name + "_scale"] = scale

    def plain(self, name, value):
        self.items[name] = np.ascontiguousarray(value, dtype=np.float32)

    def write(self, path):
        def string(f, text):
            raw = text.encode("utf-8")
            f.write(struct.pack("<H", len(raw) + 1) + raw + b"\0")

        with open(path + ".tmp", "wb") as f:
            f.write(struct.pack("<I", BINARY_VERSION))
            string(f, SPEC_NAME)
            f.write(struct.pack("<I", SPEC_REVISION))
            f.write(struct.pack("<I", len(self.items)))
            for name in sorted(self.items):
                value = self.items[name]
                string(f, name)
                f.write(struct.pack("<B", value.ndim))
                for dim in value.shape:
                    f.write(struct.pack("<I", dim))
                f.write(struct.pack("<B", DTYPE_IDS[value.dtype]))
                raw = value.astype(value.dtype.newbyteorder("<")).tobytes()
                f.write(struct.pack("<I", len(raw)))
                f.write(raw)
            f.write(struct.pack("<I", 0))  # no aliases
        os.replace(path + ".tmp", path)


def layer_norm(v, scope, w, prefix):
    v.plain(scope + "/gamma", w[prefix + ".weight"])
    v.plain(scope + "/beta", w[prefix + ".bias"])


def linear(v, scope, w, prefixes):
    """One CTranslate2 linear layer from tfm's (fused along the output rows when several)."""
    v.weight(scope + "/weight", np.concatenate([w[p + ".weight"] for p in prefixes], axis=0))
    if all(p + ".bias" in w for p in prefixes):
        v.plain(scope + "/bias", np.concatenate([w[p + ".bias"] for p in prefixes], axis=0))


def convert(model_dir, out_dir, int8, never_end, positions):
    config = json.load(open(os.path.join(model_dir, "config.json")))
    for key, expected in (("norm", "post"), ("positional", "sinusoidal"), ("task", "translation")):
        if config.get(key, expected) != expected:
            sys.exit(f"ct2_convert.py: {model_dir}: {key} {config.get(key)!r} (only {expected!r})")
    if config.get("decoder_layers", -1) not in (-1, config["layers"]):
        sys.exit(f"ct2_convert.py: {model_dir}: decoder_layers other than layers (only tfm "
                 "export-ctranslate2 writes those)")
    if [config[k] for k in ("pad_id", "unk_id", "bos_id", "eos_id")] != [0, 1, 2, 3]:
        sys.exit(f"ct2_convert.py: {model_dir}: special ids are not tfm's 0-3")
    w = read_f32_tensors(os.path.join(model_dir, "model.safetensors"))
    d, heads, layers, vocab = (config[k] for k in ("d_model", "heads", "layers", "vocab_size"))
    if config["d_k"] * heads != d or config["d_v"] * heads != d:
        sys.exit(f"ct2_convert.py: {model_dir}: heads x d_k must be d_model for CTranslate2")

    v = Variables(int8)
    table = sinusoidal_positions(positions, d)
    for side in ("encoder", "decoder"):
        v.scalar(side + "/activation", 0, np.int8)  # ReLU
        v.scalar(side + "/num_heads", heads, np.int16)
        v.scalar(side + "/pre_norm", 0, np.int8)
        v.scalar(side + "/scale_embeddings", 1, np.int8)  # x sqrt(d_model)
        v.plain(side + "/position_encodings/encodings", table)
    v.scalar("encoder/embeddings_merge", 0, np.int8)
    v.weight("encoder/embeddings_0/weight", w["embedding.weight"])
    v.weight("decoder/embeddings/weight", w["embedding.weight"])
    v.weight("decoder/projection/weight", w["embedding.weight"])
    if never_end:
        bias = np.zeros(vocab, dtype=np.float32)
        bias[SPECIALS.index("</s>")] = -1e4
        v.plain("decoder/projection/bias", bias)
    v.scalar("decoder/alignment_layer", -1, np.int16)
    v.scalar("decoder/alignment_heads", 1, np.int16)

    for i in range(layers):
        enc, tfm_enc = f"encoder/layer_{i}", f"encoder.layers.{i}"
        layer_norm(v, enc + "/self_attention/layer_norm", w, tfm_enc + ".self_attn_norm")
        linear(v, enc + "/self_attention/linear_0", w,
               [f"{tfm_enc}.self_attn.{p}_proj" for p in "qkv"])
        linear(v, enc + "/self_attention/linear_1", w, [tfm_enc + ".self_attn.out_proj"])
        dec, tfm_dec = f"decoder/layer_{i}", f"decoder.layers.{i}"
        layer_norm(v, dec + "/self_attention/layer_norm", w, tfm_dec + ".self_attn_norm")
        linear(v, dec + "/self_attention/linear_0", w,
               [f"{tfm_dec}.self_attn.{p}_proj" for p in "qkv"])
        linear(v, dec + "/self_attention/linear_1", w, [tfm_dec + ".self_attn.out_proj"])
        layer_norm(v, dec + "/attention/layer_norm", w, tfm_dec + ".cross_attn_norm")
        linear(v, dec + "/attention/linear_0", w, [tfm_dec + ".cross_attn.q_proj"])
        linear(v, dec + "/attention/linear_1", w,
               [tfm_dec + ".cross_attn.k_proj", tfm_dec + ".cross_attn.v_proj"])
        linear(v, dec + "/attention/linear_2", w, [tfm_dec + ".cross_attn.out_proj"])
        for scope, prefix in ((enc, tfm_enc), (dec, tfm_dec)):
            layer_norm(v, scope + "/ffn/layer_norm", w, prefix + ".ffn_norm")
            linear(v, scope + "/ffn/linear_0", w, [prefix + ".ffn.fc1"])
            linear(v, scope + "/ffn/linear_1", w, [prefix + ".ffn.fc2"])

    os.makedirs(out_dir, exist_ok=True)
    v.write(os.path.join(out_dir, "model.bin"))
    tokens = list(SPECIALS) + [f"w{i}" for i in range(len(SPECIALS), vocab)]
    ct2_config = {"add_source_bos": False, "add_source_eos": False, "bos_token": "<s>",
                  "decoder_start_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                  "layer_norm_epsilon": config.get("layer_norm_eps", 1e-5),
                  "multi_query_attention": False}
    files = {
        "config.json": ct2_config,
        "shared_vocabulary.json": tokens,
        "tokenizer.json": {
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
            "post_processor": None,
            # Joins the tokens with spaces (no "##" pieces here): "w17 w9".
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
            "model": {"type": "WordLevel", "vocab": {t: i for i, t in enumerate(tokens)},
                      "unk_token": "<unk>"},
        },
    }
    for name, content in files.items():
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            json.dump(content, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="tfm model directory")
    parser.add_argument("--out", help="CTranslate2 model directory to write")
    parser.add_argument("--sources-out", help="write the model directory's sources here as text")
    parser.add_argument("--quantization", choices=("float32", "int8"), default="float32")
    parser.add_argument("--never-end", action="store_true", help="</s> never chosen (see above)")
    parser.add_argument("--positions", type=int, default=1024, help="rows of the position table")
    args = parser.parse_args()
    if not args.out and not args.sources_out:
        parser.error("--out or --sources-out is needed")
    if args.out:
        convert(args.model, args.out, args.quantization == "int8", args.never_end, args.positions)
    if args.sources_out:
        write_sources(args.model, args.sources_out)


if __name__ == "__main__":
    main()
