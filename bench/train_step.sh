#!/usr/bin/env bash
# Training-step benchmark, tfm against PyTorch on the same configuration, side by side in one run:
# forward + backward + Adam step of `base` (vocab 37000, dropout 0.1) on 128 sentence pairs of 32 source
# and 32 target tokens, on 2 threads. Runs tfm's bench_train_step first, then bench/train_step_pytorch.py
# with PyTorch's best settings here (tcmalloc and OpenBLAS preloaded, OMP_WAIT_POLICY=PASSIVE), and prints
# a table with the ratio tfm / PyTorch of tokens per second for each mode.
#
# Debian's PyTorch does its f32 matrix products through libblas.so.3, which by default is the reference
# (netlib) BLAS, about 100x slower than an optimised one (its bf16 goes through oneDNN and is not
# affected). OpenBLAS (package libopenblas0-openmp, OpenMP like PyTorch) is preloaded so
# the f32 baseline is a fair one, whatever the system's libblas.so.3 alternative points to.
#
# Usage: bench/train_step.sh            (build first: cmake --preset release && cmake --build --preset release)
# Environment overrides: TFM_BENCH (binary), PRESET, CONFIG, VOCAB, BATCH, SRC_LEN, TGT_LEN, STEPS,
# THREADS, MODES. CONFIG=path/config.json benchmarks that model (docs/MODEL_FORMAT.md) instead of
# PRESET, with its own vocabulary size unless VOCAB is set (bench/recipe_train_step.sh does this for a
# training run's model). VOCAB defaults to 37000 with a preset.
set -euo pipefail
cd "$(dirname "$0")/.."

TFM_BENCH="${TFM_BENCH:-build/release/bench_train_step}"
PRESET="${PRESET:-base}"
CONFIG="${CONFIG:-}"
VOCAB="${VOCAB:-}"
BATCH="${BATCH:-128}"
SRC_LEN="${SRC_LEN:-32}"
TGT_LEN="${TGT_LEN:-32}"
STEPS="${STEPS:-3}"
THREADS="${THREADS:-2}"
MODES="${MODES:-f32,bf16}"
SCRIPT_NAME=train_step.sh
# shellcheck source=bench/pytorch_env.sh
source bench/pytorch_env.sh  # (the scripts run from the project root)

# The model arguments both programs take: a config file or a preset, and the vocabulary override.
if [[ -n "$CONFIG" ]]; then
  if [[ ! -f "$CONFIG" ]]; then
    echo "train_step.sh: CONFIG=$CONFIG is not a file" >&2
    exit 1
  fi
  model_args=(--config "$CONFIG")
else
  model_args=(--preset "$PRESET")
fi
if [[ -n "$VOCAB" ]]; then
  model_args+=(--vocab "$VOCAB")
fi

results="$(mktemp)"
trap 'rm -f "$results"' EXIT

echo "== tfm: $TFM_BENCH" >&2
for mode in ${MODES//,/ }; do
  "$TFM_BENCH" "${model_args[@]}" --precision "$mode" --batch "$BATCH" --src-len "$SRC_LEN" \
    --tgt-len "$TGT_LEN" --steps "$STEPS" --threads "$THREADS" | tee -a "$results"
done

echo "== pytorch (tcmalloc, OpenBLAS, OMP_WAIT_POLICY=PASSIVE, OMP_NUM_THREADS=$THREADS)" >&2
LD_PRELOAD="$TCMALLOC $OPENBLAS" OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS="$THREADS" \
  "$PYTHON" bench/train_step_pytorch.py "${model_args[@]}" --batch "$BATCH" --src-len "$SRC_LEN" \
  --tgt-len "$TGT_LEN" --steps "$STEPS" --threads "$THREADS" --modes "$MODES" | tee -a "$results"

"$PYTHON" - "$results" <<'EOF'
import json
import sys

rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        rows[(r["framework"], r["mode"])] = r
modes = sorted({mode for _, mode in rows}, key=lambda m: (m != "f32", m))
print()
tfm_row = next((r for (framework, _), r in rows.items() if framework == "tfm"), None)
if tfm_row:
    model = tfm_row.get("config") or tfm_row.get("preset")
    print(f"model {model}, vocab {tfm_row.get('vocab')}; batch of {tfm_row['src_tokens']} source + "
          f"{tfm_row['tgt_tokens']} target tokens; threads {tfm_row['threads']}")
print(f"{'mode':<6} {'framework':<9} {'s/step':>8} {'tokens/s':>10} {'tgt tok/s':>10} {'peak MB':>8}")
for mode in modes:
    for framework in ("tfm", "pytorch"):
        r = rows.get((framework, mode))
        if r is None:
            print(f"{mode:<6} {framework:<9} {'-':>8}")
            continue
        print(f"{mode:<6} {framework:<9} {r['seconds_per_step']:>8.3f} {r['tokens_per_second']:>10.1f} "
              f"{r['target_tokens_per_second']:>10.1f} {r['peak_rss_mb']:>8.0f}")
    tfm, torch_row = rows.get(("tfm", mode)), rows.get(("pytorch", mode))
    if tfm and torch_row:
        ratio = tfm["tokens_per_second"] / torch_row["tokens_per_second"]
        print(f"{mode:<6} tfm/pytorch tokens per second: {ratio:.2f}x")
EOF
