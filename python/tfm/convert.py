"""Converts fairseq and OpenNMT-py Transformer checkpoints (Python pickles) for tfm.

    python3 -m tfm.convert --from fairseq -i checkpoint_best.pt --dict dict.txt \\
        --spm sentencepiece.bpe.model -o MODEL_DIR
    python3 -m tfm.convert --from opennmt -i model_step_N.pt --spm SOURCE.model \\
        [--target-spm TARGET.model] -o MODEL_DIR

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
         first input (decoder_start_id = eos_id), LayerNorm epsilon 1e-5
  BPE    a SentencePiece model (--spm; the dictionary's pieces are its pieces); subword-nmt codes
         are not supported

OpenNMT-py v3 (onmt/models/model_saver.py, onmt/model_builder.py, onmt/encoders/transformer.py,
onmt/decoders/transformer.py, onmt/modules/{embeddings,multi_headed_attn,position_ffn}.py,
onmt/inputters/inputter.py at v3.5.1; the names as CTranslate2 v4.8.1's
python/ctranslate2/converters/opennmt_py.py reads them):
  file   torch.save({"model": the state dict less the generator, "generator": its state dict
         ("weight", "bias"; v3.0's nn.Sequential: "0.weight", "0.bias"), "vocab": {"src": [pieces],
         "tgt": [pieces], "data_task", "decoder_start_token"}, "opt": argparse.Namespace, "optim"})
  names  {encoder,decoder}.embeddings.make_embedding.emb_luts.0.weight, ...make_embedding.pe.pe
         [max_len, 1, d] (the sinusoid table: tfm computes it, the converter checks it),
         encoder.transformer.N.{self_attn.{linear_query,linear_keys,linear_values,final_linear},
         layer_norm, feed_forward.{w_1,w_2,layer_norm}}, decoder.transformer_layers.N.{self_attn,
         layer_norm_1, context_attn, layer_norm_2, feed_forward}, {encoder,decoder}.layer_norm
  model  pre-norm with final LayerNorms, epsilon norm_eps (1e-6), embeddings scaled by sqrt(d),
         sinusoids SinusoidalInterleaved (the paper's) or SinusoidalConcat (halves_t2t) from
         position 0, attention biases with add_qkvbias (all four or none), FFN biases with
         add_ffnbias (zeros without), the generator's bias as the output bias
  ids    specials <unk>, <blank> (padding), <s>, </s> (onmt/constants.py DefaultTokens); no </s>
         after the source; the decoder starts from vocab["decoder_start_token"] (<s>). tfm has one
         id table: the target's pieces in their order, then the pieces only the source has (the
         source embedding's rows are taken by piece, <unk>'s for a piece the source lacks; the
         appended pieces are never outputs: output bias -1e9)
  BPE    SentencePiece models (--spm, --target-spm), applied outside the model or by the
         `sentencepiece` transform; the `bpe` and `onmt_tokenize` transforms are not supported
"""

