#!/usr/bin/python3
"""Writes the fixtures of `tfm convert` (tests/test_convert.cc): small random models in other
frameworks' exact file layouts, and what an independent implementation computes with them.

  /usr/bin/python3 tools/make_convert_fixtures.py --tfm build/release/tfm [--out tests/fixtures/convert]

The SentencePiece models (source.spm, target.spm) are trained by `tfm vocab` on a few sentences (the
Python sentencepiece package is not needed); the Marian id table (*.vocab.yml) is </s> 0, <unk> 1 and
then the two models' pieces, as Marian's `marian-vocab` / OPUS-MT's joint vocabularies list them.

Folders written (sources followed, for names, shapes, dtypes and metadata):

  marian/        an OPUS-MT layout: decoder.yml, opus.spm.vocab.yml, source.spm, target.spm and
                 opus.spm.transformer.npz (numpy.savez: uncompressed zip of .npy arrays, as Marian's
                 cnpy writes) with Marian's names (src/models/transformer.h; CTranslate2 v4.8.1
                 python/ctranslate2/converters/marian.py reads the same): Wemb [V, d] (tied-embeddings-all),
                 encoder_l{i}_self_W{q,k,v,o} [d, d] (in, out), _b{q,k,v,o} [1, d],
                 encoder_l{i}_self_Wo_ln_{scale,bias} [1, d], encoder_l{i}_ffn_W1 [d, d_ff], _b1, _W2,
                 _b2, encoder_l{i}_ffn_ffn_ln_{scale,bias}; decoder_l{i}_self_*, decoder_l{i}_context_*
                 (cross-attention), decoder_l{i}_ffn_*; decoder_ff_logit_out_b [1, V]; and
                 special:model.yml (int8 bytes of the YAML options, NUL-terminated). Post-norm, swish.
  marian_prenorm/  the same layout with --transformer-preprocess n --transformer-postprocess da
                 --transformer-postprocess-top n (the _ln_*_pre names and encoder_top_ln_*), relu,
                 --tied-embeddings false: encoder_Wemb, decoder_Wemb, decoder_ff_logit_out_W [d, V].
  huggingface/   marian/'s model as transformers' convert_marian_to_pytorch.py writes it
                 (MarianMTModel.save_pretrained): config.json (MarianConfig), model.safetensors
                 (model.shared.weight [V+1, d] with the appended zero <pad> row, final_logits_bias
                 [1, V+1], model.{encoder,decoder}.embed_positions.weight, model.encoder.layers.N.
                 self_attn.{q,k,v,out}_proj.{weight,bias}, self_attn_layer_norm, fc1, fc2,
                 final_layer_norm, decoder encoder_attn and encoder_attn_layer_norm; tied copies
                 left out, as save_pretrained does), vocab.json, source.spm, target.spm.
  fairseq/, fairseq_prenorm/
                 checkpoint.pt as fairseq's checkpoint_utils.save_state writes it (args, model, ...),
                 dict.txt, sentencepiece.bpe.model; post-norm/relu/shared/sinusoidal and
                 pre-norm/gelu/untied/learned positions.
  opennmt/, opennmt_separate/
                 model_step_1000.pt as OpenNMT-py v3.5.1's ModelSaver._save writes it (torch.save of
                 {"model", "generator", "vocab": {"src": [...], "tgt": [...], ...}, "opt":
                 argparse.Namespace, "optim"}; names of onmt/encoders/transformer.py,
                 onmt/decoders/transformer.py, onmt/modules/embeddings.py: emb_luts.0, pe.pe
                 [5000, 1, d], transformer.N / transformer_layers.N with self_attn.linear_{query,keys,
                 values}, final_linear, context_attn, layer_norm(_1, _2), feed_forward.{w_1, w_2,
                 layer_norm}), with the SentencePiece model(s): one shared vocabulary and all three
                 matrices one, SinusoidalInterleaved, relu, no attention biases; and separate
                 vocabularies, only the generator tied to the decoder's embedding, SinusoidalConcat,
                 gelu, attention biases, no FFN biases.
  <name>_staged/ what python/tfm/convert.py stages from each fairseq and OpenNMT-py checkpoint for
                 `tfm convert --from tfm-names` (the C++ tests read these).
  reference.safetensors
                 per Marian folder ("<name>.src", ".tgt_in", ".logits", ".greedy"): a padded batch of
                 source ids (tfm's pad id V, the appended <pad>), teacher-forced target inputs (the
                 decoder start V, Marian's zero embedding, first), the logits over Marian's V tokens computed here in float64 with Marian's
                 semantics from Marian's arrays (zero start embedding, Marian's [sin | cos]
                 table with log(10000)/(d/2 - 1), LayerNorm eps 1e-6), and the greedy outputs (8 steps, eos 0 ends);
                 the same per fairseq and OpenNMT-py folder, computed with each framework's semantics
                 (fairseq_forward, onmt_forward) from its own arrays.
"""

import argparse
import importlib.util
import json
import math
import os
import shutil
import struct
import subprocess
import tempfile

import numpy as np

# python/tfm/convert.py, loaded as a file: the package's __init__ needs the compiled module.
_SPEC = importlib.util.spec_from_file_location(
    "tfm_convert", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tfm",
                                "convert.py"))
CONVERTER = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(CONVERTER)

SEED = 45
D, HEADS, D_FF, LAYERS = 16, 2, 32, 2
SENTENCES = [
    "the cat sat on the mat", "a dog ran in the park", "der hund lief im park",
    "die katze sass auf der matte", "we translate small sentences", "wir uebersetzen kleine saetze",
    "models from other toolkits", "modelle aus anderen werkzeugen",
]


