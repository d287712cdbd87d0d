"""Converts fairseq and OpenNMT-py Transformer checkpoints (Python pickles) for tfm.

    python3 -m tfm.convert --from fairseq -i checkpoint_best.pt --dict dict.txt \\
        --spm sentencepiece.bpe.model -o MODEL_DIR

The checkpoint is unpickled with PyTorch (torch.load on the CPU; nothing else of fairseq or OpenNMT-py
is needed), its tensors renamed to tfm's parameter names (docs/MODEL_FORMAT.md) and its options to
config.json's keys; the files go to a staging folder that `tfm convert --from tfm-names` then checks
and writes as a model directory (checksums, atomic), the same C++ path as the Marian and Hugging Face
converters (docs/CONVERTING.md). Problems are one-line errors naming the file and the tensor or option.

fairseq (fairseq/models/transformer, fairseq/data/dictionary.py):
  names  encoder.embed_tokens.weight, decoder.embed_tokens.weight, decoder.output_projection.weight,
         encoder.embed_positions.weight (learned) or ._float_tensor (sinusoidal),
         {encoder,decoder}.layers.N.self_attn.{q,k,v,out}_proj.{weight,bias}, self_attn_layer_norm,
         decoder.layers.N.encoder_attn.*, encoder_attn_layer_norm, fc1, fc2, final_layer_norm,
         {encoder,decoder}.layer_norm (normalize_before)
  ids    <s> 0, <pad> 1, </s> 2, <unk> 3, then dict.txt's lines ("piece count" each)
  model  sinusoids as [sin | cos] halves with log(10000) / (d/2 - 1) (halves_t2t), positions counted
         from padding_idx + 1 = 2 (position_offset 2), </s> after the source and as the decoder's
         first input (an appended "<start>" token with </s>'s embedding, never an output),
         LayerNorm epsilon 1e-5
  BPE    a SentencePiece model (--spm; the dictionary's pieces are its pieces); subword-nmt codes
         are not supported
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

FAIRSEQ_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]


class ConversionError(Exception):
    """A one-line error naming the file and the problem."""


def _option(options, name, default=None):
    if isinstance(options, dict):
        return options.get(name, default)
    return getattr(options, name, default)


def read_fairseq_dict(path):
    """fairseq's Dictionary.load: the four specials, then the first field of each line."""
    pieces = list(FAIRSEQ_SPECIALS)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            fields = line.rsplit(" ", 1)
            if len(fields) != 2 or not fields[1].lstrip("-").isdigit() and not fields[1].startswith("#"):
                raise ConversionError(f"{path}:{number}: not a 'piece count' line: {line!r}")
            piece = fields[0]
            if piece.endswith(" #fairseq:overwrite"):
                piece = piece[: -len(" #fairseq:overwrite")]
            pieces.append(piece)
    return pieces


def _fairseq_options(checkpoint, path):
    if checkpoint.get("cfg") is not None:
        options = _option(checkpoint["cfg"], "model")
    else:
        options = checkpoint.get("args")
    if options is None:
        raise ConversionError(f"{path}: no 'cfg' or 'args': not a fairseq checkpoint")
    arch = str(_option(options, "arch", _option(options, "_name", "")))
    if not arch.startswith("transformer"):
        raise ConversionError(f"{path}: arch '{arch}' is not supported (only transformer*)")
    return options


def _check(condition, path, what):
    if not condition:
        raise ConversionError(f"{path}: {what} is not supported")


