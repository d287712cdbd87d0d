#!/usr/bin/python3
"""Times tfm (its Python module) or CTranslate2 decoding one batch of token sources, for
bench/ctranslate2.sh and bench/opus_mt_speed.sh:

  python3 bench/peer_decode.py --framework ctranslate2|tfm --model DIR --sources SOURCES.txt
      [--precision f32|int8] [--beams 4,1] [--threads 2] [--runs 3] [--warmup 1] [--out-len 25]
      [--label L] [--outputs OUT.json] [--ct2 BUILD_DIR]

SOURCES.txt: one source a line, the model's tokens separated by spaces, given to both as token lists
(no tokenizer runs; an imported model gets </s> appended by either, as its config says). All lines
are decoded as one batch. Every sentence decodes exactly --out-len tokens (the end of sentence is
forbidden before that length, and the search stops there: CTranslate2's min_decoding_length =
max_decoding_length, tfm's min_length = max_length), so that both do the same work whatever the
weights. Length penalty 0 (with equal lengths any penalty ranks alike).

Prints a JSON line per beam size as bench_decode does (mode "beam4" or "greedy", with -LABEL);
--outputs writes the best hypothesis of every sentence as tokens, {mode: [[token...]...]}.
A CTranslate2 model runs with compute_type float32 (f32) or int8_float32 (int8); tfm with
compute_type f32 or int8. --ct2: see bench/ct2_common.py (CTranslate2 absent: a line, status 0).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ct2_common  # noqa: E402

CT2_COMPUTE_TYPE = {"f32": "float32", "int8": "int8_float32"}


def make_decoder(args):
    """A function (sources, beam) -> list of token lists, or None when CTranslate2 is absent."""
    n = args.out_len
    if args.framework == "ctranslate2":
        ctranslate2 = ct2_common.import_ctranslate2(args.ct2, "peer_decode.py")
        if ctranslate2 is None:
            return None
        translator = ctranslate2.Translator(args.model, device="cpu",
                                            compute_type=CT2_COMPUTE_TYPE[args.precision],
                                            inter_threads=1, intra_threads=args.threads)

        def decode(sources, beam):
            results = translator.translate_batch(
                sources, beam_size=beam, max_batch_size=len(sources), length_penalty=0,
                min_decoding_length=n, max_decoding_length=n)
            return [r.hypotheses[0] for r in results]
        return decode
    import tfm
    translator = tfm.Translator(args.model, compute_type=args.precision, threads=args.threads)

    def decode(sources, beam):
        results = translator.translate_batch(sources, beam_size=beam, length_penalty=0,
                                             min_length=n, max_length=n, batch_size=len(sources))
        return [r.tokens[0] for r in results]
    return decode


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=("ctranslate2", "tfm"), required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--sources", required=True)
    parser.add_argument("--precision", choices=("f32", "int8"), default="f32")
    parser.add_argument("--beams", default="4,1")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--out-len", type=int, default=25)
    parser.add_argument("--label", default="")
    parser.add_argument("--outputs", default="")
    ct2_common.add_argument(parser)
    args = parser.parse_args()
    sources = [line.split() for line in open(args.sources, encoding="utf-8") if line.strip()]
    decode = make_decoder(args)
    if decode is None:
        return 0
    outputs = {}
    for beam in [int(b) for b in args.beams.split(",")]:
        mode = ("greedy" if beam == 1 else f"beam{beam}") + (f"-{args.label}" if args.label else "")
        times, hypotheses = [], []
        for run in range(args.warmup + args.runs):
            start = time.perf_counter()
            hypotheses = decode(sources, beam)
            seconds = time.perf_counter() - start
            warm = run < args.warmup
            print(f"{args.framework} {mode} run {run}: {seconds:.3f} s{' (warm-up)' if warm else ''}",
                  file=sys.stderr)
            if not warm:
                times.append(seconds)
        mean = sum(times) / len(times)
        tokens = sum(len(h) for h in hypotheses)
        outputs[mode] = hypotheses
        print(json.dumps({
            "framework": args.framework, "mode": mode, "precision": args.precision,
            "batch": len(sources), "threads": args.threads, "runs": args.runs,
            "warmup": args.warmup, "seconds": round(mean, 4), "best_seconds": round(min(times), 4),
            "output_tokens": tokens, "target_tokens_per_second": round(tokens / mean, 1)}),
            flush=True)
    if args.outputs:
        with open(args.outputs, "w", encoding="utf-8") as f:
            json.dump(outputs, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
