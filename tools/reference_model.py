#!/usr/bin/python3
"""Plain-PyTorch reference of the tfm Transformer (the model specification in the design notes).

Written with our own modules instead of nn.Transformer so that every detail the C++ model must match is
visible here: post-norm by default (pre-norm option), no attention biases by default, one embedding matrix
shared by source, target and the pre-softmax projection and scaled by sqrt(d_model), interleaved sinusoidal
positions (or learned tables), source padding masks derived from pad_id, a causal-only decoder
self-attention mask, dropout on every sub-layer output and on the embedding+position sums, and
label-smoothed cross entropy that ignores pad targets.

`named_parameters()` yields exactly the spec's names, shapes and order; `check_parameter_names` asserts it
against `expected_parameter_shapes`, which is written from the spec independently of the modules.

Run directly (`/usr/bin/python3 tools/reference_model.py`) for a self-check of every preset's names and the
spec's parameter counts.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

# The spec's config.json keys with the base model's values.
BASE_CONFIG = {
    "layers": 6,
    "d_model": 512,
    "d_ff": 2048,
    "heads": 8,
    "d_k": 64,
    "d_v": 64,
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "label_smoothing": 0.1,
    "positional": "sinusoidal",
    "max_positions": 1024,
    "vocab_size": 37000,
    "norm": "post",
    "attention_bias": False,
    "layer_norm_eps": 1e-5,
    "pad_id": 0,
    "unk_id": 1,
    "bos_id": 2,
    "eos_id": 3,
    "task": "translation",
    # The model variants of other toolkits (docs/MODEL_FORMAT.md); these values are the paper's.
    "activation": "relu",
    "tie_embeddings": "all",
    "output_bias": False,
    "scale_embeddings": True,
    "sinusoid": "interleaved",
    "position_offset": 0,
    "decoder_start_id": -1,
    "decoder_layers": -1,  # -1: as many as layers
}

# Table 3 of the paper; unlisted values are the base model's.
PRESETS = {
    "base": {},
    "big": {"d_model": 1024, "d_ff": 4096, "heads": 16, "d_k": 64, "d_v": 64, "dropout": 0.3},
    "A1": {"heads": 1, "d_k": 512, "d_v": 512},
    "A2": {"heads": 4, "d_k": 128, "d_v": 128},
    "A3": {"heads": 16, "d_k": 32, "d_v": 32},
    "A4": {"heads": 32, "d_k": 16, "d_v": 16},
    "B1": {"d_k": 16},
    "B2": {"d_k": 32},
    "C1": {"layers": 2},
    "C2": {"layers": 4},
    "C3": {"layers": 8},
    "C4": {"d_model": 256, "d_k": 32, "d_v": 32},
    "C5": {"d_model": 1024, "d_k": 128, "d_v": 128},
    "C6": {"d_ff": 1024},
    "C7": {"d_ff": 4096},
    "D1": {"dropout": 0.0},
    "D2": {"dropout": 0.2},
    "D3": {"label_smoothing": 0.0},
    "D4": {"label_smoothing": 0.2},
    "E": {"positional": "learned"},
}


def make_config(values=None):
    """A full config from a dict of the spec's keys (missing keys take the base model's values)."""
    values = dict(values or {})
    unknown = sorted(set(values) - set(BASE_CONFIG))
    if unknown:
        raise ValueError(f"config: unknown keys {unknown}")
    cfg = dict(BASE_CONFIG)
    cfg.update(values)
    for key in ("layers", "d_model", "d_ff", "heads", "d_k", "d_v", "max_positions", "vocab_size"):
        if not isinstance(cfg[key], int) or cfg[key] <= 0:
            raise ValueError(f"config: {key} must be a positive integer, got {cfg[key]!r}")
    if not isinstance(cfg["decoder_layers"], int) or not (cfg["decoder_layers"] == -1
                                                           or cfg["decoder_layers"] > 0):
        raise ValueError(f"config: decoder_layers must be -1 or positive, got {cfg['decoder_layers']!r}")
    if cfg["positional"] not in ("sinusoidal", "learned"):
        raise ValueError(f"config: positional must be sinusoidal or learned, got {cfg['positional']!r}")
    if cfg["norm"] not in ("post", "pre"):
        raise ValueError(f"config: norm must be post or pre, got {cfg['norm']!r}")
    if cfg["d_model"] % 2 != 0:
        raise ValueError("config: d_model must be even (sin/cos pairs of the positional encoding)")
    choices = {"activation": ("relu", "gelu", "swish"), "tie_embeddings": ("all", "decoder", "none"),
               "sinusoid": ("interleaved", "halves", "halves_t2t")}
    for key, valid in choices.items():
        if cfg[key] not in valid:
            raise ValueError(f"config: {key} must be one of {valid}, got {cfg[key]!r}")
    if not 0 <= cfg["position_offset"] < cfg["max_positions"]:
        raise ValueError(f"config: position_offset must be in [0, max_positions), got {cfg['position_offset']!r}")
    if not -1 <= cfg["decoder_start_id"] < cfg["vocab_size"]:
        raise ValueError(f"config: decoder_start_id must be -1 or a token id, got {cfg['decoder_start_id']!r}")
    for key in ("dropout", "attention_dropout", "label_smoothing"):
        if not 0.0 <= cfg[key] < 1.0:
            raise ValueError(f"config: {key} must be in [0, 1), got {cfg[key]!r}")
    return cfg


VARIANT_KEYS = ("activation", "tie_embeddings", "output_bias", "scale_embeddings", "sinusoid",
                "position_offset", "decoder_start_id", "decoder_layers")


def config_json(cfg):
    """The config as config.json holds it: the variant keys only where they differ from the paper's
    (as tfm's save_config writes it), so a paper-architecture config is the file it always was."""
    return {k: v for k, v in cfg.items() if k not in VARIANT_KEYS or v != BASE_CONFIG[k]}


def preset_config(name, **overrides):
    """The config of a named preset (base, big, A1..E) with optional key overrides."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    values = dict(PRESETS[name])
    values.update(overrides)
    return make_config(values)


def expected_parameter_shapes(cfg):
    """[(name, shape)] exactly as the spec lists them, independent of the modules below."""
    d, dff, h, dk, dv = cfg["d_model"], cfg["d_ff"], cfg["heads"], cfg["d_k"], cfg["d_v"]
    learned = cfg["positional"] == "learned"
    pre = cfg["norm"] == "pre"

    def attention(prefix):
        out = []
        for proj, shape in (("q_proj", [h * dk, d]), ("k_proj", [h * dk, d]),
                            ("v_proj", [h * dv, d]), ("out_proj", [d, h * dv])):
            out.append((f"{prefix}.{proj}.weight", shape))
            if cfg["attention_bias"]:
                out.append((f"{prefix}.{proj}.bias", [shape[0]]))
        return out

    def norm(prefix):
        return [(f"{prefix}.weight", [d]), (f"{prefix}.bias", [d])]

    def ffn(prefix):
        return [(f"{prefix}.fc1.weight", [dff, d]), (f"{prefix}.fc1.bias", [dff]),
                (f"{prefix}.fc2.weight", [d, dff]), (f"{prefix}.fc2.bias", [d])]

    vocabulary = [cfg["vocab_size"], d]
    names = [(name, vocabulary) for name in vocabulary_matrix_names(cfg)]
    if cfg["output_bias"]:
        names.append(("output_projection.bias", [cfg["vocab_size"]]))
    if learned:
        names.append(("encoder.positions.weight", [cfg["max_positions"], d]))
    for i in range(cfg["layers"]):
        p = f"encoder.layers.{i}"
        names += attention(f"{p}.self_attn") + norm(f"{p}.self_attn_norm")
        names += ffn(f"{p}.ffn") + norm(f"{p}.ffn_norm")
    if pre:
        names += norm("encoder.final_norm")
    if learned:
        names.append(("decoder.positions.weight", [cfg["max_positions"], d]))
    for i in range(decoder_depth(cfg)):
        p = f"decoder.layers.{i}"
        names += attention(f"{p}.self_attn") + norm(f"{p}.self_attn_norm")
        names += attention(f"{p}.cross_attn") + norm(f"{p}.cross_attn_norm")
        names += ffn(f"{p}.ffn") + norm(f"{p}.ffn_norm")
    if pre:
        names += norm("decoder.final_norm")
    return names


def decoder_depth(cfg):
    """The decoder's layers: decoder_layers, or layers when it is -1."""
    return cfg["layers"] if cfg["decoder_layers"] == -1 else cfg["decoder_layers"]


def vocabulary_matrix_names(cfg):
    """The distinct [V, d] matrices of tie_embeddings, in parameter order."""
    return {"all": ["embedding.weight"],
            "decoder": ["source_embedding.weight", "target_embedding.weight"],
            "none": ["source_embedding.weight", "target_embedding.weight",
                     "output_projection.weight"]}[cfg["tie_embeddings"]]


def decoder_start(cfg):
    """The first decoder input: decoder_start_id, or bos_id when it is -1."""
    return cfg["bos_id"] if cfg["decoder_start_id"] < 0 else cfg["decoder_start_id"]


def sinusoidal_encoding(length, d_model, dtype, device=None, layout="interleaved", first=0):
    """Rows first .. first+length-1 of the sinusoid table in `layout` (docs/MODEL_FORMAT.md):

    interleaved (the paper): PE[pos, 2i] = sin(pos w_i), PE[pos, 2i+1] = cos(pos w_i), w_i = 10000^(-2i/d);
    halves (HF MarianMT): PE[pos, i] = sin(pos w_i), PE[pos, d/2 + i] = cos(pos w_i), the same w_i;
    halves_t2t (Marian, fairseq): the halves with w_i = exp(-i ln(10000) / (d/2 - 1)).

    Computed in float64 and then cast, so the reference carries no float32 rounding of the angles.
    """
    pos = torch.arange(first, first + length, dtype=torch.float64, device=device).unsqueeze(1)
    i = torch.arange(d_model // 2, dtype=torch.float64, device=device)
    if layout == "halves_t2t":
        frequency = torch.exp(-i * math.log(10000.0) / (d_model // 2 - 1))
    else:
        frequency = torch.pow(torch.tensor(10000.0, dtype=torch.float64, device=device), -2 * i / d_model)
    angle = pos * frequency
    pe = torch.empty(length, d_model, dtype=torch.float64, device=device)
    if layout == "interleaved":
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle)
    else:
        pe[:, :d_model // 2] = torch.sin(angle)
        pe[:, d_model // 2:] = torch.cos(angle)
    return pe.to(dtype)


class MultiHeadAttention(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        d, h, dk, dv = cfg["d_model"], cfg["heads"], cfg["d_k"], cfg["d_v"]
        bias = cfg["attention_bias"]
        self.heads, self.d_k, self.d_v = h, dk, dv
        self.attention_dropout = cfg["attention_dropout"]
        # False: the attention written out below (the reference's default, every step visible). True:
        # torch.nn.functional.scaled_dot_product_attention, the same math in one fused (flash) kernel
        # where the device has one; Transformer.set_attention sets it on every layer.
        self.use_sdpa = False
        # True: forward keeps its attention weights [B, h, Tq, Tk] in kept_weights (the written-out
        # path only), for the attention-page fixture (tools/make_attention_fixture.py).
        self.keep_weights = False
        self.kept_weights = None
        self.q_proj = nn.Linear(d, h * dk, bias=bias, device=device)
        self.k_proj = nn.Linear(d, h * dk, bias=bias, device=device)
        self.v_proj = nn.Linear(d, h * dv, bias=bias, device=device)
        self.out_proj = nn.Linear(h * dv, d, bias=bias, device=device)

    def forward(self, query, memory, key_padding_mask=None, causal=False):
        """query [B, Tq, d], memory [B, Tk, d]; key_padding_mask [B, Tk] bool, True = masked key."""
        b, tq, _ = query.shape
        tk = memory.shape[1]
        # [B, T, h*dk] -> [B, h, T, dk]: head j owns columns j*dk .. (j+1)*dk-1 of the projection.
        q = self.q_proj(query).view(b, tq, self.heads, self.d_k).transpose(1, 2)
        k = self.k_proj(memory).view(b, tk, self.heads, self.d_k).transpose(1, 2)
        v = self.v_proj(memory).view(b, tk, self.heads, self.d_v).transpose(1, 2)
        if self.use_sdpa:
            heads = _sdpa(q, k, v, key_padding_mask, causal,
                          self.attention_dropout if self.training else 0.0)
            return self.out_proj(heads.transpose(1, 2).reshape(b, tq, self.heads * self.d_v))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        # -inf gives masked keys exactly zero weight after the softmax.
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        if causal:
            future = torch.ones(tq, tk, dtype=torch.bool, device=scores.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if self.keep_weights:
            self.kept_weights = weights.detach()
        if self.attention_dropout > 0:
            weights = F.dropout(weights, self.attention_dropout, self.training)
        heads = torch.matmul(weights, v)  # [B, h, Tq, dv]
        concat = heads.transpose(1, 2).reshape(b, tq, self.heads * self.d_v)
        return self.out_proj(concat)


def _sdpa(q, k, v, key_padding_mask, causal, dropout):
    """scaled_dot_product_attention with the reference's masks: [B, h, Tq, dv].

    Without a padding mask the flash kernel can run (it takes no explicit mask); the causal mask is
    is_causal (top-left aligned, as the triu(1) mask above: query i sees keys 0..i, and Tq == Tk in
    the decoder's self-attention). A padding mask becomes attn_mask (True = attend), which
    scaled_dot_product_attention sends to a kernel that takes masks. The scale is its default,
    1/sqrt(d_k), as above.
    """
    if not hasattr(F, "scaled_dot_product_attention"):
        raise RuntimeError(f"torch {torch.__version__} has no scaled_dot_product_attention (2.0+)")
    mask = None
    if key_padding_mask is not None:
        mask = ~key_padding_mask[:, None, None, :]
        if causal:
            tq, tk = q.shape[-2], k.shape[-2]
            mask = mask & torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril()
            causal = False
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout,
                                          is_causal=causal)


class FeedForward(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.fc1 = nn.Linear(cfg["d_model"], cfg["d_ff"], device=device)
        self.fc2 = nn.Linear(cfg["d_ff"], cfg["d_model"], device=device)
        # gelu: the erf form (approximate="none"); swish: x sigmoid(x) (SiLU).
        self.activation = {"relu": torch.relu, "gelu": F.gelu, "swish": F.silu}[cfg["activation"]]

    def forward(self, x):
        return self.fc2(self.activation(self.fc1(x)))


def _layer_norm(cfg, device):
    return nn.LayerNorm(cfg["d_model"], eps=cfg["layer_norm_eps"], device=device)


class _Residual:
    """Post-norm: LN(x + dropout(f(x))). Pre-norm: x + dropout(f(LN(x)))."""

    def __init__(self, cfg, training):
        self.pre = cfg["norm"] == "pre"
        self.p = cfg["dropout"]
        self.training = training

    def __call__(self, x, norm, sublayer):
        if self.pre:
            return x + F.dropout(sublayer(norm(x)), self.p, self.training)
        return norm(x + F.dropout(sublayer(x), self.p, self.training))


class EncoderLayer(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.cfg = cfg
        self.self_attn = MultiHeadAttention(cfg, device)
        self.self_attn_norm = _layer_norm(cfg, device)
        self.ffn = FeedForward(cfg, device)
        self.ffn_norm = _layer_norm(cfg, device)

    def forward(self, x, src_pad_mask):
        residual = _Residual(self.cfg, self.training)
        x = residual(x, self.self_attn_norm, lambda h: self.self_attn(h, h, src_pad_mask))
        return residual(x, self.ffn_norm, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.cfg = cfg
        self.self_attn = MultiHeadAttention(cfg, device)
        self.self_attn_norm = _layer_norm(cfg, device)
        self.cross_attn = MultiHeadAttention(cfg, device)
        self.cross_attn_norm = _layer_norm(cfg, device)
        self.ffn = FeedForward(cfg, device)
        self.ffn_norm = _layer_norm(cfg, device)

    def forward(self, y, memory, src_pad_mask):
        residual = _Residual(self.cfg, self.training)
        y = residual(y, self.self_attn_norm, lambda h: self.self_attn(h, h, None, causal=True))
        y = residual(y, self.cross_attn_norm, lambda h: self.cross_attn(h, memory, src_pad_mask))
        return residual(y, self.ffn_norm, self.ffn)


class _Stack(nn.Module):
    """Positions (learned only), the layers, and final_norm (pre-norm only), registered in spec order."""

    def __init__(self, cfg, layer_type, depth, device=None):
        super().__init__()
        self.cfg = cfg
        if cfg["positional"] == "learned":
            self.positions = nn.Embedding(cfg["max_positions"], cfg["d_model"], device=device)
        self.layers = nn.ModuleList([layer_type(cfg, device) for _ in range(depth)])
        if cfg["norm"] == "pre":
            self.final_norm = _layer_norm(cfg, device)

    def embed(self, embedding, ids):
        """dropout(E[ids] * sqrt(d) + P[offset:offset + len]) (no sqrt(d) without scale_embeddings)."""
        length = ids.shape[1]
        offset = self.cfg["position_offset"]
        if length + offset > self.cfg["max_positions"]:
            raise ValueError(f"sequence length {length} exceeds max_positions {self.cfg['max_positions']}"
                             f" less position_offset {offset}")
        x = embedding(ids)
        if self.cfg["scale_embeddings"]:
            x = x * math.sqrt(self.cfg["d_model"])
        if self.cfg["positional"] == "learned":
            x = x + self.positions.weight[offset:offset + length]
        else:
            x = x + sinusoidal_encoding(length, self.cfg["d_model"], x.dtype, x.device,
                                        self.cfg["sinusoid"], offset)
        return F.dropout(x, self.cfg["dropout"], self.training)

    def finish(self, x):
        return self.final_norm(x) if self.cfg["norm"] == "pre" else x


class Encoder(_Stack):
    def __init__(self, cfg, device=None):
        super().__init__(cfg, EncoderLayer, cfg["layers"], device)

    def forward(self, embedding, src, src_pad_mask):
        x = self.embed(embedding, src)
        for layer in self.layers:
            x = layer(x, src_pad_mask)
        return self.finish(x)


class Decoder(_Stack):
    def __init__(self, cfg, device=None):
        super().__init__(cfg, DecoderLayer, decoder_depth(cfg), device)

    def forward(self, embedding, tgt_in, memory, src_pad_mask):
        y = self.embed(embedding, tgt_in)
        for layer in self.layers:
            y = layer(y, memory, src_pad_mask)
        return self.finish(y)


class Transformer(nn.Module):
    def __init__(self, cfg, device=None, init=True):
        super().__init__()
        self.cfg = make_config(cfg)
        cfg = self.cfg
        # tie_embeddings "all": one matrix shared by source embedding, target embedding and the
        # pre-softmax projection; "decoder": the target's is the projection; "none": three. No
        # padding_idx: the pad row is an ordinary parameter. Registered in the spec's order.
        v, d = cfg["vocab_size"], cfg["d_model"]
        tie = cfg["tie_embeddings"]
        if tie == "all":
            self.embedding = nn.Embedding(v, d, device=device)
        else:
            self.source_embedding = nn.Embedding(v, d, device=device)
            self.target_embedding = nn.Embedding(v, d, device=device)
        if tie == "none" or cfg["output_bias"]:
            self.output_projection = nn.Module()
            if tie == "none":
                self.output_projection.weight = nn.Parameter(torch.empty(v, d, device=device))
            if cfg["output_bias"]:
                self.output_projection.bias = nn.Parameter(torch.zeros(v, device=device))
        self.encoder = Encoder(cfg, device)
        self.decoder = Decoder(cfg, device)
        check_parameter_names(self)
        if init:
            self.reset_parameters()

    def set_attention(self, kind):
        """"matmul" (the default: attention written out) or "sdpa" (scaled_dot_product_attention)."""
        if kind not in ("matmul", "sdpa"):
            raise ValueError(f"attention must be matmul or sdpa, got {kind!r}")
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                module.use_sdpa = kind == "sdpa"
        return self

    def reset_parameters(self):
        """Default initialisation: xavier-uniform weights, zero biases, embeddings normal(0, d^-0.5)."""
        d = self.cfg["d_model"]
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            elif name in VOCABULARY_MATRICES or name.endswith("positions.weight"):
                nn.init.normal_(p, 0.0, d**-0.5)
            else:
                nn.init.xavier_uniform_(p)

    def source_table(self):
        return self.embedding if self.cfg["tie_embeddings"] == "all" else self.source_embedding

    def target_table(self):
        return self.embedding if self.cfg["tie_embeddings"] == "all" else self.target_embedding

    def output_logits(self, y):
        """y W^T (+ b): W the target embedding unless tie_embeddings is none."""
        tie = self.cfg["tie_embeddings"]
        weight = self.output_projection.weight if tie == "none" else self.target_table().weight
        logits = torch.matmul(y, weight.t())
        if self.cfg["output_bias"]:
            logits = logits + self.output_projection.bias
        return logits

    def source_padding_mask(self, src):
        """[B, S] bool, True where key position >= source length (count of non-pad tokens)."""
        lengths = (src != self.cfg["pad_id"]).sum(dim=1)
        if bool((lengths == 0).any()):
            raise ValueError("source batch contains an empty sentence (all pad)")
        positions = torch.arange(src.shape[1], device=src.device)
        return positions[None, :] >= lengths[:, None]

    def forward(self, src, tgt_in, padded=True):
        """src [B, S], tgt_in [B, T] int ids -> logits [B, T, V] = y E^T.

        padded=False: the caller guarantees that src holds no pad, so no source mask is made. Same
        result; it spares source_padding_mask's check (a host synchronisation on a GPU, and a break in
        a torch.compile graph) and lets fused attention run without a mask.
        """
        src_pad_mask = self.source_padding_mask(src) if padded else None
        memory = self.encoder(self.source_table(), src, src_pad_mask)
        y = self.decoder(self.target_table(), tgt_in, memory, src_pad_mask)
        return self.output_logits(y)

    def loss(self, logits, tgt_out):
        """Mean label-smoothed CE over non-pad targets (smoothing eps/V spread over all V classes)."""
        v = logits.shape[-1]
        return F.cross_entropy(logits.reshape(-1, v), tgt_out.reshape(-1),
                               ignore_index=self.cfg["pad_id"],
                               label_smoothing=self.cfg["label_smoothing"])


# Every name a [V, d] vocabulary matrix may have (initialised as embeddings).
VOCABULARY_MATRICES = ("embedding.weight", "source_embedding.weight", "target_embedding.weight",
                       "output_projection.weight")


def check_parameter_names(model):
    """Asserts named_parameters() == the spec's list (names, shapes and order)."""
    actual = [(n, list(p.shape)) for n, p in model.named_parameters()]
    expected = expected_parameter_shapes(model.cfg)
    if actual != expected:
        diff = next((i for i, (a, e) in enumerate(zip(actual, expected)) if a != e),
                    min(len(actual), len(expected)))
        raise AssertionError(f"parameter list differs from the spec at index {diff}: "
                             f"got {actual[diff:diff + 1]}, spec {expected[diff:diff + 1]} "
                             f"({len(actual)} vs {len(expected)} parameters)")


def learning_rate(step, d_model, warmup, lr_scale=1.0):
    """The paper's schedule: lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step 1-based."""
    return lr_scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def make_optimizer(model, lr=1.0, **options):
    """The paper's Adam: betas (0.9, 0.98), eps 1e-9, no weight decay. options: torch.optim.Adam's
    implementation choices (e.g. fused=True on CUDA), which leave the math unchanged."""
    return torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9, **options)


SPEC_COUNTS = {("base", False): 63_045_632, ("big", False): 214_171_648,
               ("base", True): 63_082_496, ("big", True): 214_245_376}


def _self_check():
    for name in PRESETS:
        for bias in (False, True):
            for norm in ("post", "pre"):
                model = Transformer(preset_config(name, attention_bias=bias, norm=norm), device="meta",
                                    init=False)
                count = sum(p.numel() for p in model.parameters())
                if norm == "post" and (name, bias) in SPEC_COUNTS:
                    assert count == SPEC_COUNTS[(name, bias)], (name, bias, count)
    tiny = make_config({"layers": 2, "d_model": 16, "d_ff": 32, "heads": 2, "d_k": 8, "d_v": 8,
                        "vocab_size": 20, "max_positions": 16, "dropout": 0.0})
    model = Transformer(tiny)
    src = torch.tensor([[5, 6, 7, 0], [8, 9, 10, 11]])
    tgt_in = torch.tensor([[2, 5, 6], [2, 7, 0]])
    tgt_out = torch.tensor([[5, 6, 3], [7, 3, 0]])
    logits = model(src, tgt_in)
    loss = model.loss(logits, tgt_out)
    loss.backward()
    assert logits.shape == (2, 3, 20) and torch.isfinite(loss)
    for norm in ("post", "pre"):
        _cross_check_with_torch_layers(norm)
    _check_sinusoid_layouts()
    if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2.0+
        _check_sdpa()
    else:
        print(f"reference_model: no scaled_dot_product_attention in torch {torch.__version__}; "
              "the sdpa attention is not checked")
    print("reference_model self-check passed")


def _check_sinusoid_layouts():
    """The two half layouts against the formulas of the code that writes them: HF MarianMT's
    MarianSinusoidalPositionalEmbedding._init_weight (pos / 10000^(2 (j // 2) / dim); sin of the even
    j in the first half, cos of the odd j in the second) and fairseq's
    SinusoidalPositionalEmbedding.get_embedding (exp(arange(half) * -log(10000) / (half - 1)),
    cat([sin, cos])), transcribed; and every variant key's model runs forward and backward."""
    n, dim = 11, 12
    hf = [[pos / 10000 ** (2 * (j // 2) / dim) for j in range(dim)] for pos in range(n)]
    want = torch.tensor([[math.sin(row[j]) for j in range(0, dim, 2)] +
                         [math.cos(row[j]) for j in range(1, dim, 2)] for row in hf], dtype=torch.float64)
    assert torch.allclose(sinusoidal_encoding(n, dim, torch.float64, layout="halves"), want, atol=1e-12)
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000) / (half - 1)))
    angle = torch.arange(n, dtype=torch.float64)[:, None] * freq[None, :]
    want = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
    assert torch.allclose(sinusoidal_encoding(n, dim, torch.float64, layout="halves_t2t"), want, atol=1e-12)
    assert torch.allclose(sinusoidal_encoding(4, dim, torch.float64, layout="halves_t2t", first=2), want[2:6])
    small = {"layers": 1, "d_model": 8, "d_ff": 16, "heads": 2, "d_k": 4, "d_v": 4, "vocab_size": 20,
             "max_positions": 16, "dropout": 0.0}
    for variant in ({"activation": "gelu", "tie_embeddings": "decoder", "sinusoid": "halves"},
                    {"activation": "swish", "tie_embeddings": "none", "output_bias": True,
                     "scale_embeddings": False, "positional": "learned", "position_offset": 2}):
        model = Transformer(make_config({**small, **variant}))
        logits = model(torch.tensor([[5, 6, 7]]), torch.tensor([[2, 5, 6]]))
        model.loss(logits, torch.tensor([[5, 6, 3]])).backward()
        assert all(p.grad is not None for p in model.parameters()), variant


def _check_sdpa():
    """set_attention("sdpa") gives the written-out attention's logits and gradients (padded and
    unpadded sources, causal decoder), and padded=False the padded=True result on a batch without pad."""
    torch.manual_seed(0)
    cfg = make_config({"layers": 2, "d_model": 16, "d_ff": 32, "heads": 4, "d_k": 4, "d_v": 4,
                       "vocab_size": 30, "max_positions": 16, "dropout": 0.0})
    model = Transformer(cfg).double()
    padded_src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]])
    full_src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 13, 14]])
    tgt_in = torch.tensor([[2, 5, 6, 7], [2, 8, 9, 10]])
    tgt_out = torch.tensor([[5, 6, 7, 3], [8, 9, 10, 3]])

    def run(kind, src, padded=True):
        model.set_attention(kind)
        model.zero_grad(set_to_none=True)
        logits = model(src, tgt_in, padded=padded)
        model.loss(logits, tgt_out).backward()
        return logits.detach(), [p.grad.clone() for p in model.parameters()]

    for src in (padded_src, full_src):
        want, want_grads = run("matmul", src)
        for kind, padded in (("sdpa", True), ("sdpa", False), ("matmul", False)):
            if not padded and src is padded_src:
                continue
            got, got_grads = run(kind, src, padded)
            err = max([(got - want).abs().max().item()] +
                      [(a - b).abs().max().item() for a, b in zip(got_grads, want_grads)])
            assert err < 1e-12, f"attention {kind}, padded={padded}: differs by {err}"
    model.set_attention("matmul")


def _cross_check_with_torch_layers(norm):
    """Our encoder/decoder stack against PyTorch's nn.TransformerEncoderLayer/DecoderLayer.

    PyTorch's layers always have attention biases (set to zero here) and nn.Transformer would add final
    norms in post-norm mode, so the layers are chained by hand. Train mode with dropout 0 avoids the
    eval-mode fast path (which zeroes padded rows).
    """
    torch.manual_seed(0)
    cfg = make_config({"layers": 2, "d_model": 16, "d_ff": 32, "heads": 4, "d_k": 4, "d_v": 4,
                       "vocab_size": 30, "max_positions": 16, "dropout": 0.0, "norm": norm})
    model = Transformer(cfg).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))

    def attn(ours, theirs):
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight,
                                               ours.v_proj.weight]))
        theirs.in_proj_bias.zero_()
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.zero_()

    def common(ours, theirs, norms):
        theirs.linear1.load_state_dict(ours.ffn.fc1.state_dict())
        theirs.linear2.load_state_dict(ours.ffn.fc2.state_dict())
        for i, our_norm in enumerate(norms):
            getattr(theirs, f"norm{i + 1}").load_state_dict(our_norm.state_dict())

    kwargs = dict(d_model=16, nhead=4, dim_feedforward=32, dropout=0.0, batch_first=True,
                  norm_first=norm == "pre", layer_norm_eps=cfg["layer_norm_eps"], dtype=torch.float64)
    enc = [nn.TransformerEncoderLayer(**kwargs) for _ in range(2)]
    dec = [nn.TransformerDecoderLayer(**kwargs) for _ in range(2)]
    with torch.no_grad():
        for ours, theirs in zip(model.encoder.layers, enc):
            attn(ours.self_attn, theirs.self_attn)
            common(ours, theirs, (ours.self_attn_norm, ours.ffn_norm))
        for ours, theirs in zip(model.decoder.layers, dec):
            attn(ours.self_attn, theirs.self_attn)
            attn(ours.cross_attn, theirs.multihead_attn)
            common(ours, theirs, (ours.self_attn_norm, ours.cross_attn_norm, ours.ffn_norm))
    src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0], [13, 14, 0, 0, 0]])
    tgt_in = torch.tensor([[2, 5, 6, 7], [2, 8, 9, 0], [2, 10, 0, 0]])
    pad = model.source_padding_mask(src)
    causal = torch.full((4, 4), float("-inf"), dtype=torch.float64).triu(1)
    emb = model.embedding
    x = emb(src) * 4.0 + sinusoidal_encoding(5, 16, torch.float64)
    for layer in enc:
        x = layer(x, src_key_padding_mask=pad)
    y = emb(tgt_in) * 4.0 + sinusoidal_encoding(4, 16, torch.float64)
    if norm == "pre":
        x = model.encoder.final_norm(x)
    for layer in dec:
        y = layer(y, x, tgt_mask=causal, memory_key_padding_mask=pad)
    if norm == "pre":
        y = model.decoder.final_norm(y)
    expected = y @ emb.weight.t()
    actual = model(src, tgt_in)
    err = (actual - expected).abs().max().item()
    assert err < 1e-12, f"{norm}-norm stack differs from PyTorch's layers by {err}"
    # The paper's PE: sin at even, cos at odd columns of pos / 10000^(2i/d).
    pe = sinusoidal_encoding(3, 16, torch.float64)
    assert abs(pe[2, 6].item() - math.sin(2 / 10000 ** (6 / 16))) < 1e-15
    assert abs(pe[2, 7].item() - math.cos(2 / 10000 ** (6 / 16))) < 1e-15


if __name__ == "__main__":
    _self_check()
