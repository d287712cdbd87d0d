#!/usr/bin/python3
"""Writes a tfm model directory with random weights, without training: for benchmarks and smoke runs.

  python3 tools/random_model.py --out DIR [--preset base | --config config.json] [--vocab 32000]
      [--seed 7] [--batch 32 --src-len 25] [--no-vocab-model]

Files (docs/MODEL_FORMAT.md):
  config.json          the preset's (or file's) keys, vocab_size = --vocab
  model.safetensors    tools/reference_model.py's default initialisation (xavier-uniform weights, zero
                       biases, embeddings normal(0, d^-0.5)) from --seed, F32, the spec's names and order,
                       with tfm's per-tensor CRC-32 in the metadata
  sources.safetensors  "sources", I32 [batch, src_len]: random word ids (>= 4, no padding), what
                       bench_decode --model-dir writes and bench/decode_pytorch.py reads
  vocab.model          a SentencePiece model of exactly --vocab pieces with tfm's special pieces (pad 0
                       <pad>, unk 1 <unk>, bos 2 <s>, eos 3 </s>), so that `tfm translate` accepts the
                       directory: ~1000 pieces learned from a generated text, the rest filler symbols
                       (<w00004>, ...). Needs the sentencepiece package; skipped (with a message)
                       without it or with --no-vocab-model. Translations of a random model are noise: the
                       vocabulary only has to be valid.

The weights are not tfm's bench_decode weights (another generator): both frameworks must read the same
directory to be compared, as bench/gpu.sh does when tfm's bench_decode cannot write one.
"""

import argparse
import json
import os
import random
import sys
import tempfile
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_reference_fixture import write_safetensors  # noqa: E402
from reference_model import Transformer, config_json, make_config, preset_config  # noqa: E402

SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")  # ids 0..3, data/vocab.h's kPadPiece..kEosPiece
LEARNED_PIECES = 1000  # learned from the generated text; the rest of the vocabulary is filler


def with_crc32(tensors, metadata):
    """tfm's checksums: "crc32:<name>" = zlib CRC-32 of the tensor's little-endian bytes, 8 hex digits."""
    out = dict(metadata)
    for name, t in tensors.items():
        raw = t.detach().contiguous().numpy().tobytes()
        out[f"crc32:{name}"] = f"{zlib.crc32(raw) & 0xFFFFFFFF:08x}"
    return out


def write_vocab_model(path, vocab_size, seed):
    """A SentencePiece model of exactly vocab_size pieces with tfm's special ids; False if it cannot."""
    try:
        import sentencepiece as spm
    except ImportError:
        print("random_model.py: no sentencepiece package: vocab.model not written", file=sys.stderr)
        return False
    learned = min(LEARNED_PIECES, vocab_size - len(SPECIALS))
    filler = [f"<w{i:05d}>" for i in range(len(SPECIALS), vocab_size - learned)]
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(text, "w", encoding="utf-8") as f:
            for _ in range(5000):
                f.write(" ".join(rng.choice(words) for _ in range(rng.randint(5, 20))) + "\n")
        prefix = os.path.join(tmp, "vocab")
        spm.SentencePieceTrainer.train(
            input=text, model_prefix=prefix, model_type="unigram", vocab_size=vocab_size,
            character_coverage=1.0, pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece=SPECIALS[0],
            unk_piece=SPECIALS[1], bos_piece=SPECIALS[2], eos_piece=SPECIALS[3],
            user_defined_symbols=filler, minloglevel=2)
        processor = spm.SentencePieceProcessor(model_file=prefix + ".model")
        pieces = [processor.id_to_piece(i) for i in range(len(SPECIALS))]
        if processor.get_piece_size() != vocab_size or tuple(pieces) != SPECIALS:
            raise RuntimeError(f"SentencePiece gave {processor.get_piece_size()} pieces "
                               f"starting {pieces}, expected {vocab_size} starting {list(SPECIALS)}")
        with open(prefix + ".model", "rb") as src, open(path, "wb") as dst:
            dst.write(src.read())
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="the model directory (created)")
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--preset", default="base")
    model.add_argument("--config", help="model config.json instead of a preset")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--batch", type=int, default=32, help="sentences in sources.safetensors")
    parser.add_argument("--src-len", type=int, default=25, help="tokens per source sentence")
    parser.add_argument("--no-vocab-model", action="store_true")
    args = parser.parse_args()
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            values = json.load(f)
        values["vocab_size"] = args.vocab
        cfg = make_config(values)
    else:
        cfg = preset_config(args.preset, vocab_size=args.vocab)
    if args.vocab <= len(SPECIALS) or args.batch < 1 or args.src_len < 1:
        parser.error("--vocab must exceed 4, --batch and --src-len must be positive")
    os.makedirs(args.out, exist_ok=True)

    torch.manual_seed(args.seed)
    params = {n: p.detach() for n, p in Transformer(cfg).named_parameters()}
    meta = {"producer": "tools/random_model.py", "seed": str(args.seed)}
    write_safetensors(os.path.join(args.out, "model.safetensors"), params, with_crc32(params, meta))
    # config.json after the weights, as tfm's save_model_dir does: a directory with a config has both.
    with open(os.path.join(args.out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config_json(cfg), f, indent=2)
        f.write("\n")
    gen = torch.Generator().manual_seed(args.seed + 1)
    sources = {"sources": torch.randint(len(SPECIALS), args.vocab, (args.batch, args.src_len),
                                        generator=gen, dtype=torch.int32)}
    write_safetensors(os.path.join(args.out, "sources.safetensors"), sources,
                      with_crc32(sources, {"producer": "tools/random_model.py"}))
    wrote_vocab = False
    if not args.no_vocab_model:
        wrote_vocab = write_vocab_model(os.path.join(args.out, "vocab.model"), args.vocab, args.seed)
    print(json.dumps({"model_dir": args.out, "parameters": sum(p.numel() for p in params.values()),
                      "vocab_model": wrote_vocab, "sources": [args.batch, args.src_len]}))


if __name__ == "__main__":
    main()
