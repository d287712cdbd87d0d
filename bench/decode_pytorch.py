#!/usr/bin/python3
"""PyTorch side of the decoding benchmark: the same weights and sources as tfm's bench_decode.

  /usr/bin/python3 bench/decode_pytorch.py --model-dir DIR [--beams 4,1] [--out-len 25] [--alpha 0.6]
      [--runs 2] [--warmup 1] [--threads 2] [--tfm-outputs FILE...]
      [--device cpu | cuda] [--precision f32 | bf16] [--attention matmul | sdpa]

DIR is what `bench_decode --model-dir DIR` wrote: config.json + model.safetensors (tfm's random weights) and
sources.safetensors (i32 [batch, src_len]). The model is tools/reference_model.py's Transformer; decoding is
written here on its modules with an incremental cache of projected keys and values (the same design as tfm's
nn::DecoderState): per decoder layer the self-attention K/V of every decoded position in a preallocated
buffer, reordered with index_select when beams are reordered, and the encoder-decoder K/V projected once per
sentence, shared by the beam rows of a sentence (they are its queries in one attention). Every output has
exactly out_len tokens (eos suppressed, as tfm's min_length = max_length = out_len), so both frameworks do
the same work. The search is what tfm does on this path: log-softmax, eos at -inf, per sentence the top 2k of
the k*V extensions, the first k kept (none ends: eos is suppressed), score / lp(out_len) at the end; greedy
takes the argmax. Encoder and search are timed. Prints one JSON line per mode with bench_decode's fields,
and, given tfm's outputs (one file per precision), how many sentences came out identical per tfm mode.

DIR can also come from tools/random_model.py (same files, PyTorch's random weights) when tfm's bench_decode
is not at hand. The batch is the sources' (bench_decode --batch B writes B sentences).

--device cuda (bench/gpu.sh): the whole search stays on the GPU (top-k, reordering, history), with a
torch.cuda.synchronize() before and after each timed run; attention defaults to
scaled_dot_product_attention there (the cached self-attention and the cross-attention need no mask on
sources without padding). --precision bf16 converts the weights to bf16 once (as tfm packs its bf16
weights once) and runs every product in bf16; the logits are turned to f32 before the log-softmax and the
scores stay f32. Rows are named as tfm's: beam4, greedy, and beam4-bf16, greedy-bf16 in bf16. Each row
also says the device, and on CUDA the peak GPU memory.
"""

import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
sys.path.insert(0, TOOLS)
from read_safetensors import read_safetensors  # noqa: E402
from reference_model import Transformer, _Residual, make_config, sinusoidal_encoding  # noqa: E402


