#!/usr/bin/env python3
"""How tfm's corpus path scales: vocabulary, encoding, cache and the start of training at 0.5M,
4.5M and 36M pairs (the sizes of a small corpus, WMT14 English-German and WMT14 English-French).

For each size it makes a synthetic corpus (bench/make_synthetic_corpus.py, from Multi30k) when it
is absent, then measures, each command run alone:
  1. `tfm vocab --sample 10000000`: the recipes' vocabulary step (wall time, peak resident memory);
  2. `tfm corpus` from a cold cache: encoding time, pairs/s, cache file size, peak anonymous resident
     memory (RssAnon, sampled every 20 ms: the mapped cache's page-cache pages are not the
     process's own memory);
  3. `tfm corpus` again: mapping the warm cache;
  4. `tfm train` (the WMT base model, batches of MAX_TOKENS) for 20 updates from the warm cache:
     time to the first update, peak anonymous memory, and the same for a 1000-pair corpus, whose
     difference is the data path's memory beside the model.
Writes a JSON line per size to OUT (default runs/scale/corpus_scale.jsonl) and prints a table.

Usage: bench/corpus_scale.py [--sizes 500000,4500000,36000000] [--dir runs/scale]
                             [--vocab-size 8000] [--max-tokens 2048] [--skip-vocab]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
TFM = os.path.join(ROOT, "build", "release", "tfm")


def memory_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_measured(args, watch_for=None, log=None):
    """Runs a command; returns wall seconds, peak RssAnon and VmHWM (MiB), seconds until a stdout
    line containing `watch_for` appeared, and the output."""
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)

    def read_available():
        data = b""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return data
            if not chunk:
                return data
            data += chunk

    peak_anon = peak_hwm = 0
    seen_at = None
    output = []
    pending = ""
    while True:
        peak_anon = max(peak_anon, memory_kb(proc.pid, "RssAnon"))
        peak_hwm = max(peak_hwm, memory_kb(proc.pid, "VmHWM"))
        chunk = read_available().decode("utf-8", "replace")
        if chunk:
            pending += chunk
            *lines, pending = pending.split("\n")
            for line in lines:
                output.append(line)
                if log:
                    print(f"    {line}"[:200], file=log, flush=True)
                if watch_for and seen_at is None and watch_for in line:
                    seen_at = time.monotonic() - start
        if proc.poll() is not None:
            rest = read_available().decode("utf-8", "replace")
            output.extend((pending + rest).splitlines())
            break
        time.sleep(0.02)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"corpus_scale.py: {' '.join(args)} failed ({proc.returncode}):\n" +
                 "\n".join(output[-20:]))
    return {"wall_s": wall, "peak_anon_mib": peak_anon / 1024, "peak_rss_mib": peak_hwm / 1024,
            "watched_s": seen_at, "output": output}


def ensure_corpus(pairs, folder):
    if not os.path.exists(os.path.join(folder, "train.de")):
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_synthetic_corpus.py"),
                        str(pairs), folder], check=True)


def train_args(folder, vocab, run_dir, max_tokens):
    """tfm train of the paper's base model for 20 updates, from a recipe written into run_dir."""
    recipe = os.path.join(run_dir, "recipe.yaml")
    with open(recipe, "w") as f:
        f.write(f"""model:
  preset: base
data:
  train_source: {os.path.join(folder, "train.en")}
  train_target: {os.path.join(folder, "train.de")}
  vocab: {vocab}
  max_length: 256
  max_tokens: {max_tokens}
training:
  max_steps: 20
  log_every: 1
  precision: auto
checkpoints:
  every_steps: 1000000
  every_minutes: 0
""")
    return [TFM, "train", "-c", recipe, "--run-dir", run_dir]


