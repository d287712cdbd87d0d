#!/usr/bin/env bash
# The benchmark suite: every CPU benchmark of the project in one run, and one table at the end.
#
#   1. GEMM (gemm_bench): each product of a Transformer-base training step, f32 operands and bf16
#      operands with an f32 result, in GFLOP/s and as a fraction of the ceiling: the best rate this
#      run measured for that element type on the large (linear, 4096-row) products.
#   2. Training step (bench_train_step beside bench/train_step_pytorch.py): `base` (vocab 37000,
#      128 pairs of 32 + 32 tokens) and the model section of the Multi30k budget recipe
#      with its larger model (configs/multi30k-en-de-d256.yaml, vocab data.vocab_size = 8000, 128 pairs
#      of 16 + 16 tokens = 4096 padded tokens); tfm f32 and bf16, PyTorch f32 and bf16 autocast; tokens/s,
#      s/step, peak RSS, and the share of tfm's step spent outside matrix products. The machine's
#      peaks are measured again just before and after each tfm row, and its products are set
#      against them (a VM's peak moves within minutes).
#   3. Decoding (bench_decode beside bench/decode_pytorch.py, same weights and sources): `base`,
#      vocab 32000, 32 sentences of 25 tokens, exactly 25 output tokens each; beam 4 and greedy;
#      tfm f32, bf16, int8 and int8-bf16 against PyTorch f32 (incremental decoding).
#
# PyTorch runs in its best settings here (bench/pytorch_env.sh: tcmalloc and OpenBLAS preloaded,
# OMP_WAIT_POLICY=PASSIVE, OpenBLAS on the fastest of its cores this CPU runs). A run that fails (e.g. a tfm build without some option) is an
# "n/a" cell with its error under the table; the rest still runs. docs/BENCHMARKS.md, "The suite",
# explains every row.
#
# Usage: bench/suite.sh     (build first: cmake --preset release && cmake --build --preset release)
# Environment overrides:
#   BUILD (build/release, from the project root): where gemm_bench, bench_train_step and
#   bench_decode are
#   OUT (a new file in /tmp): the JSON lines of every run (kept; the table says where)
#   PARTS (gemm,train,decode)  THREADS (2)  PRECISIONS (f32,bf16: tfm's in training)
#   DECODE_PRECISIONS (f32,bf16,int8,int8-bf16: tfm's in decoding; the first f32 or bf16)
#   PYTORCH (1; 0: tfm's rows only, as bench/compare_builds.sh runs it)
#   GEMM_MIN_TIME (0.2 s per product)  GEMM_FILTER (a --benchmark_filter regex; default all)
#   TRAIN_STEPS (2)  TRAIN_WARMUP (2)  BASE_VOCAB (37000)  BASE_BATCH (128)  BASE_SRC_LEN (32)
#   BASE_TGT_LEN (32)  RECIPE (configs/multi30k-en-de-d256.yaml)  RECIPE_BATCH (128)
#   RECIPE_SRC_LEN (16)  RECIPE_TGT_LEN (16)
#   DECODE_VOCAB (32000)  DECODE_BATCH (32)  DECODE_SRC_LEN (25)  DECODE_OUT_LEN (25)
#   DECODE_BEAMS (4,1)  DECODE_RUNS (2)  DECODE_WARMUP (1)
# bench/suite_table.py table FILE prints the table again from a saved OUT file.
set -euo pipefail
# OUT is relative to where the suite is started; the other paths to the project root.
if [[ -n "${OUT:-}" && "$OUT" != /* ]]; then
  OUT="$PWD/$OUT"
fi
cd "$(dirname "$0")/.."

BUILD="${BUILD:-build/release}"
PARTS="${PARTS:-gemm,train,decode}"
THREADS="${THREADS:-2}"
PRECISIONS="${PRECISIONS:-f32,bf16}"
DECODE_PRECISIONS="${DECODE_PRECISIONS:-f32,bf16,int8,int8-bf16}"
PYTORCH="${PYTORCH:-1}"
GEMM_MIN_TIME="${GEMM_MIN_TIME:-0.2}"
GEMM_FILTER="${GEMM_FILTER:-.}"
TRAIN_STEPS="${TRAIN_STEPS:-2}"
TRAIN_WARMUP="${TRAIN_WARMUP:-2}"
BASE_VOCAB="${BASE_VOCAB:-37000}"
BASE_BATCH="${BASE_BATCH:-128}"
BASE_SRC_LEN="${BASE_SRC_LEN:-32}"
BASE_TGT_LEN="${BASE_TGT_LEN:-32}"
RECIPE="${RECIPE:-configs/multi30k-en-de-d256.yaml}"
RECIPE_BATCH="${RECIPE_BATCH:-128}"
RECIPE_SRC_LEN="${RECIPE_SRC_LEN:-16}"
RECIPE_TGT_LEN="${RECIPE_TGT_LEN:-16}"
DECODE_VOCAB="${DECODE_VOCAB:-32000}"
DECODE_BATCH="${DECODE_BATCH:-32}"
DECODE_SRC_LEN="${DECODE_SRC_LEN:-25}"
DECODE_OUT_LEN="${DECODE_OUT_LEN:-25}"
DECODE_BEAMS="${DECODE_BEAMS:-4,1}"
DECODE_RUNS="${DECODE_RUNS:-2}"
DECODE_WARMUP="${DECODE_WARMUP:-1}"

SCRIPT_NAME=suite.sh
TFM_BENCH="$BUILD/bench_train_step"
# shellcheck source=bench/pytorch_env.sh
source bench/pytorch_env.sh # (the scripts run from the project root)
for binary in gemm_bench bench_decode; do
  if [[ ! -x "$BUILD/$binary" ]]; then
    echo "suite.sh: $BUILD/$binary is missing; build it first (cmake --build --preset release)" >&2
    exit 1
  fi
done
if [[ ! -f "$RECIPE" ]]; then
  echo "suite.sh: RECIPE=$RECIPE is not a file" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
OUT="${OUT:-$(mktemp --suffix=.jsonl /tmp/tfm-suite-XXXXXX)}"
: >"$OUT"
export OMP_NUM_THREADS="$THREADS"
IFS=, read -r -a precisions <<<"$PRECISIONS"
IFS=, read -r -a decode_precisions <<<"$DECODE_PRECISIONS"
started=$SECONDS

has_part() { [[ ",$PARTS," == *",$1,"* ]]; }

# run_json PART FRAMEWORK PRECISION COMMAND...: runs the command with its stderr shown (and kept
# for the error message) and appends its JSON lines to OUT tagged with "suite": PART, then one line
# with the error if it failed.
run_json() {
  local part="$1" framework="$2" precision="$3" status=0
  shift 3
  echo "== [$((SECONDS - started)) s] $part: $framework $precision" >&2
  "$@" 2>&1 >"$work/stdout" | tee "$work/stderr" >&2 || status=$?
  grep '^{' "$work/stdout" | sed "s/^{/{\"suite\": \"$part\", /" >>"$OUT" || true
  if ((status != 0)); then
    "$PYTHON" bench/suite_table.py error "$part" "$framework" "$precision" "$work/stderr" >>"$OUT"
  fi
}

# peaks_around PART PRECISION COMMAND...: run_json between two measures of the machine's peaks
# (gemm_bench's peak_fma and peak_dot_bf16, the best of 3 repetitions of 0.1 s), then one
# "peaks_around" line with both: a VM whose host takes cycles from it moves its peak within
# minutes, so the products of a row are set against the peaks of that row's minute.
peaks_now() {
  "$BUILD/gemm_bench" --benchmark_format=json --benchmark_min_time=0.1 --benchmark_repetitions=3 \
    --benchmark_filter='^peak_(fma|dot_bf16)/' >"$1" 2>/dev/null || true
}
peaks_around() {
  local part="$1" precision="$2"
  peaks_now "$work/peaks_before.json"
  run_json "$part" tfm "$precision" "${@:3}"
  peaks_now "$work/peaks_after.json"
  "$PYTHON" bench/suite_table.py peaks "$part" "$precision" "$work/peaks_before.json" \
    "$work/peaks_after.json" >>"$OUT"
}

pytorch() {
  if [[ "$PYTORCH" == 0 ]]; then
    echo "(PyTorch left out: PYTORCH=0)" >&2
    return 0
  fi
  LD_PRELOAD="$TCMALLOC $OPENBLAS" OMP_WAIT_POLICY=PASSIVE "$PYTHON" "$@"
}

commit="$(git rev-parse --short HEAD 2>/dev/null || echo -)"
"$PYTHON" bench/suite_table.py settings "commit=$commit" "threads=$THREADS" \
  "train_steps=$TRAIN_STEPS" "train_warmup=$TRAIN_WARMUP" "decode_runs=$DECODE_RUNS" "decode_warmup=$DECODE_WARMUP" "recipe=$RECIPE" \
  "gemm_min_time=$GEMM_MIN_TIME" "openblas_core=${OPENBLAS_CORE:-not used}" >>"$OUT"

if has_part gemm; then
  echo "== [$((SECONDS - started)) s] gemm: gemm_bench" >&2
  # A failure (or a filter that matches nothing) leaves no products: then one error line.
  "$BUILD/gemm_bench" --benchmark_format=json --benchmark_min_time="$GEMM_MIN_TIME" \
    --benchmark_filter="$GEMM_FILTER" >"$work/gemm.json" 2>"$work/stderr" || true
  cat "$work/stderr" >&2
  "$PYTHON" bench/suite_table.py gemm "$work/gemm.json" "$work/stderr" >>"$OUT"
fi

if has_part train; then
  train_shape=(--steps "$TRAIN_STEPS" --warmup "$TRAIN_WARMUP" --threads "$THREADS")
  base=(--preset base --vocab "$BASE_VOCAB" --batch "$BASE_BATCH" --src-len "$BASE_SRC_LEN"
    --tgt-len "$BASE_TGT_LEN" "${train_shape[@]}")
  for precision in "${precisions[@]}"; do
    peaks_around train_base "$precision" "$TFM_BENCH" "${base[@]}" --precision "$precision"
  done
  for precision in f32 bf16; do
    run_json train_base pytorch "$precision" pytorch bench/train_step_pytorch.py "${base[@]}" \
      --modes "$precision"
  done

  # The recipe's model: tfm reads the YAML's model section (and data.vocab_size) itself and writes
  # the config.json that the other runs read. Only the model section is used, so ${TFM_DATA_DIR}
  # in the data paths need not point anywhere.
  config="$work/$(basename "$RECIPE" .yaml).json"
  recipe=(--batch "$RECIPE_BATCH" --src-len "$RECIPE_SRC_LEN" --tgt-len "$RECIPE_TGT_LEN"
    "${train_shape[@]}")
  peaks_around train_recipe "${precisions[0]}" env TFM_DATA_DIR="${TFM_DATA_DIR:-unused}" \
    "$TFM_BENCH" --recipe "$RECIPE" --write-config "$config" "${recipe[@]}" \
    --precision "${precisions[0]}"
  if [[ -f "$config" ]]; then
    for precision in "${precisions[@]:1}"; do
      peaks_around train_recipe "$precision" "$TFM_BENCH" --config "$config" "${recipe[@]}" \
        --precision "$precision"
    done
    for precision in f32 bf16; do
      run_json train_recipe pytorch "$precision" pytorch bench/train_step_pytorch.py \
        --config "$config" "${recipe[@]}" --modes "$precision"
    done
  fi
fi

if has_part decode; then
  decode=(--vocab "$DECODE_VOCAB" --batch "$DECODE_BATCH" --src-len "$DECODE_SRC_LEN"
    --out-len "$DECODE_OUT_LEN" --beams "$DECODE_BEAMS" --runs "$DECODE_RUNS"
    --warmup "$DECODE_WARMUP" --threads "$THREADS")
  # The first tfm run writes the weights and sources (the same in every run: fixed seeds) and its
  # outputs; every run writes its outputs, for PyTorch to count the sentences it decodes identically.
  for precision in "${decode_precisions[@]}"; do
    extra=(--outputs "$work/tfm_outputs_$precision.json")
    if [[ ! -f "$work/model/sources.safetensors" ]]; then
      extra+=(--model-dir "$work/model")
    fi
    run_json decode_base tfm "$precision" "$BUILD/bench_decode" --preset base "${decode[@]}" \
      --precision "$precision" "${extra[@]}"
  done
  if [[ -f "$work/model/sources.safetensors" ]]; then
    compare=()
    for precision in "${decode_precisions[@]}"; do
      if [[ -f "$work/tfm_outputs_$precision.json" ]]; then
        compare+=("$work/tfm_outputs_$precision.json")
      fi
    done
    if ((${#compare[@]})); then
      compare=(--tfm-outputs "${compare[@]}")
    fi
    run_json decode_base pytorch f32 pytorch bench/decode_pytorch.py --model-dir "$work/model" \
      --beams "$DECODE_BEAMS" --out-len "$DECODE_OUT_LEN" --runs "$DECODE_RUNS" \
      --warmup "$DECODE_WARMUP" --threads "$THREADS" "${compare[@]}"
  fi
fi

echo "== [$((SECONDS - started)) s] done" >&2
"$PYTHON" bench/suite_table.py table "$OUT" "$((SECONDS - started))"