class CachedDecoder:
    """Incremental decoding state for `sources` sentences with `beam` rows each (row r: sentence r // beam)."""

    def __init__(self, model, src, beam, capacity, sdpa=False):
        cfg = model.cfg
        self.model, self.beam, self.sdpa = model, beam, sdpa
        self.h, self.dk, self.dv, self.d = cfg["heads"], cfg["d_k"], cfg["d_v"], cfg["d_model"]
        device, dtype = src.device, model.embedding.weight.dtype
        self.pad_mask = model.source_padding_mask(src)  # [B, S], True = padding
        # For scaled_dot_product_attention: True = attend, or None when no source has padding (one
        # host check per batch), so that the fused kernels without a mask can run.
        self.attend = ~self.pad_mask[:, None, None, :] if bool(self.pad_mask.any()) else None
        memory = model.encoder(model.embedding, src, self.pad_mask)
        b, s, _ = memory.shape
        self.rows = b * beam
        self.cross = []
        self.self_k, self.self_v = [], []
        for layer in model.decoder.layers:
            a = layer.cross_attn
            k = a.k_proj(memory).view(b, s, self.h, self.dk).transpose(1, 2)  # [B, h, S, dk]
            v = a.v_proj(memory).view(b, s, self.h, self.dv).transpose(1, 2)
            self.cross.append((k, v))
            self.self_k.append(torch.empty(self.rows, self.h, capacity, self.dk, device=device,
                                           dtype=dtype))
            self.self_v.append(torch.empty(self.rows, self.h, capacity, self.dv, device=device,
                                           dtype=dtype))
        if cfg["positional"] == "learned":
            self.positions = model.decoder.positions.weight
        else:
            # In the weights' dtype: an f32 table would promote a bf16 model's activations to f32.
            self.positions = sinusoidal_encoding(capacity, self.d, dtype, device)
        self.length = 0

    def _self_attention(self, a, x, i):
        rows, t = x.shape[0], self.length
        q = a.q_proj(x).view(rows, 1, self.h, self.dk).transpose(1, 2)  # [rows, h, 1, dk]
        self.self_k[i][:, :, t:t + 1] = a.k_proj(x).view(rows, 1, self.h, self.dk).transpose(1, 2)
        self.self_v[i][:, :, t:t + 1] = a.v_proj(x).view(rows, 1, self.h, self.dv).transpose(1, 2)
        k, v = self.self_k[i][:, :, :t + 1], self.self_v[i][:, :, :t + 1]
        if self.sdpa:  # every cached position is visible to the new one: no mask
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            weights = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.dk), dim=-1)
            out = torch.matmul(weights, v)  # [rows, h, 1, dv]
        return a.out_proj(out.transpose(1, 2).reshape(rows, 1, self.h * self.dv))

    def _cross_attention(self, a, x, i):
        rows, b = x.shape[0], x.shape[0] // self.beam
        # The beam rows of a sentence are its queries: [B, h, beam, dk] against [B, h, S, dk].
        q = a.q_proj(x).view(b, self.beam, self.h, self.dk).transpose(1, 2)
        k, v = self.cross[i]
        if self.sdpa:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.attend)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.dk)
            scores = scores.masked_fill(self.pad_mask[:, None, None, :], float("-inf"))
            out = torch.matmul(torch.softmax(scores, dim=-1), v)  # [B, h, beam, dv]
        return a.out_proj(out.transpose(1, 2).reshape(rows, 1, self.h * self.dv))

    def step(self, tokens):
        """log p(next | prefix) [rows, V] given each row's last token [rows]; appends one position."""
        model, cfg = self.model, self.model.cfg
        residual = _Residual(cfg, training=False)
        y = model.embedding(tokens)[:, None, :] * math.sqrt(self.d) + self.positions[self.length]
        for i, layer in enumerate(model.decoder.layers):
            y = residual(y, layer.self_attn_norm, lambda h: self._self_attention(layer.self_attn, h, i))
            y = residual(y, layer.cross_attn_norm, lambda h: self._cross_attention(layer.cross_attn, h, i))
            y = residual(y, layer.ffn_norm, layer.ffn)
        y = model.decoder.finish(y)
        self.length += 1
        # f32 log-probabilities whatever the weights' dtype: the scores add up over out_len steps.
        return F.log_softmax(torch.matmul(y[:, 0], model.embedding.weight.t()).float(), dim=-1)

    def reorder(self, rows):
        """New row i continues old row rows[i] (within its sentence)."""
        t = self.length
        for buffers in (self.self_k, self.self_v):
            for buffer in buffers:
                buffer[:, :, :t] = buffer[:, :, :t].index_select(0, rows)