def measure_training(folder, vocab, cache, pairs, args, log):
    """20 updates of tfm train from the warm cache (the run directory's cache is `cache`)."""
    run_dir = os.path.join(args.dir, f"run-{pairs}")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    if cache:
        os.symlink(cache, os.path.join(run_dir, "cache"))
    print(f"== {pairs} pairs: tfm train, 20 updates", file=log, flush=True)
    t = run_measured(train_args(folder, vocab, run_dir, args.max_tokens), watch_for="step 1 |",
                     log=log)
    shutil.rmtree(run_dir, ignore_errors=True)
    return {"train_first_update_s": t["watched_s"], "train_wall_s": t["wall_s"],
            "train_peak_anon_mib": t["peak_anon_mib"], "train_peak_rss_mib": t["peak_rss_mib"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500000,4500000,36000000")
    parser.add_argument("--dir", default=os.path.join(ROOT, "runs", "scale"))
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument("--skip-vocab", action="store_true",
                        help="reuse DIR/p<size>/vocab.model when present")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out_path = args.out or os.path.join(args.dir, "corpus_scale.jsonl")
    os.makedirs(args.dir, exist_ok=True)
    log = sys.stderr

    results = []
    for pairs in [int(s) for s in args.sizes.split(",")]:
        folder = os.path.join(args.dir, f"p{pairs}")
        ensure_corpus(pairs, folder)
        text_bytes = sum(os.path.getsize(os.path.join(folder, f)) for f in ("train.en", "train.de"))
        vocab_prefix = os.path.join(folder, "vocab")
        row = {"pairs": pairs, "text_gb": text_bytes / 1e9}
        if not (args.skip_vocab and os.path.exists(vocab_prefix + ".model")):
            print(f"== {pairs} pairs: vocabulary", file=log, flush=True)
            v = run_measured([TFM, "vocab", "-i", os.path.join(folder, "train.en"), "-i",
                              os.path.join(folder, "train.de"), "-o", vocab_prefix, "--size",
                              str(args.vocab_size), "--sample", "10000000"], log=log)
            row["vocab_s"] = v["wall_s"]
            row["vocab_peak_rss_mib"] = v["peak_rss_mib"]
        vocab = vocab_prefix + ".model"

        cache = os.path.join(folder, "cache")
        shutil.rmtree(cache, ignore_errors=True)
        corpus_args = [TFM, "corpus", "--src", os.path.join(folder, "train.en"), "--tgt",
                       os.path.join(folder, "train.de"), "--vocab", vocab, "--cache-dir", cache,
                       "--max-length", "256", "--max-tokens", str(args.max_tokens)]
        print(f"== {pairs} pairs: encoding (cold cache)", file=log, flush=True)
        cold = run_measured(corpus_args, log=log)
        cache_file = [os.path.join(cache, f) for f in os.listdir(cache)][0]
        print(f"== {pairs} pairs: mapping (warm cache)", file=log, flush=True)
        warm = run_measured(corpus_args, log=log)
        row.update({
            "encode_s": cold["wall_s"],
            "encode_pairs_per_s": pairs / cold["wall_s"],
            "encode_peak_anon_mib": cold["peak_anon_mib"],
            "cache_gb": os.path.getsize(cache_file) / 1e9,
            "warm_corpus_s": warm["wall_s"],
            "warm_corpus_peak_anon_mib": warm["peak_anon_mib"],
        })

        # Training from the warm cache: the run directory's cache is the one just written.
        row.update(measure_training(folder, vocab, cache, pairs, args, log))
        results.append(row)
        print(json.dumps(row), file=log, flush=True)

    # The baseline: the same training on a 1000-pair corpus (the model's own memory).
    small = os.path.join(args.dir, "p1000")
    ensure_corpus(1000, small)
    vocab = os.path.join(args.dir, f"p{results[0]['pairs']}", "vocab.model")
    baseline = measure_training(small, vocab, None, 1000, args, log)
    for row in results:
        row["baseline_peak_anon_mib"] = baseline["train_peak_anon_mib"]
        row["baseline_first_update_s"] = baseline["train_first_update_s"]
        row["data_path_anon_mib"] = row["train_peak_anon_mib"] - baseline["train_peak_anon_mib"]
    with open(out_path, "a") as f:
        for row in results:
            f.write(json.dumps(row) + "\n")

    print("| pairs | text GB | vocab s | encode s | pairs/s | encode peak anon MiB | cache GB | "
          "warm map s | first update s | train peak anon MiB | beside the model MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['pairs']:,} | {r['text_gb']:.2f} | {r.get('vocab_s', float('nan')):.0f} | "
              f"{r['encode_s']:.1f} | {r['encode_pairs_per_s']:,.0f} | "
              f"{r['encode_peak_anon_mib']:.0f} | {r['cache_gb']:.2f} | {r['warm_corpus_s']:.2f} | "
              f"{r['train_first_update_s']:.1f} | {r['train_peak_anon_mib']:.0f} | "
              f"{r['data_path_anon_mib']:.0f} |")


if __name__ == "__main__":
    main()