import argparse
import json
import math
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
    decoder_layers = _option(o, "decoder_layers", layers)
    pre = bool(_option(o, "encoder_normalize_before", False))
    for key, same in (("decoder_embed_dim", d), ("decoder_normalize_before", pre),
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
        for i in range(layers if side == "encoder" else decoder_layers):
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
    if decoder_layers != layers:
        config["decoder_layers"] = decoder_layers
    return config, params


def fairseq_conversion(checkpoint, dictionary):
    """(config, params, pieces) of a fairseq checkpoint and its dict.txt, ready to stage.

    fairseq starts the decoder from </s> (its prev_output_tokens begin with eos): decoder_start_id
    is eos_id (2).
    """
    config, params = fairseq_model(checkpoint)
    pieces = read_fairseq_dict(dictionary)
    vocab = config["vocab_size"]
    if len(pieces) != vocab:
        raise ConversionError(f"{dictionary}: {len(pieces)} ids (4 specials + its lines), but "
                              f"{checkpoint}'s embeddings have {vocab} rows")
    config["decoder_start_id"] = FAIRSEQ_SPECIALS.index("</s>")
    return config, params, pieces


# OpenNMT-py v3 (the module docstring gives the sources).
ONMT_SPECIALS = {"unk_id": "<unk>", "pad_id": "<blank>", "bos_id": "<s>", "eos_id": "</s>"}
# Transforms that leave the pieces SentencePiece makes as they are at translation time (filters,
# and noise that OpenNMT-py applies only in training).
ONMT_TRANSFORMS = {"sentencepiece", "filtertoolong", "clean", "tokendrop", "tokenmask", "switchout"}
NEVER_BIAS = -1e9  # the output bias of a piece that is never an output: exp(-1e9) is 0 in f32


def _onmt_load(path):
    import torch

    try:
        checkpoint = torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001 (pickle, zip and torch errors alike)
        raise ConversionError(f"{path}: cannot be read as a PyTorch checkpoint ({one_line(e)}); "
                              f"OpenNMT-py v2 checkpoints (torchtext fields) are not supported, "
                              f"only v3's") from None
    if not isinstance(checkpoint, dict) or checkpoint.get("opt") is None:
        raise ConversionError(f"{path}: no 'opt': not an OpenNMT-py checkpoint")
    for key in ("model", "generator"):
        if not isinstance(checkpoint.get(key), dict):
            raise ConversionError(f"{path}: no '{key}' state dict (weights saved with "
                                  f"--save_format safetensors or as LoRA weights are not "
                                  f"supported)")
    vocab = checkpoint.get("vocab")
    if not (isinstance(vocab, dict) and isinstance(vocab.get("src"), list)
            and isinstance(vocab.get("tgt"), list)):
        raise ConversionError(f"{path}: 'vocab' is not OpenNMT-py v3's {{'src': [...], 'tgt': "
                              f"[...]}} (v2 checkpoints' torchtext fields are not supported)")
    return checkpoint


def one_line(error):
    return " ".join(str(error).split())


def _onmt_check_options(o, vocab, path):
    """Refuses every option that changes the computation in a way tfm does not implement."""
    def need(ok, what):
        if not ok:
            raise ConversionError(f"{path}: option {what} is not supported")

    get = lambda name, default=None: _option(o, name, default)  # noqa: E731
    need(get("model_task", "seq2seq") == "seq2seq" and vocab.get("data_task", "seq2seq") ==
         "seq2seq", f"--model_task {get('model_task')} (only seq2seq)")
    for key in ("encoder_type", "decoder_type"):
        need(get(key, "transformer") == "transformer", f"--{key} {get(key)} (only transformer)")
    relative = get("max_relative_positions", 0)
    kinds = {-1: "rotary embeddings", -2: "ALiBi"}
    need(relative == 0, f"--max_relative_positions {relative} "
                        f"({kinds.get(relative, 'relative positions')})")
    need(get("relative_positions_buckets", 0) == 0,
         f"--relative_positions_buckets {get('relative_positions_buckets')}")
    need(get("position_encoding", False), "--position_encoding false (a model without positions)")
    layout = get("position_encoding_type", "SinusoidalInterleaved")
    need(layout in ("SinusoidalInterleaved", "SinusoidalConcat"),
         f"--position_encoding_type {layout}")
    attention = get("self_attn_type", "scaled-dot")
    need(attention in ("scaled-dot", "scaled-dot-flash"),
         f"--self_attn_type {attention} (only scaled-dot)")
    activation = get("pos_ffn_activation_fn", "relu")
    need(activation in ("relu", "gelu"), f"--pos_ffn_activation_fn {activation} "
                                         f"(relu, gelu; silu and gated-gelu are gated FFNs)")
    need(get("layer_norm", "standard") == "standard", f"--layer_norm {get('layer_norm')}")
    heads = get("heads", 8)
    need(not get("multiquery", False), "--multiquery (multi-query attention)")
    need(get("num_kv", 0) in (0, heads), f"--num_kv {get('num_kv')} with --heads {heads} "
                                         f"(grouped-query attention)")
    for flag in ("parallel_residual", "copy_attn", "lora_embedding"):
        need(not get(flag, False), f"--{flag}")
    for key in ("num_experts", "sliding_window", "n_src_feats"):
        need(not get(key, 0), f"--{key} {get(key)}")
    need("src_feats" not in vocab, "source features (vocab['src_feats'])")
    for key in ("lora_layers", "quant_layers"):
        need(not get(key, []), f"--{key} {get(key)}")
    need(get("generator_function", "softmax") == "softmax",
         f"--generator_function {get('generator_function')}")
    sizes = {key: get(key) for key in ("enc_hid_size", "dec_hid_size", "src_word_vec_size",
                                       "tgt_word_vec_size") if get(key) is not None}
    need(len(set(sizes.values())) <= 1, f"sizes {sizes} (tfm has one d_model)")
    for transform in get("transforms", None) or []:
        if transform == "bpe":
            need(False, "--transforms bpe (subword-nmt codes: tfm tokenises with SentencePiece)")
        if transform == "onmt_tokenize":
            need(False, "--transforms onmt_tokenize (OpenNMT Tokenizer's pieces: tfm tokenises "
                        "with SentencePiece's own)")
        need(transform in ONMT_TRANSFORMS, f"--transforms {transform} (it changes the text at "
                                           f"translation time)")


class _Tensors:
    """A checkpoint's tensors, each taken once (by name, with its shape checked) as float32; a
    tensor left untaken at the end is refused: it would belong to a variant tfm does not run."""

    def __init__(self, state, path):
        self.state, self.path, self.taken = state, path, set()

    def has(self, name):
        return name in self.state

    def take(self, name, shape=None):
        if name not in self.state:
            raise ConversionError(f"{self.path}: tensor '{name}' is missing")
        tensor = self.state[name]
        if shape is not None and list(tensor.shape) != list(shape):
            raise ConversionError(f"{self.path}: tensor '{name}' has shape {list(tensor.shape)}, "
                                  f"expected {list(shape)}")
        self.taken.add(name)
        return tensor.detach().float().contiguous()

    def check_all_taken(self):
        left = sorted(set(self.state) - self.taken)
        if left:
            raise ConversionError(f"{self.path}: tensor '{left[0]}' is not read by tfm (an "
                                  f"unsupported variant)")


def _sinusoids(positions, d, layout):
    """OpenNMT-py's PositionalEncoding table in float64 (onmt/modules/embeddings.py)."""
    import torch

    position = torch.arange(positions, dtype=torch.float64)[:, None]
    if layout == "SinusoidalInterleaved":
        div = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * -(math.log(10000.0) / d))
        table = torch.zeros(positions, d, dtype=torch.float64)
        table[:, 0::2], table[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
        return table
    half = d // 2
    angle = position * torch.exp(torch.arange(half, dtype=torch.float64)
                                 * -(math.log(10000.0) / (half - 1)))
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)