def fairseq_model(path):
    """(config keys, {tfm name: float32 tensor}) of a fairseq Transformer checkpoint."""
    import torch

    try:
        checkpoint = torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001 (pickle, zip and torch errors alike)
        raise ConversionError(f"{path}: cannot be read as a PyTorch checkpoint: {e}") from None
    o = _fairseq_options(checkpoint, path)
    state = checkpoint.get("model")
    if not isinstance(state, dict):
        raise ConversionError(f"{path}: no 'model' state dict")
    d = _option(o, "encoder_embed_dim", 512)
    layers = _option(o, "encoder_layers", 6)
    pre = bool(_option(o, "encoder_normalize_before", False))
    for key, same in (("decoder_embed_dim", d), ("decoder_layers", layers),
                      ("decoder_normalize_before", pre),
                      ("decoder_ffn_embed_dim", _option(o, "encoder_ffn_embed_dim", 2048)),
                      ("decoder_attention_heads", _option(o, "encoder_attention_heads", 8))):
        _check(_option(o, key, same) == same, path, f"{key} other than the encoder's")
    for flag in ("layernorm_embedding", "no_token_positional_embeddings", "cross_self_attention",
                 "adaptive_input", "tie_adaptive_weights"):
        _check(not _option(o, flag, False), path, f"option {flag}")
    _check(_option(o, "adaptive_softmax_cutoff") in (None, ""), path, "adaptive_softmax_cutoff")
    activation = _option(o, "activation_fn", "relu")
    _check(activation in ("relu", "gelu"), path, f"activation_fn {activation}")
    learned = bool(_option(o, "encoder_learned_pos", False))
    _check(bool(_option(o, "decoder_learned_pos", False)) == learned, path,
           "learned positions on one side only")
    taken = set()

    def take(name, shape=None):
        if name not in state:
            raise ConversionError(f"{path}: tensor '{name}' is missing")
        tensor = state[name]
        if shape is not None and list(tensor.shape) != list(shape):
            raise ConversionError(f"{path}: tensor '{name}' has shape {list(tensor.shape)}, "
                                  f"expected {list(shape)}")
        taken.add(name)
        return tensor.detach().to(torch.float32).contiguous()

    source = take("encoder.embed_tokens.weight")
    vocab = source.shape[0]
    params = {}
    shared_all = bool(_option(o, "share_all_embeddings", False))
    shared_out = shared_all or bool(_option(o, "share_decoder_input_output_embed", False))
    target = take("decoder.embed_tokens.weight", [vocab, d])
    output = take("decoder.output_projection.weight", [vocab, d]) \
        if "decoder.output_projection.weight" in state else target
    if shared_all:
        params["embedding.weight"] = source
    else:
        params["source_embedding.weight"], params["target_embedding.weight"] = source, target
        if not shared_out:
            params["output_projection.weight"] = output
    padding = 1
    positions = _option(o, "max_source_positions", 1024) + padding + 1
    for side in ("encoder", "decoder"):
        if learned:
            table = take(f"{side}.embed_positions.weight")
            positions = table.shape[0]
            params[f"{side}.positions.weight"] = table
        else:
            taken.add(f"{side}.embed_positions._float_tensor")
        taken.add(f"{side}.version")
        ffn = _option(o, "encoder_ffn_embed_dim", 2048)
        for i in range(layers):
            f, t = f"{side}.layers.{i}", f"{side}.layers.{i}"
            blocks = [("self_attn", "self_attn")] + (
                [("encoder_attn", "cross_attn")] if side == "decoder" else [])
            for fs, ts in blocks:
                for p in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    params[f"{t}.{ts}.{p}.weight"] = take(f"{f}.{fs}.{p}.weight", [d, d])
                    params[f"{t}.{ts}.{p}.bias"] = take(f"{f}.{fs}.{p}.bias", [d])
                for p in ("weight", "bias"):
                    params[f"{t}.{ts}_norm.{p}"] = take(f"{f}.{fs}_layer_norm.{p}", [d])
            params[f"{t}.ffn.fc1.weight"] = take(f"{f}.fc1.weight", [ffn, d])
            params[f"{t}.ffn.fc1.bias"] = take(f"{f}.fc1.bias", [ffn])
            params[f"{t}.ffn.fc2.weight"] = take(f"{f}.fc2.weight", [d, ffn])
            params[f"{t}.ffn.fc2.bias"] = take(f"{f}.fc2.bias", [d])
            for p in ("weight", "bias"):
                params[f"{t}.ffn_norm.{p}"] = take(f"{f}.final_layer_norm.{p}", [d])
        if pre:
            for p in ("weight", "bias"):
                params[f"{side}.final_norm.{p}"] = take(f"{side}.layer_norm.{p}", [d])
    left = sorted(set(state) - taken - {"decoder.output_projection.weight"})
    if left:
        raise ConversionError(f"{path}: tensor '{left[0]}' is not read by tfm (an unsupported "
                              f"variant)")
    heads = _option(o, "encoder_attention_heads", 8)
    config = {
        "layers": layers, "d_model": d, "d_ff": _option(o, "encoder_ffn_embed_dim", 2048),
        "heads": heads, "d_k": d // heads, "d_v": d // heads,
        "positional": "learned" if learned else "sinusoidal", "max_positions": positions,
        "vocab_size": vocab, "norm": "pre" if pre else "post", "attention_bias": True,
        "layer_norm_eps": 1e-5, "pad_id": 1, "unk_id": 3, "bos_id": 0, "eos_id": 2,
        "activation": activation,
        "tie_embeddings": "all" if shared_all else ("decoder" if shared_out else "none"),
        "output_bias": False, "scale_embeddings": not _option(o, "no_scale_embedding", False),
        "sinusoid": "halves_t2t", "position_offset": padding + 1}
    return config, params


