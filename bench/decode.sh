#!/usr/bin/env bash
# Decoding benchmark, tfm against PyTorch on the same weights and sources, side by side in one run:
# translation throughput (target tokens per second, encoder included) of `base` with random weights and a
# vocabulary of 32000, a batch of 32 source sentences of 25 tokens, exactly 25 output tokens per sentence
# (eos suppressed, so both do the same work), beam 4 (alpha 0.6) and greedy, 2 threads.
#
# tfm's bench_decode runs first and writes its random weights as a model directory (config.json +
# model.safetensors) plus the sources (sources.safetensors) and its outputs into a temporary directory;
# bench/decode_pytorch.py then loads the same weights into tools/reference_model.py's Transformer and decodes
# the same sources with an incremental key/value cache, with PyTorch's best settings here (tcmalloc and
# OpenBLAS preloaded, OMP_WAIT_POLICY=PASSIVE, as bench/train_step.sh), and counts the sentences whose output
# is identical to tfm's ("same output", on tfm's rows). Prints a table with the ratio tfm / PyTorch per mode.
#
# tfm runs once per precision in PRECISIONS (default "f32 bf16": f32 products, then bf16 operands with f32
# accumulation); PyTorch runs in f32, and each tfm row is compared with PyTorch's row of the same search.
#
# Usage: bench/decode.sh            (build first: cmake --preset release && cmake --build --preset release)
# Environment overrides: TFM_BENCH (binary), PRESET, VOCAB, BATCH, SRC_LEN, OUT_LEN, BEAMS, RUNS, WARMUP,
# THREADS, PRECISIONS.
set -euo pipefail
cd "$(dirname "$0")/.."

TFM_BENCH="${TFM_BENCH:-build/release/bench_decode}"
PRESET="${PRESET:-base}"
VOCAB="${VOCAB:-32000}"
BATCH="${BATCH:-32}"
SRC_LEN="${SRC_LEN:-25}"
OUT_LEN="${OUT_LEN:-25}"
BEAMS="${BEAMS:-4,1}"
RUNS="${RUNS:-2}"
WARMUP="${WARMUP:-1}"
THREADS="${THREADS:-2}"
PRECISIONS="${PRECISIONS:-f32 bf16}"
SCRIPT_NAME=decode.sh
# shellcheck source=bench/pytorch_env.sh
source bench/pytorch_env.sh  # (the scripts run from the project root)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
results="$work/results.jsonl"

outputs=()
for precision in $PRECISIONS; do
  echo "== tfm ($precision): $TFM_BENCH" >&2
  # Every run draws the same weights and sources (fixed seeds); the files are written once.
  model_args=()
  [[ -d "$work/model" ]] || model_args=(--model-dir "$work/model")
  "$TFM_BENCH" --preset "$PRESET" --vocab "$VOCAB" --batch "$BATCH" --src-len "$SRC_LEN" \
    --out-len "$OUT_LEN" --beams "$BEAMS" --runs "$RUNS" --warmup "$WARMUP" --threads "$THREADS" \
    --precision "$precision" "${model_args[@]}" --outputs "$work/tfm_outputs_$precision.json" |
    tee -a "$results"
  outputs+=("$work/tfm_outputs_$precision.json")
done

echo "== pytorch (tcmalloc, OpenBLAS, OMP_WAIT_POLICY=PASSIVE, OMP_NUM_THREADS=$THREADS)" >&2
LD_PRELOAD="$TCMALLOC $OPENBLAS" OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS="$THREADS" \
  "$PYTHON" bench/decode_pytorch.py --model-dir "$work/model" --beams "$BEAMS" --out-len "$OUT_LEN" \
  --runs "$RUNS" --warmup "$WARMUP" --threads "$THREADS" --tfm-outputs "${outputs[@]}" |
  tee -a "$results"

"$PYTHON" - "$results" <<'EOF'
import json
import sys

rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        rows[(r["framework"], r["mode"])] = r
searches = sorted({mode.split("-")[0] for _, mode in rows}, key=lambda m: (m == "greedy", m))
print()
print(f"{'mode':<11} {'framework':<9} {'s/batch':>8} {'best s':>7} {'tgt tok/s':>10} {'peak MB':>8} {'same output':>12}")
for search in searches:
    torch_row = rows.get(("pytorch", search))
    tfm_modes = sorted((mode for framework, mode in rows if framework == "tfm" and mode.split("-")[0] == search),
                       key=len)
    for framework, mode in [("tfm", m) for m in tfm_modes] + [("pytorch", search)]:
        r = rows.get((framework, mode))
        if r is None:
            print(f"{mode:<11} {framework:<9} {'-':>8}")
            continue
        same = ""
        if framework == "tfm" and torch_row and mode in torch_row.get("identical_to_tfm", {}):
            same = f"{torch_row['identical_to_tfm'][mode]}/{r['batch']}"
        print(f"{mode:<11} {framework:<9} {r['seconds']:>8.3f} {r['best_seconds']:>7.3f} "
              f"{r['target_tokens_per_second']:>10.1f} {r['peak_rss_mb']:>8.0f} {same:>12}")
    for mode in tfm_modes:
        if torch_row:
            ratio = rows[("tfm", mode)]["target_tokens_per_second"] / torch_row["target_tokens_per_second"]
            print(f"{mode:<11} tfm/pytorch target tokens per second: {ratio:.2f}x")
EOF