def _onmt_positions(tensors, side, d, layout):
    """Checks the stored table against the layout (tfm computes its own); returns its rows."""
    name = f"{side}.embeddings.make_embedding.pe.pe"
    table = tensors.take(name)
    if table.dim() != 3 or table.shape[1] != 1 or table.shape[2] != d:
        raise ConversionError(f"{tensors.path}: tensor '{name}' has shape {list(table.shape)}, "
                              f"expected [max_len, 1, {d}]")
    rows = min(table.shape[0], 512)  # float32 (or float16) sines: compared where they are exact
    difference = (table[:rows, 0].double() - _sinusoids(rows, d, layout)).abs().max().item()
    if difference > 2e-3:
        raise ConversionError(f"{tensors.path}: tensor '{name}' is not the {layout} table of "
                              f"--position_encoding_type (differs by {difference:.3g})")
    return table.shape[0]


def _onmt_layers(tensors, side, layers, d, qkv_bias):
    """{tfm name: tensor} of the encoder's or decoder's layers (pre-norm: LayerNorm before each
    sub-layer, as tfm's norm "pre")."""
    import torch

    params = {}
    if side == "encoder":
        blocks = [("self_attn", "self_attn", "layer_norm")]
        stack = "encoder.transformer"
    else:
        blocks = [("self_attn", "self_attn", "layer_norm_1"),
                  ("context_attn", "cross_attn", "layer_norm_2")]
        stack = "decoder.transformer_layers"
    d_ff = tensors.take(f"{stack}.0.feed_forward.w_1.weight").shape[0]
    ffn_bias = tensors.has(f"{stack}.0.feed_forward.w_1.bias")
    for i in range(layers):
        f, t = f"{stack}.{i}", f"{side}.layers.{i}"
        for onmt, ours, norm in blocks:
            for o_name, t_name in (("linear_query", "q_proj"), ("linear_keys", "k_proj"),
                                   ("linear_values", "v_proj"), ("final_linear", "out_proj")):
                params[f"{t}.{ours}.{t_name}.weight"] = tensors.take(f"{f}.{onmt}.{o_name}.weight",
                                                                     [d, d])
                if qkv_bias:
                    params[f"{t}.{ours}.{t_name}.bias"] = tensors.take(
                        f"{f}.{onmt}.{o_name}.bias", [d])
            for p in ("weight", "bias"):
                params[f"{t}.{ours}_norm.{p}"] = tensors.take(f"{f}.{norm}.{p}", [d])
        for n, shape in (("1", [d_ff, d]), ("2", [d, d_ff])):
            params[f"{t}.ffn.fc{n}.weight"] = tensors.take(f"{f}.feed_forward.w_{n}.weight", shape)
            params[f"{t}.ffn.fc{n}.bias"] = tensors.take(f"{f}.feed_forward.w_{n}.bias",
                                                         shape[:1]) if ffn_bias \
                else torch.zeros(shape[0])
        for p in ("weight", "bias"):
            params[f"{t}.ffn_norm.{p}"] = tensors.take(f"{f}.feed_forward.layer_norm.{p}", [d])
    for p in ("weight", "bias"):
        params[f"{side}.final_norm.{p}"] = tensors.take(f"{side}.layer_norm.{p}", [d])
    return params, d_ff