def beam_search(model, src, beam, out_len, alpha, bos, eos, sdpa=False):
    b, vocab, device = src.shape[0], model.cfg["vocab_size"], src.device
    decoder = CachedDecoder(model, src, beam, out_len, sdpa)
    scores = torch.full((b, beam), float("-inf"), device=device)
    scores[:, 0] = 0.0  # one live hypothesis per sentence at the start
    tokens = torch.full((b * beam,), bos, dtype=torch.long, device=device)
    history = torch.empty(b * beam, out_len, dtype=torch.long, device=device)
    first_rows = (torch.arange(b, device=device) * beam)[:, None]
    for step in range(out_len):
        log_probs = decoder.step(tokens)
        log_probs[:, eos] = float("-inf")  # min_length = out_len
        candidates = (scores.reshape(-1, 1) + log_probs).view(b, beam * vocab)
        top_scores, top_index = candidates.topk(2 * beam, dim=1)
        # No candidate ends (eos suppressed, out_len reached only after the last step), so the first k live.
        top_scores, top_index = top_scores[:, :beam], top_index[:, :beam]
        parents = (first_rows + top_index // vocab).view(-1)
        tokens = (top_index % vocab).view(-1)
        history = history.index_select(0, parents)
        history[:, step] = tokens
        scores = top_scores
        if step + 1 < out_len:
            decoder.reorder(parents)
    final = scores / ((5.0 + out_len) / 6.0) ** alpha
    best = (torch.arange(b, device=device) * beam + final.argmax(dim=1))
    return history[best]


def greedy_search(model, src, out_len, bos, eos, sdpa=False):
    b, device = src.shape[0], src.device
    decoder = CachedDecoder(model, src, 1, out_len, sdpa)
    tokens = torch.full((b,), bos, dtype=torch.long, device=device)
    history = torch.empty(b, out_len, dtype=torch.long, device=device)
    log_prob = torch.zeros(b, device=device)
    for step in range(out_len):
        log_probs = decoder.step(tokens)
        log_probs[:, eos] = float("-inf")
        tokens = log_probs.argmax(dim=1)
        log_prob += log_probs.gather(1, tokens[:, None])[:, 0]
        history[:, step] = tokens
    return history


def load(model_dir, device="cpu", dtype=torch.float32):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = make_config(json.load(f))
    model = Transformer(cfg, init=False)
    tensors, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    model.load_state_dict(tensors)
    model.eval()
    if device != "cpu" or dtype != torch.float32:
        model.to(device=device, dtype=dtype)
    sources, _ = read_safetensors(os.path.join(model_dir, "sources.safetensors"))
    return model, sources["sources"].long().to(device)


def main():
    parser = argparse.ArgumentParser(description="PyTorch decoding benchmark")
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--beams", default="4,1")
    parser.add_argument("--out-len", type=int, default=25)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tfm-outputs", nargs="*", default=[],
                        help="bench_decode's --outputs files, for the agreement counts")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--precision", default="f32", choices=("f32", "bf16"),
                        help="bf16: the weights converted to bf16 once, every product in bf16")
    parser.add_argument("--attention", default=None, choices=("matmul", "sdpa"),
                        help="default: sdpa (scaled_dot_product_attention) on cuda, matmul on cpu")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("decode_pytorch.py: --device cuda but torch.cuda.is_available() is False")
    attention = args.attention or ("sdpa" if args.device == "cuda" else "matmul")
    sdpa = attention == "sdpa"
    if sdpa and not hasattr(F, "scaled_dot_product_attention"):
        raise SystemExit(f"decode_pytorch.py: torch {torch.__version__} has no "
                         "scaled_dot_product_attention; use --attention matmul")
    cuda = args.device == "cuda"
    torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    model, src = load(args.model_dir, args.device, dtype)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    cfg = model.cfg
    tfm_outputs = {}  # tfm's mode ("beam4", "beam4-bf16", ...) -> its outputs
    for path in args.tfm_outputs:
        with open(path) as f:
            tfm_outputs.update(json.load(f))
    for beam in [int(x) for x in args.beams.split(",") if x]:
        search = "greedy" if beam == 1 else f"beam{beam}"
        mode = search + ("-bf16" if args.precision == "bf16" else "")  # tfm's names
        times = []
        with torch.inference_mode():
            for run in range(args.warmup + args.runs):
                if cuda:
                    torch.cuda.synchronize()
                start = time.perf_counter()
                if beam == 1:
                    out = greedy_search(model, src, args.out_len, cfg["bos_id"], cfg["eos_id"], sdpa)
                else:
                    out = beam_search(model, src, beam, args.out_len, args.alpha, cfg["bos_id"],
                                      cfg["eos_id"], sdpa)
                if cuda:
                    torch.cuda.synchronize()
                seconds = time.perf_counter() - start
                print(f"pytorch {mode} run {run}: {seconds:.3f} s" + (" (warm-up)" if run < args.warmup else ""),
                      file=sys.stderr, flush=True)
                if run >= args.warmup:
                    times.append(seconds)
        tokens = out.numel()
        mean = sum(times) / len(times)
        row = {"framework": "pytorch", "mode": mode, "precision": args.precision,
               "device": args.device, "attention": attention, "vocab": cfg["vocab_size"],
               "batch": src.shape[0], "beam": beam,
               "src_len": src.shape[1], "out_len": args.out_len, "threads": args.threads,
               "runs": args.runs, "seconds": mean, "best_seconds": min(times),
               "target_tokens_per_second": tokens / mean,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
               "torch_version": torch.__version__}
        if cuda:
            row["gpu"] = torch.cuda.get_device_name()
            row["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        # Per tfm mode of this search (f32, bf16): sentences with the same output, and tokens before
        # the first difference over all sentences (near-ties in random weights let float rounding pick
        # different tokens, after which the sentences diverge).
        ours = out.tolist()
        row["identical_to_tfm"], row["common_prefix_tokens"] = {}, {}
        for tfm_mode, theirs in tfm_outputs.items():
            if tfm_mode.split("-")[0] != search:
                continue
            row["identical_to_tfm"][tfm_mode] = sum(a == b for a, b in zip(ours, theirs))
            row["common_prefix_tokens"][tfm_mode] = sum(
                next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a)) for a, b in zip(ours, theirs))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