def train_spm(tfm, text, prefix, size):
    with open(prefix + ".txt", "w") as f:
        f.write("\n".join(text) + "\n")
    subprocess.run([tfm, "vocab", "-i", prefix + ".txt", "-o", prefix, "--size", str(size),
                    "--threads", "1"], check=True, capture_output=True)
    pieces = [line.split("\t")[0] for line in open(prefix + ".vocab", encoding="utf-8")]
    return open(prefix + ".model", "rb").read(), pieces


def yaml_piece(piece):
    """A piece as Marian's vocabulary .yml quotes it (YAML double quotes when needed)."""
    plain = piece and not any(c in piece for c in ':#"\'\\') and piece[0] not in "-?,[]{}&*!|>%@`'"
    if plain and not piece.isdigit() and piece.lower() not in ("true", "false", "null", "yes", "no"):
        return piece
    return '"' + piece.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sinusoid_halves(positions, d):
    pos = np.arange(positions, dtype=np.float64)[:, None]
    angle = pos / np.power(10000.0, 2 * np.arange(d // 2, dtype=np.float64) / d)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


def sinusoid_t2t(positions, d):
    """fairseq's table: [sin | cos] halves with log(10000) / (d/2 - 1), row p for position p."""
    half = d // 2
    rate = np.exp(np.arange(half, dtype=np.float64) * -(np.log(10000.0) / (half - 1)))
    angle = np.arange(positions, dtype=np.float64)[:, None] * rate[None, :]
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


def layer_norm(x, scale, bias, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale.reshape(-1) + bias.reshape(-1)


ACTIVATIONS = {"swish": lambda x: x / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0)}


def attention(w, prefix, x, memory, mask):
    """Marian's multi-head attention: x W + b per projection, softmax(q k^T / sqrt(d_k)) v, W_o."""
    def proj(v, n):
        return v @ w[f"{prefix}_W{n}"] + w[f"{prefix}_b{n}"].reshape(-1)

    q, k, v = proj(x, "q"), proj(memory, "k"), proj(memory, "v")
    dk = D // HEADS
    heads = []
    for h in range(HEADS):
        s = slice(h * dk, (h + 1) * dk)
        scores = q[:, s] @ k[:, s].T / np.sqrt(dk)
        scores = np.where(mask, scores, -np.inf)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        heads.append((p / p.sum(-1, keepdims=True)) @ v[:, s])
    return np.concatenate(heads, axis=1) @ w[f"{prefix}_Wo"] + w[f"{prefix}_bo"].reshape(-1)


def sublayer(w, prefix, x, f, pre):
    """Marian's 'dan' (post-norm) or 'n' ... 'da' (pre-norm) around f."""
    if pre:
        return x + f(layer_norm(x, w[prefix + "_ln_scale_pre"], w[prefix + "_ln_bias_pre"]))
    return layer_norm(x + f(x), w[prefix + "_ln_scale"], w[prefix + "_ln_bias"])


def ffn(w, prefix, act):
    return lambda x: (ACTIVATIONS[act](x @ w[prefix + "_W1"] + w[prefix + "_b1"].reshape(-1))
                      @ w[prefix + "_W2"] + w[prefix + "_b2"].reshape(-1))


def marian_forward(w, opts, src, tgt_in):
    """Logits [T, V] of one sentence pair; tgt_in[0] is the start (Marian: a zero embedding)."""
    pre, act = opts["pre"], opts["act"]
    src_emb = w["Wemb"] if "Wemb" in w else w["encoder_Wemb"]
    tgt_emb = w["Wemb"] if "Wemb" in w else w["decoder_Wemb"]
    table = sinusoid_t2t(64, D)  # Marian's own table (src/graph/node_initializers.cpp)
    x = src_emb[src] * np.sqrt(D) + table[: len(src)]
    full = np.ones((len(src), len(src)), dtype=bool)
    for i in range(1, LAYERS + 1):
        p = f"encoder_l{i}"
        x = sublayer(w, p + "_self_Wo", x, lambda v: attention(w, p + "_self", v, v, full), pre)
        x = sublayer(w, p + "_ffn_ffn", x, ffn(w, p + "_ffn", act), pre)
    if pre:
        x = layer_norm(x, w["encoder_top_ln_scale"], w["encoder_top_ln_bias"])
    emb = np.stack([np.zeros(D) if t == len(tgt_emb) else tgt_emb[t] for t in tgt_in])
    y = emb * np.sqrt(D) + table[: len(tgt_in)]
    causal = np.tril(np.ones((len(tgt_in), len(tgt_in)), dtype=bool))
    cross = np.ones((len(tgt_in), len(src)), dtype=bool)
    for i in range(1, LAYERS + 1):
        p = f"decoder_l{i}"
        y = sublayer(w, p + "_self_Wo", y, lambda v: attention(w, p + "_self", v, v, causal), pre)
        y = sublayer(w, p + "_context_Wo", y,
                     lambda v: attention(w, p + "_context", v, x, cross), pre)
        y = sublayer(w, p + "_ffn_ffn", y, ffn(w, p + "_ffn", act), pre)
    if pre:
        y = layer_norm(y, w["decoder_top_ln_scale"], w["decoder_top_ln_bias"])
    out = w["decoder_ff_logit_out_W"] if "decoder_ff_logit_out_W" in w else tgt_emb.T
    return y @ out + w["decoder_ff_logit_out_b"].reshape(-1)


def random_marian(rng, vocab, pre, tied):
    f32 = lambda *shape, scale=0.5: (rng.standard_normal(shape) * scale).astype(np.float32)
    w = {}
    if tied:
        w["Wemb"] = f32(vocab, D)
    else:
        w["encoder_Wemb"], w["decoder_Wemb"] = f32(vocab, D), f32(vocab, D)
        w["decoder_ff_logit_out_W"] = f32(D, vocab)
    w["decoder_ff_logit_out_b"] = f32(1, vocab, scale=0.1)
    suffix = "_pre" if pre else ""

    def norm(prefix):
        w[prefix + "_ln_scale" + suffix] = (1 + f32(1, D, scale=0.1)).astype(np.float32)
        w[prefix + "_ln_bias" + suffix] = f32(1, D, scale=0.1)

    def attn(prefix):
        for n in "qkvo":
            w[f"{prefix}_W{n}"], w[f"{prefix}_b{n}"] = f32(D, D), f32(1, D, scale=0.1)
        norm(prefix + "_Wo")

    for i in range(1, LAYERS + 1):
        for side in ("encoder", "decoder"):
            p = f"{side}_l{i}"
            attn(p + "_self")
            if side == "decoder":
                attn(p + "_context")
            w[p + "_ffn_W1"], w[p + "_ffn_b1"] = f32(D, D_FF), f32(1, D_FF, scale=0.1)
            w[p + "_ffn_W2"], w[p + "_ffn_b2"] = f32(D_FF, D), f32(1, D, scale=0.1)
            norm(p + "_ffn_ffn")
    if pre:
        for side in ("encoder", "decoder"):
            w[side + "_top_ln_scale"] = (1 + f32(1, D, scale=0.1)).astype(np.float32)
            w[side + "_top_ln_bias"] = f32(1, D, scale=0.1)
    return w


def model_yml(vocab, pre, act, tied):
    empty = '""'
    return "\n".join([
        "bert-train-type-embeddings: true", "dec-cell: gru", f"dec-depth: {LAYERS}",
        f"dim-emb: {D}", f"dim-vocabs:\n  - {vocab}\n  - {vocab}", f"enc-depth: {LAYERS}",
        "layer-normalization: false", "right-left: false", "skip: false",
        "tied-embeddings: false",
        f"tied-embeddings-all: {'true' if tied else 'false'}", "tied-embeddings-src: false",
        f"transformer-aan-activation: {act}", "transformer-decoder-autoreg: self-attention",
        f"transformer-dim-ffn: {D_FF}", f"transformer-ffn-activation: {act}",
        "transformer-ffn-depth: 2", "transformer-guided-alignment-layer: last",
        f"transformer-heads: {HEADS}", "transformer-no-projection: false",
        f"transformer-postprocess: {'da' if pre else 'dan'}", "transformer-postprocess-emb: d",
        f"transformer-postprocess-top: {'n' if pre else empty}",
        f"transformer-preprocess: {'n' if pre else empty}",
        "transformer-train-position-embeddings: false", "type: transformer",
        "version: v1.9.56 (2020-04-21)", ""])


def greedy(w, opts, src, vocab, steps=8):
    out = [vocab]  # the decoder start (tfm's id of the appended <pad>)
    for _ in range(steps):
        token = int(np.argmax(marian_forward(w, opts, src, out)[-1]))
        out.append(token)
        if token == 0:
            break
    return out[1:] + [-1] * (steps + 1 - len(out))


def write_safetensors(path, tensors, metadata):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, value in tensors.items():
        raw = np.ascontiguousarray(value).tobytes()
        dtype = {np.dtype("float32"): "F32", np.dtype("int32"): "I32"}[value.dtype]
        header[name] = {"dtype": dtype, "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_huggingface(out, w, pieces, spm, act):
    """marian/'s model as convert_marian_to_pytorch.py + save_pretrained (safetensors) write it."""
    os.makedirs(out, exist_ok=True)
    vocab = len(pieces)
    t = {"final_logits_bias": np.concatenate([w["decoder_ff_logit_out_b"],
                                              np.zeros((1, 1), np.float32)], axis=1),
         "model.shared.weight": np.concatenate([w["Wemb"], np.zeros((1, D), np.float32)])}
    table = sinusoid_halves(512, D).astype(np.float32)
    for side in ("encoder", "decoder"):
        t[f"model.{side}.embed_positions.weight"] = table
        for i in range(LAYERS):
            hf, m = f"model.{side}.layers.{i}", f"{side}_l{i + 1}"
            blocks = [("self_attn", "_self")] + ([("encoder_attn", "_context")]
                                                 if side == "decoder" else [])
            for name, marian in blocks:
                for p, n in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"), ("out_proj", "o")):
                    t[f"{hf}.{name}.{p}.weight"] = np.ascontiguousarray(w[f"{m}{marian}_W{n}"].T)
                    t[f"{hf}.{name}.{p}.bias"] = w[f"{m}{marian}_b{n}"].reshape(-1)
                t[f"{hf}.{name}_layer_norm.weight"] = w[f"{m}{marian}_Wo_ln_scale"].reshape(-1)
                t[f"{hf}.{name}_layer_norm.bias"] = w[f"{m}{marian}_Wo_ln_bias"].reshape(-1)
            for n in ("1", "2"):
                t[f"{hf}.fc{n}.weight"] = np.ascontiguousarray(w[f"{m}_ffn_W{n}"].T)
                t[f"{hf}.fc{n}.bias"] = w[f"{m}_ffn_b{n}"].reshape(-1)
            t[f"{hf}.final_layer_norm.weight"] = w[f"{m}_ffn_ffn_ln_scale"].reshape(-1)
            t[f"{hf}.final_layer_norm.bias"] = w[f"{m}_ffn_ffn_ln_bias"].reshape(-1)
    write_safetensors(os.path.join(out, "model.safetensors"), t, {"format": "pt"})
    config = {
        "_name_or_path": "opus-mt-tiny-random", "activation_dropout": 0.0,
        "activation_function": act, "architectures": ["MarianMTModel"],
        "attention_dropout": 0.0, "bad_words_ids": [[vocab]], "bos_token_id": 0,
        "classif_dropout": 0.0, "classifier_dropout": 0.0, "d_model": D,
        "decoder_attention_heads": HEADS, "decoder_ffn_dim": D_FF, "decoder_layerdrop": 0.0,
        "decoder_layers": LAYERS, "decoder_start_token_id": vocab, "decoder_vocab_size": vocab + 1,
        "dropout": 0.1, "encoder_attention_heads": HEADS, "encoder_ffn_dim": D_FF,
        "encoder_layerdrop": 0.0, "encoder_layers": LAYERS, "eos_token_id": 0,
        "forced_eos_token_id": 0, "init_std": 0.02, "is_encoder_decoder": True,
        "max_length": 512, "max_position_embeddings": 512, "model_type": "marian",
        "normalize_embedding": False, "num_beams": 4, "num_hidden_layers": LAYERS,
        "pad_token_id": vocab, "scale_embedding": True, "share_encoder_decoder_embeddings": True,
        "static_position_embeddings": True, "torch_dtype": "float32",
        "transformers_version": "4.34.0", "use_cache": True, "vocab_size": vocab + 1}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({p: i for i, p in enumerate(pieces + ["<pad>"])}, f, ensure_ascii=False, indent=2)
    for name, data in spm.items():
        open(os.path.join(out, name), "wb").write(data)


def write_marian(out, w, yml, pieces, spm):
    os.makedirs(out, exist_ok=True)
    arrays = dict(w)
    arrays["special:model.yml"] = np.frombuffer(yml.encode() + b"\0", dtype=np.int8)
    np.savez(os.path.join(out, "opus.spm.transformer.npz"), **arrays)
    with open(os.path.join(out, "opus.spm.vocab.yml"), "w", encoding="utf-8") as f:
        f.writelines(f"{yaml_piece(p)}: {i}\n" for i, p in enumerate(pieces))
    with open(os.path.join(out, "decoder.yml"), "w") as f:
        f.write("models:\n  - opus.spm.transformer.npz\nvocabs:\n  - opus.spm.vocab.yml\n"
                "  - opus.spm.vocab.yml\nbeam-size: 4\nnormalize: 0.6\nword-penalty: 0\n"
                "mini-batch: 16\nmaxi-batch: 100\nmaxi-batch-sort: src\nrelative-paths: true\n")
    for name, data in spm.items():
        open(os.path.join(out, name), "wb").write(data)


def reference(rng, name, w, opts, vocab, tensors):
    """A padded batch of 3 (pad = tfm's <pad>, V), its logits and greedy outputs."""
    lengths = [5, 3, 4]
    srcs = [list(rng.integers(2, vocab, n - 1)) + [0] for n in lengths]  # Marian ends with </s>
    tgts = [[vocab] + list(rng.integers(2, vocab, 4)) for _ in lengths]
    src = np.full((3, max(lengths)), vocab, np.int32)
    for row, s in enumerate(srcs):
        src[row, : len(s)] = s
    logits = np.stack([marian_forward(w, opts, s, t) for s, t in zip(srcs, tgts)])
    tensors[name + ".src"] = src
    tensors[name + ".tgt_in"] = np.array(tgts, np.int32)
    tensors[name + ".logits"] = logits.astype(np.float32)
    tensors[name + ".greedy"] = np.array([greedy(w, opts, s, vocab) for s in srcs], np.int32)


# fairseq (fairseq/models/transformer/*, fairseq/modules/sinusoidal_positional_embedding.py).
FAIRSEQ_PAD, FAIRSEQ_EOS = 1, 2


def fairseq_attention(w, prefix, x, memory, mask):
    lin = lambda v, n: v @ w[f"{prefix}.{n}_proj.weight"].T + w[f"{prefix}.{n}_proj.bias"]
    q, k, v = lin(x, "q") * (D // HEADS) ** -0.5, lin(memory, "k"), lin(memory, "v")
    dk, heads = D // HEADS, []
    for h in range(HEADS):
        sl = slice(h * dk, (h + 1) * dk)
        scores = np.where(mask, q[:, sl] @ k[:, sl].T, -np.inf)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        heads.append((p / p.sum(-1, keepdims=True)) @ v[:, sl])
    out = np.concatenate(heads, axis=1)
    return out @ w[f"{prefix}.out_proj.weight"].T + w[f"{prefix}.out_proj.bias"]


def fairseq_forward(w, opts, src, tgt_in):
    """Logits [T, V] of fairseq's TransformerModel (eval) for one pair; tgt_in starts with </s>."""
    pre, act = opts["pre"], {"relu": lambda x: np.maximum(x, 0),
                             "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / np.sqrt(2)))}[opts["act"]]
    ln = lambda x, p: layer_norm(x, w[p + ".weight"], w[p + ".bias"], 1e-5)

    def block(x, norm, f):
        return x + f(ln(x, norm)) if pre else ln(x + f(x), norm)

    def positions(side, n):  # positions padding_idx + 1 on
        if opts["learned"]:
            return w[f"{side}.embed_positions.weight"][FAIRSEQ_PAD + 1: FAIRSEQ_PAD + 1 + n]
        return sinusoid_t2t(n + FAIRSEQ_PAD + 1, D)[FAIRSEQ_PAD + 1:]

    def ffn(p):
        return lambda v: act(v @ w[p + ".fc1.weight"].T + w[p + ".fc1.bias"]) @ w[p + ".fc2.weight"].T + w[p + ".fc2.bias"]

    x = w["encoder.embed_tokens.weight"][src] * np.sqrt(D) + positions("encoder", len(src))
    full = np.ones((len(src), len(src)), dtype=bool)
    for i in range(LAYERS):
        p = f"encoder.layers.{i}"
        x = block(x, p + ".self_attn_layer_norm", lambda v: fairseq_attention(w, p + ".self_attn", v, v, full))
        x = block(x, p + ".final_layer_norm", ffn(p))
    if pre:
        x = ln(x, "encoder.layer_norm")
    y = w["decoder.embed_tokens.weight"][tgt_in] * np.sqrt(D) + positions("decoder", len(tgt_in))
    causal = np.tril(np.ones((len(tgt_in), len(tgt_in)), dtype=bool))
    cross = np.ones((len(tgt_in), len(src)), dtype=bool)
    for i in range(LAYERS):
        p = f"decoder.layers.{i}"
        y = block(y, p + ".self_attn_layer_norm", lambda v: fairseq_attention(w, p + ".self_attn", v, v, causal))
        y = block(y, p + ".encoder_attn_layer_norm",
                  lambda v: fairseq_attention(w, p + ".encoder_attn", v, x, cross))
        y = block(y, p + ".final_layer_norm", ffn(p))
    if pre:
        y = ln(y, "decoder.layer_norm")
    return y @ w["decoder.output_projection.weight"].T


def fairseq_greedy(w, opts, src, steps=8):
    out = [FAIRSEQ_EOS]
    for _ in range(steps):
        token = int(np.argmax(fairseq_forward(w, opts, src, out)[-1]))
        out.append(token)
        if token == FAIRSEQ_EOS:
            break
    return out[1:]


def random_fairseq(rng, vocab, opts):
    f32 = lambda *shape, scale=0.5: (rng.standard_normal(shape) * scale).astype(np.float32)
    w = {}
    emb = f32(vocab, D)
    emb[FAIRSEQ_PAD] = 0  # fairseq's nn.Embedding(padding_idx=1) keeps the pad row at zero
    w["encoder.embed_tokens.weight"] = emb
    w["decoder.embed_tokens.weight"] = emb if opts["shared"] else f32(vocab, D)
    w["decoder.output_projection.weight"] = w["decoder.embed_tokens.weight"] if opts["shared"] \
        else f32(vocab, D)
    for side in ("encoder", "decoder"):
        if opts["learned"]:
            w[f"{side}.embed_positions.weight"] = f32(64 + FAIRSEQ_PAD + 1, D)
        for i in range(LAYERS):
            p = f"{side}.layers.{i}"
            for block in ["self_attn"] + (["encoder_attn"] if side == "decoder" else []):
                for n in ("k", "v", "q", "out"):
                    w[f"{p}.{block}.{n}_proj.weight"] = f32(D, D)
                    w[f"{p}.{block}.{n}_proj.bias"] = f32(D, scale=0.1)
                w[f"{p}.{block}_layer_norm.weight"] = 1 + f32(D, scale=0.1)
                w[f"{p}.{block}_layer_norm.bias"] = f32(D, scale=0.1)
            w[p + ".fc1.weight"], w[p + ".fc1.bias"] = f32(D_FF, D), f32(D_FF, scale=0.1)
            w[p + ".fc2.weight"], w[p + ".fc2.bias"] = f32(D, D_FF), f32(D, scale=0.1)
            w[p + ".final_layer_norm.weight"] = 1 + f32(D, scale=0.1)
            w[p + ".final_layer_norm.bias"] = f32(D, scale=0.1)
        if opts["pre"]:
            w[side + ".layer_norm.weight"] = 1 + f32(D, scale=0.1)
            w[side + ".layer_norm.bias"] = f32(D, scale=0.1)
    return w


def write_fairseq(out, w, opts, pieces, spm_model):
    """checkpoint.pt as fairseq 0.9's checkpoint_utils.save_state writes it (args, model, ...)."""
    import argparse as ap
    from collections import OrderedDict

    import torch

    os.makedirs(out, exist_ok=True)
    args = ap.Namespace(
        arch="transformer", encoder_embed_dim=D, decoder_embed_dim=D, encoder_ffn_embed_dim=D_FF,
        decoder_ffn_embed_dim=D_FF, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
        encoder_normalize_before=opts["pre"], decoder_normalize_before=opts["pre"],
        activation_fn=opts["act"], share_all_embeddings=opts["shared"],
        share_decoder_input_output_embed=opts["shared"], encoder_learned_pos=opts["learned"],
        decoder_learned_pos=opts["learned"], max_source_positions=64, max_target_positions=64,
        no_scale_embedding=False, layernorm_embedding=False, adaptive_softmax_cutoff=None,
        no_token_positional_embeddings=False, dropout=0.1, task="translation",
        source_lang="en", target_lang="de", bpe="sentencepiece")
    state = OrderedDict()
    tensors = {}
    for name, value in w.items():  # tied weights share one tensor, as in the module
        key = id(value)
        tensors.setdefault(key, torch.from_numpy(np.array(value)))
        state[name] = tensors[key]
    if not opts["learned"]:
        for side in ("encoder", "decoder"):
            # fairseq registers torch.FloatTensor(1), uninitialised; zeros keep the file reproducible
            state[f"{side}.embed_positions._float_tensor"] = torch.zeros(1)
    state["encoder.version"] = torch.Tensor([3])
    state["decoder.version"] = torch.Tensor([3])
    torch.save({"args": args, "model": state, "optimizer_history": [], "extra_state": {},
                "last_optimizer_state": None}, os.path.join(out, "checkpoint.pt"))
    with open(os.path.join(out, "dict.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{p} {100 - i}\n" for i, p in enumerate(pieces[4:]))
    open(os.path.join(out, "sentencepiece.bpe.model"), "wb").write(spm_model)


def fairseq_fixtures(rng, out, src_model, src_pieces, tensors):
    specials = {"<pad>", "<unk>", "<s>", "</s>"}
    pieces = ["<s>", "<pad>", "</s>", "<unk>"] + [p for p in src_pieces if p not in specials]
    vocab = len(pieces)
    variants = {"fairseq": dict(pre=False, act="relu", shared=True, learned=False),
                "fairseq_prenorm": dict(pre=True, act="gelu", shared=False, learned=True)}
    for name, opts in variants.items():
        w = random_fairseq(rng, vocab, opts)
        folder = os.path.join(out, name)
        write_fairseq(folder, w, opts, pieces, src_model)
        # What python3 -m tfm.convert stages for `tfm convert --from tfm-names`, for the C++ test.
        spm = os.path.join(folder, "sentencepiece.bpe.model")
        config, params, table = CONVERTER.fairseq_conversion(
            os.path.join(folder, "checkpoint.pt"), os.path.join(folder, "dict.txt"))
        CONVERTER.write_staging(os.path.join(out, name + "_staged"), config, params, table, spm,
                                spm)
        srcs = [list(rng.integers(4, vocab, n)) + [FAIRSEQ_EOS] for n in (4, 2, 3)]
        tensors[name + ".greedy"] = np.array(
            [(fairseq_greedy(w, opts, s) + [-1] * 9)[:8] for s in srcs], np.int32)
        src = np.full((3, 5), FAIRSEQ_PAD, np.int32)
        for row, s_ in enumerate(srcs):
            src[row, : len(s_)] = s_
        tgts = [[FAIRSEQ_EOS] + list(rng.integers(4, vocab, 4)) for _ in srcs]
        tensors[name + ".src"] = src
        tensors[name + ".tgt_in"] = np.array(tgts, np.int32)
        tensors[name + ".logits"] = np.stack(
            [fairseq_forward(w, opts, s_, t) for s_, t in zip(srcs, tgts)]).astype(np.float32)


# OpenNMT-py v3 (onmt/encoders/transformer.py, onmt/decoders/transformer.py,
# onmt/modules/{embeddings,multi_headed_attn,position_ffn}.py, onmt/model_builder.py,
# onmt/models/model_saver.py, onmt/inputters/inputter.py at v3.5.1). A smaller d_model than the
# others: the checkpoint holds two [5000, 1, d] sinusoid tables (PositionalEncoding's max_len).
ONMT_D, ONMT_HEADS, ONMT_FF, ONMT_MAX_LEN = 8, 2, 16, 5000
ONMT_SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]  # opts' default_specials, build_vocab's order
ONMT_BOS, ONMT_EOS = 2, 3


def onmt_pe(layout):
    """PositionalEncoding's buffer as OpenNMT-py computes it (float32 torch), [max_len, 1, d]."""
    import torch

    d, max_len = ONMT_D, ONMT_MAX_LEN
    if layout == "SinusoidalInterleaved":
        pe = torch.zeros(max_len, d)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float) * -(math.log(10000.0) / d))
        pe[:, 0::2] = torch.sin(position.float() * div_term)
        pe[:, 1::2] = torch.cos(position.float() * div_term)
    else:  # SinusoidalConcat
        half = d // 2
        rate = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
        angle = torch.arange(max_len, dtype=torch.float).unsqueeze(1) * rate.unsqueeze(0)
        pe = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).view(max_len, -1)
    return pe.unsqueeze(1).numpy()


def onmt_forward(w, g, opts, src, tgt_in):
    """Logits [T, V_tgt] of OpenNMT-py's NMTModel (eval) for one pair, in float64: pre-norm layers
    (LayerNorm eps 1e-6 before each sub-layer, the residual around it), final LayerNorms,
    embeddings * sqrt(d) + pe[position], queries divided by sqrt(d_k), the generator's Linear."""
    d, dk = ONMT_D, ONMT_D // ONMT_HEADS
    act = {"relu": lambda x: np.maximum(x, 0),
           "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / np.sqrt(2)))}[opts["act"]]
    ln = lambda x, p: layer_norm(x, w[p + ".weight"], w[p + ".bias"], 1e-6)  # noqa: E731

    def linear(x, p):
        return x @ w[p + ".weight"].T + (w[p + ".bias"] if p + ".bias" in w else 0)

    def attention(p, query, memory, mask):  # MultiHeadedAttention(key=memory, value=memory, query)
        q = linear(query, p + ".linear_query") / np.sqrt(dk)
        k, v = linear(memory, p + ".linear_keys"), linear(memory, p + ".linear_values")
        heads = []
        for h in range(ONMT_HEADS):
            s = slice(h * dk, (h + 1) * dk)
            scores = np.where(mask, q[:, s] @ k[:, s].T, -np.inf)
            e = np.exp(scores - scores.max(-1, keepdims=True))
            heads.append((e / e.sum(-1, keepdims=True)) @ v[:, s])
        return linear(np.concatenate(heads, axis=1), p + ".final_linear")

    def feed_forward(p, x):  # PositionwiseFeedForward: its own LayerNorm and residual
        return linear(act(linear(ln(x, p + ".layer_norm"), p + ".w_1")), p + ".w_2") + x

    def embed(side, ids):
        table = w[f"{side}.embeddings.make_embedding.emb_luts.0.weight"]
        pe = w[f"{side}.embeddings.make_embedding.pe.pe"][:len(ids), 0].astype(np.float64)
        return table[ids].astype(np.float64) * np.sqrt(d) + pe

    x = embed("encoder", src)
    full = np.ones((len(src), len(src)), dtype=bool)
    for i in range(LAYERS):
        p = f"encoder.transformer.{i}"
        h = ln(x, p + ".layer_norm")
        x = feed_forward(p + ".feed_forward", attention(p + ".self_attn", h, h, full) + x)
    x = ln(x, "encoder.layer_norm")
    y = embed("decoder", tgt_in)
    causal = np.tril(np.ones((len(tgt_in), len(tgt_in)), dtype=bool))
    cross = np.ones((len(tgt_in), len(src)), dtype=bool)
    for i in range(LAYERS):
        p = f"decoder.transformer_layers.{i}"
        h = ln(y, p + ".layer_norm_1")
        query = attention(p + ".self_attn", h, h, causal) + y
        h = ln(query, p + ".layer_norm_2")
        y = feed_forward(p + ".feed_forward", attention(p + ".context_attn", h, x, cross) + query)
    y = ln(y, "decoder.layer_norm")
    return y @ g["weight"].T + g["bias"]


def onmt_greedy(w, g, opts, src, steps=8):
    out = [ONMT_BOS]
    for _ in range(steps):
        token = int(np.argmax(onmt_forward(w, g, opts, src, out)[-1]))
        out.append(token)
        if token == ONMT_EOS:
            break
    return out[1:]


def random_onmt(rng, n_src, n_tgt, opts):
    """(model state dict, generator state dict) of random float32 arrays; shared matrices are one
    array (share_embeddings, share_decoder_embeddings), as the module's tied parameters are."""
    f32 = lambda *shape, scale=0.5: (rng.standard_normal(shape) * scale).astype(np.float32)  # noqa
    w = {"encoder.embeddings.make_embedding.emb_luts.0.weight": f32(n_src, ONMT_D)}
    w["encoder.embeddings.make_embedding.pe.pe"] = onmt_pe(opts["layout"])
    w["decoder.embeddings.make_embedding.emb_luts.0.weight"] = \
        w["encoder.embeddings.make_embedding.emb_luts.0.weight"] if opts["share_embeddings"] \
        else f32(n_tgt, ONMT_D)
    w["decoder.embeddings.make_embedding.pe.pe"] = onmt_pe(opts["layout"])

    def norm(p):
        w[p + ".weight"], w[p + ".bias"] = 1 + f32(ONMT_D, scale=0.1), f32(ONMT_D, scale=0.1)

    def attention(p):
        for n in ("linear_keys", "linear_values", "linear_query", "final_linear"):
            w[f"{p}.{n}.weight"] = f32(ONMT_D, ONMT_D)
            if opts["qkv_bias"]:
                w[f"{p}.{n}.bias"] = f32(ONMT_D, scale=0.1)

    def feed_forward(p):
        w[p + ".w_1.weight"], w[p + ".w_2.weight"] = f32(ONMT_FF, ONMT_D), f32(ONMT_D, ONMT_FF)
        if opts["ffn_bias"]:
            w[p + ".w_1.bias"], w[p + ".w_2.bias"] = f32(ONMT_FF, scale=0.1), f32(ONMT_D, scale=0.1)
        norm(p + ".layer_norm")

    for i in range(LAYERS):  # in the modules' order of registration
        p = f"encoder.transformer.{i}"
        attention(p + ".self_attn")
        feed_forward(p + ".feed_forward")
        norm(p + ".layer_norm")
    norm("encoder.layer_norm")
    for i in range(LAYERS):
        p = f"decoder.transformer_layers.{i}"
        attention(p + ".self_attn")
        feed_forward(p + ".feed_forward")
        norm(p + ".layer_norm_1")
        attention(p + ".context_attn")
        norm(p + ".layer_norm_2")
    norm("decoder.layer_norm")
    g = {"weight": w["decoder.embeddings.make_embedding.emb_luts.0.weight"]
         if opts["share_decoder_embeddings"] else f32(n_tgt, ONMT_D),
         "bias": f32(n_tgt, scale=0.1)}
    return w, g


def onmt_options(opts, spm_names):
    """The model_opt a v3.5 training run saves (argparse.Namespace), with the keys that describe the
    model and its data; a real one has every option of onmt/opts.py."""
    from argparse import Namespace

    size = dict(enc_hid_size=ONMT_D, dec_hid_size=ONMT_D, src_word_vec_size=ONMT_D,
                tgt_word_vec_size=ONMT_D, hidden_size=ONMT_D, word_vec_size=ONMT_D)
    return Namespace(
        model_task="seq2seq", model_type="text", encoder_type="transformer",
        decoder_type="transformer", layers=LAYERS, enc_layers=LAYERS, dec_layers=LAYERS, **size,
        heads=ONMT_HEADS, transformer_ff=ONMT_FF, position_encoding=True,
        position_encoding_type=opts["layout"], max_relative_positions=0,
        relative_positions_buckets=0, self_attn_type="scaled-dot",
        pos_ffn_activation_fn=opts["act"], layer_norm="standard", norm_eps=1e-6,
        add_qkvbias=opts["qkv_bias"], add_ffnbias=opts["ffn_bias"], multiquery=False, num_kv=0,
        parallel_residual=False, shared_layer_norm=False, num_experts=0, num_experts_per_tok=2,
        sliding_window=0, rotary_interleave=False, rotary_theta=10000, rotary_dim=0,
        aan_useffn=False, copy_attn=False, generator_function="softmax",
        share_embeddings=opts["share_embeddings"],
        share_decoder_embeddings=opts["share_decoder_embeddings"], share_vocab=opts["shared"],
        lambda_align=0.0, alignment_layer=-3, alignment_heads=0, full_context_alignment=False,
        dropout=[0.1], attention_dropout=[0.1], model_dtype="fp32", lora_layers=[],
        lora_embedding=False, quant_layers=[], feat_merge="concat", n_src_feats=0,
        transforms=["sentencepiece", "filtertoolong"], src_subword_model=spm_names[0],
        tgt_subword_model=spm_names[1], src_seq_length=192, tgt_seq_length=192,
        default_specials=list(ONMT_SPECIALS), decoder_start_token="<s>", save_model="run/model",
        save_checkpoint_steps=1000, train_steps=1000, seed=1234)


def write_onmt(path, w, g, opts, vocab, spm_names):
    """model_step_1000.pt as ModelSaver._save writes it: the state dict less the generator, the
    generator's, vocabs_to_dict's plain lists, the model_opt and the optimiser's state."""
    from collections import OrderedDict

    import torch

    tensors = {}

    def state(arrays):  # one tensor per array: tied parameters share their storage
        return OrderedDict((n, tensors.setdefault(id(a), torch.from_numpy(np.array(a))))
                           for n, a in arrays.items())

    checkpoint = {"model": state(w), "generator": state(g),
                  "vocab": {"src": vocab[0], "tgt": vocab[1], "data_task": "seq2seq",
                            "decoder_start_token": "<s>"},
                  "opt": onmt_options(opts, spm_names),
                  "optim": {"training_step": 1001, "decay_step": 1001,
                            "optimizer": {"state": {}, "param_groups": []}}}
    torch.save(checkpoint, path)


def onmt_fixtures(rng, out, spm, pieces, tensors):
    """opennmt/: one SentencePiece model and one vocabulary for both sides (share_vocab,
    share_embeddings, share_decoder_embeddings: tie_embeddings all), SinusoidalInterleaved, relu,
    no attention biases, FFN biases; opennmt_separate/: source and target models with their own
    vocabularies (tfm's table: the target's, then the source's other pieces), only the decoder's
    embedding shared with the generator, SinusoidalConcat, gelu, attention biases, no FFN biases."""
    own = lambda ps: [p for p in ps if p not in {"<pad>", "<unk>", "<s>", "</s>"}]  # noqa: E731
    joint = ONMT_SPECIALS + own(pieces["source.spm"])
    variants = {
        "opennmt": (dict(shared=True, share_embeddings=True, share_decoder_embeddings=True,
                         layout="SinusoidalInterleaved", act="relu", qkv_bias=False,
                         ffn_bias=True), (joint, joint), ("spm.model", "spm.model"),
                    ("source.spm", "source.spm")),
        "opennmt_separate": (dict(shared=False, share_embeddings=False,
                                  share_decoder_embeddings=True, layout="SinusoidalConcat",
                                  act="gelu", qkv_bias=True, ffn_bias=False),
                             (ONMT_SPECIALS + own(pieces["source.spm"]),
                              ONMT_SPECIALS + own(pieces["target.spm"])),
                             ("source.model", "target.model"), ("source.spm", "target.spm"))}
    for name, (opts, vocab, spm_names, spm_sides) in variants.items():
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        for file, side in zip(spm_names, spm_sides):
            open(os.path.join(folder, file), "wb").write(spm[side])
        w, g = random_onmt(rng, len(vocab[0]), len(vocab[1]), opts)
        checkpoint = os.path.join(folder, "model_step_1000.pt")
        write_onmt(checkpoint, w, g, opts, vocab, spm_names)
        config, params, table = CONVERTER.opennmt_conversion(checkpoint)
        CONVERTER.write_staging(os.path.join(out, name + "_staged"), config, params, table,
                                os.path.join(folder, spm_names[0]),
                                os.path.join(folder, spm_names[1]), source_eos=False)
        # A padded batch in tfm's ids (the table's: source pieces by name), OpenNMT-py's own ids for
        # its computation; no </s> after the source, targets start with <s>.
        srcs = [list(rng.integers(len(ONMT_SPECIALS), len(vocab[0]), n)) for n in (4, 2, 3)]
        src = np.full((3, 4), table.index("<blank>"), np.int32)
        for row, s in enumerate(srcs):
            src[row, : len(s)] = [table.index(vocab[0][i]) for i in s]
        tgts = [[ONMT_BOS] + list(rng.integers(len(ONMT_SPECIALS), len(vocab[1]), 4)) for _ in srcs]
        tensors[name + ".src"] = src
        tensors[name + ".tgt_in"] = np.array(tgts, np.int32)
        tensors[name + ".logits"] = np.stack(
            [onmt_forward(w, g, opts, s, t) for s, t in zip(srcs, tgts)]).astype(np.float32)
        tensors[name + ".greedy"] = np.array(
            [(onmt_greedy(w, g, opts, s) + [-1] * 9)[:8] for s in srcs], np.int32)
        print(f"{name}: {len(vocab[0])} source and {len(vocab[1])} target pieces, tfm's table "
              f"{len(table)}, tie_embeddings {config['tie_embeddings']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tfm", required=True, help="the tfm program (trains the .spm models)")
    parser.add_argument("--out", default="tests/fixtures/convert")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory() as tmp:
        src_model, src_pieces = train_spm(args.tfm, SENTENCES[0::2] + SENTENCES[4:5], tmp + "/s", 40)
        tgt_model, tgt_pieces = train_spm(args.tfm, SENTENCES[1::2], tmp + "/t", 40)
    specials = {"<pad>", "<unk>", "<s>", "</s>"}
    pieces = ["</s>", "<unk>"]
    for p in src_pieces + tgt_pieces:
        if p not in specials and p not in pieces:
            pieces.append(p)
    spm = {"source.spm": src_model, "target.spm": tgt_model}
    vocab = len(pieces)
    shutil.rmtree(args.out, ignore_errors=True)
    tensors = {}
    variants = {"marian": dict(pre=False, act="swish", tied=True),
                "marian_prenorm": dict(pre=True, act="relu", tied=False)}
    for name, v in variants.items():
        w = random_marian(rng, vocab, v["pre"], v["tied"])
        write_marian(os.path.join(args.out, name), w, model_yml(vocab, v["pre"], v["act"], v["tied"]),
                     pieces, spm)
        reference(rng, name, w, v, vocab, tensors)
        if name == "marian":
            write_huggingface(os.path.join(args.out, "huggingface"), w, pieces, spm, v["act"])
    fairseq_fixtures(rng, args.out, src_model, src_pieces, tensors)
    onmt_fixtures(rng, args.out, spm, {"source.spm": src_pieces, "target.spm": tgt_pieces}, tensors)
    write_safetensors(os.path.join(args.out, "reference.safetensors"), tensors,
                      {"producer": "tools/make_convert_fixtures.py"})
    print(f"wrote {args.out}: V = {vocab} (+ <pad>), d = {D}, {LAYERS} layers")


if __name__ == "__main__":
    main()