def onmt_id_table(vocab, path):
    """(pieces, source rows, target rows) of tfm's one id table for OpenNMT-py's two vocabularies:
    the target's pieces in order, then those only the source has. Row i of the source embedding
    is the source row of piece i (<unk>'s where the source lacks it: OpenNMT-py reads such a piece
    as <unk>); of the target matrices the target row (<unk>'s for the appended pieces)."""
    src, tgt = vocab["src"], vocab["tgt"]
    for side, pieces in (("src", src), ("tgt", tgt)):
        if len(set(pieces)) != len(pieces):
            raise ConversionError(f"{path}: vocab['{side}'] lists a piece twice")
        for piece in ONMT_SPECIALS.values():
            if piece not in pieces:
                raise ConversionError(f"{path}: vocab['{side}'] has no '{piece}'")
    in_tgt = set(tgt)
    table = list(tgt) + [p for p in src if p not in in_tgt]
    src_ids = {p: i for i, p in enumerate(src)}
    src_rows = [src_ids.get(p, src_ids["<unk>"]) for p in table]
    tgt_rows = list(range(len(tgt))) + [tgt.index("<unk>")] * (len(table) - len(tgt))
    return table, src_rows, tgt_rows


def opennmt_conversion(path):
    """(config, params, pieces) of an OpenNMT-py v3 Transformer checkpoint, ready to stage."""
    import torch

    checkpoint = _onmt_load(path)
    o, vocab = checkpoint["opt"], checkpoint["vocab"]
    _onmt_check_options(o, vocab, path)
    tensors = _Tensors(checkpoint["model"], path)
    generator = _Tensors(checkpoint["generator"], path + " (generator)")
    prefix = "0." if generator.has("0.weight") else ""
    name = "encoder.embeddings.make_embedding.emb_luts.0.weight"
    source = tensors.take(name)
    if source.dim() != 2 or source.shape[0] != len(vocab["src"]):
        raise ConversionError(f"{path}: tensor '{name}' has shape {list(source.shape)}, expected "
                              f"[{len(vocab['src'])} (vocab['src']), d_model]")
    d = source.shape[1]
    target = tensors.take("decoder.embeddings.make_embedding.emb_luts.0.weight",
                          [len(vocab["tgt"]), d])
    output = generator.take(prefix + "weight", [len(vocab["tgt"]), d])
    bias = generator.take(prefix + "bias", [len(vocab["tgt"])]) if generator.has(prefix + "bias") \
        else torch.zeros(len(vocab["tgt"]))
    heads, layers = _option(o, "heads", 8), _option(o, "enc_layers", 6)
    decoder_layers = _option(o, "dec_layers", layers)
    if d % heads:
        raise ConversionError(f"{path}: d_model {d} is not a multiple of --heads {heads}")
    layout = _option(o, "position_encoding_type", "SinusoidalInterleaved")
    positions = [_onmt_positions(tensors, side, d, layout) for side in ("encoder", "decoder")]
    qkv_bias = tensors.has("encoder.transformer.0.self_attn.linear_query.bias")
    params = {}
    for side in ("encoder", "decoder"):
        depth = layers if side == "encoder" else decoder_layers
        layer_params, d_ff = _onmt_layers(tensors, side, depth, d, qkv_bias)
        params.update(layer_params)
    tensors.check_all_taken()
    generator.check_all_taken()

    table, src_rows, tgt_rows = onmt_id_table(vocab, path)
    s, t, g = source[src_rows], target[tgt_rows], output[tgt_rows]
    b = torch.cat([bias, torch.full((len(table) - len(vocab["tgt"]),), NEVER_BIAS)])
    # The matrices that are one in OpenNMT-py (share_embeddings, share_decoder_embeddings) are
    # equal here, and are written once.
    if torch.equal(s, t) and torch.equal(t, g):
        tie, vocabulary = "all", {"embedding.weight": s}
    elif torch.equal(t, g):
        tie, vocabulary = "decoder", {"source_embedding.weight": s, "target_embedding.weight": t}
    else:
        tie, vocabulary = "none", {"source_embedding.weight": s, "target_embedding.weight": t,
                                   "output_projection.weight": g}
    vocabulary["output_projection.bias"] = b
    params = {**vocabulary, **params}
    ids = {key: table.index(piece) for key, piece in ONMT_SPECIALS.items()}
    start = vocab.get("decoder_start_token", "<s>")
    if start not in vocab["tgt"]:
        raise ConversionError(f"{path}: the decoder_start_token '{start}' is not in vocab['tgt']")
    config = {
        "layers": layers, "d_model": d, "d_ff": d_ff, "heads": heads, "d_k": d // heads,
        "d_v": d // heads, "positional": "sinusoidal", "max_positions": min(positions),
        "vocab_size": len(table), "norm": "pre", "attention_bias": qkv_bias,
        "layer_norm_eps": _option(o, "norm_eps", 1e-6), **ids,
        "activation": _option(o, "pos_ffn_activation_fn", "relu"), "tie_embeddings": tie,
        "output_bias": True, "scale_embeddings": True,
        "sinusoid": "interleaved" if layout == "SinusoidalInterleaved" else "halves_t2t",
        "position_offset": 0, "decoder_start_id": -1 if start == "<s>" else table.index(start)}
    if decoder_layers != layers:
        config["decoder_layers"] = decoder_layers
    return config, params, table


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
        raise ConversionError("--bpe subword_nmt: subword-nmt codes are not supported (tfm "
                              "tokenises with SentencePiece); give a model trained on "
                              "SentencePiece pieces and its --spm model")
    if args.source == "fairseq" and not args.dict:
        raise ConversionError("--from fairseq needs --dict dict.txt")
    if args.source == "opennmt" and args.dict:
        raise ConversionError("--from opennmt takes no --dict (the vocabularies are in the "
                              "checkpoint)")
    if not args.spm:
        raise ConversionError(f"--from {args.source} needs --spm SENTENCEPIECE_MODEL (the model "
                              f"that made the pieces; --target-spm for the targets' when another)")
    for path in (args.input, args.dict or args.input, args.spm, args.target_spm or args.spm):
        if not os.path.isfile(path):
            raise ConversionError(f"{path}: no such file")
    if args.source == "fairseq":
        config, params, pieces = fairseq_conversion(args.input, args.dict)
        source_eos = True
    else:
        config, params, pieces = opennmt_conversion(args.input)
        source_eos = False
    program = find_tfm(args.tfm)
    with tempfile.TemporaryDirectory() as staging:
        write_staging(staging, config, params, pieces, args.spm, args.target_spm or args.spm,
                      source_eos)
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
    parser.add_argument("--dict", help="fairseq's dict.txt (a joined dictionary; fairseq only)")
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