def fairseq_conversion(checkpoint, dictionary):
    """(config, params, pieces) of a fairseq checkpoint and its dict.txt, ready to stage.

    fairseq starts the decoder from </s> (id 2), which tfm's configuration keeps apart from eos: the
    start is an appended token "<start>" whose embedding rows are copies of </s>'s and whose output
    bias is -1e9 (it is never an output: exp(-1e9) is 0 in f32, so the other tokens' probabilities
    are unchanged).
    """
    import torch

    config, params = fairseq_model(checkpoint)
    pieces = read_fairseq_dict(dictionary)
    vocab = config["vocab_size"]
    if len(pieces) != vocab:
        raise ConversionError(f"{dictionary}: {len(pieces)} ids (4 specials + its lines), but "
                              f"{checkpoint}'s embeddings have {vocab} rows")
    eos = FAIRSEQ_SPECIALS.index("</s>")
    for name in ("embedding.weight", "source_embedding.weight", "target_embedding.weight",
                 "output_projection.weight"):
        if name in params:
            params[name] = torch.cat([params[name], params[name][eos:eos + 1]])
    params["output_projection.bias"] = torch.cat([torch.zeros(vocab), torch.tensor([-1e9])])
    config.update(output_bias=True, vocab_size=vocab + 1, decoder_start_id=vocab)
    return config, params, pieces + ["<start>"]


def write_staging(folder, config, params, pieces, source_spm, target_spm, source_eos=True):
    """The folder `tfm convert --from tfm-names` reads: config.json, model.safetensors, source.spm,
    target.spm, vocab.json."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    header, blobs, offset = {}, [], 0
    for name, tensor in params.items():
        raw = tensor.numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)
    shutil.copyfile(source_spm, os.path.join(folder, "source.spm"))
    shutil.copyfile(target_spm, os.path.join(folder, "target.spm"))
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({"source_eos": source_eos, "pieces": pieces}, f, ensure_ascii=False)


def find_tfm(given):
    """The tfm program: --tfm, $TFM_PROGRAM, the build tree beside this module, or PATH."""
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tfm")
    for candidate in (given, os.environ.get("TFM_PROGRAM"), beside, shutil.which("tfm")):
        if candidate and os.access(candidate, os.X_OK) and os.path.isfile(candidate):
            return candidate
    raise ConversionError("cannot find the tfm program: give --tfm PATH or set TFM_PROGRAM")


def convert(args):
    if args.bpe == "subword_nmt":
        raise ConversionError(f"--bpe subword_nmt: subword-nmt codes are not supported (tfm "
                              f"tokenises with SentencePiece); give a fairseq model trained on "
                              f"SentencePiece pieces and its --spm model")
    if args.source == "opennmt":
        raise ConversionError(f"{args.input}: OpenNMT-py checkpoints are not supported yet")
    if not args.dict or not args.spm:
        raise ConversionError("--from fairseq needs --dict dict.txt and --spm SENTENCEPIECE_MODEL")
    for path in (args.input, args.dict, args.spm, args.target_spm or args.spm):
        if not os.path.isfile(path):
            raise ConversionError(f"{path}: no such file")
    config, params, pieces = fairseq_conversion(args.input, args.dict)
    program = find_tfm(args.tfm)
    with tempfile.TemporaryDirectory() as staging:
        write_staging(staging, config, params, pieces, args.spm, args.target_spm or args.spm)
        done = subprocess.run([program, "convert", "--from", "tfm-names", "-i", staging, "-o",
                               args.output], capture_output=True, text=True)
    if done.returncode != 0:
        raise ConversionError(done.stderr.strip().replace(staging, args.input))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m tfm.convert",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", required=True, choices=("fairseq", "opennmt"))
    parser.add_argument("-i", "--input", required=True, help="the checkpoint (.pt)")
    parser.add_argument("-o", "--output", required=True, help="the model directory to write")
    parser.add_argument("--dict", help="fairseq's dict.txt (a joined dictionary)")
    parser.add_argument("--bpe", default="sentencepiece", choices=("sentencepiece", "subword_nmt"))
    parser.add_argument("--spm", help="the SentencePiece model of the sources (and targets)")
    parser.add_argument("--target-spm", help="the targets' SentencePiece model, when another")
    parser.add_argument("--tfm", help="the tfm program (default: $TFM_PROGRAM, the build, PATH)")
    args = parser.parse_args(argv)
    try:
        convert(args)
    except ConversionError as e:
        print(f"tfm.convert: {e}", file=sys.stderr)
        return 1
    print(f"converted {args.input} ({args.source}) into the model directory {args.output}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
