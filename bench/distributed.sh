#!/usr/bin/env bash
# Data-parallel training benchmark: tfm over MPI beside PyTorch DistributedDataParallel (gloo), in one
# run. For each model of MODELS, REPEATS times, the four runs one after the other (alternating, so that
# a change of the machine's load falls on all of them):
#   tfm-process      build/release/bench_train_dist, 1 process x THREADS threads (no mpirun)
#   tfm-ranks        mpirun -np RANKS bench_train_dist --threads 1 (OMP_NUM_THREADS=1)
#   pytorch-ddp      bench/train_step_ddp_pytorch.py, RANKS processes x 1 thread
#   pytorch-process  bench/train_step_pytorch.py, 1 process x THREADS threads
# f32, forward + backward + Adam step on random ids, BATCH pairs per process (a job of RANKS ranks
# trains on RANKS batches per update: compare tokens per second). Then one table
# (bench/distributed_table.py): per run the median and min-max of tokens/s, s/step, backward s, and the
# all-reduce (MB per update, alone s and GB/s, exposed s, hidden fraction); the ratios of tfm-ranks to
# pytorch-ddp, and of each framework's ranks to its one process.
#
# Models: recipe = the model section of RECIPE (configs/multi30k-en-de-d256.yaml, vocab data.vocab_size)
# written to a config.json by bench_train_step --recipe --write-config as bench/suite.sh does, or
# RECIPE_CONFIG=config.json (e.g. a training run's checkpoint's, as bench/recipe_train_step.sh takes);
# base = the `base` preset, vocab BASE_VOCAB. PyTorch runs in its best settings here
# (bench/pytorch_env.sh: tcmalloc and OpenBLAS preloaded, OMP_WAIT_POLICY=PASSIVE). A failed run is
# an error line in OUT and a footnote under the table; the rest still runs.
#
# Usage: bench/distributed.sh   (build first: cmake --preset release && cmake --build --preset release)
# Environment overrides:
#   BUILD (build/release)  TFM_DIST_BENCH ($BUILD/bench_train_dist)  MPIRUN (mpirun)
#   OUT (a new file in /tmp): the JSON lines of every run (kept; the table says where)
#   MODELS (recipe base)  REPEATS (3)  RUNS (tfm-process,tfm-ranks,pytorch-ddp,pytorch-process)
#   RANKS (2)  THREADS (2: the one-process runs')  WARMUP (2)  BUCKET_CAP_MB (25: PyTorch DDP's)
#   RECIPE (configs/multi30k-en-de-d256.yaml)  RECIPE_CONFIG  RECIPE_BATCH (128)  RECIPE_SRC_LEN (16)
#   RECIPE_TGT_LEN (16)  RECIPE_STEPS (10)
#   BASE_VOCAB (37000)  BASE_BATCH (128)  BASE_SRC_LEN (32)  BASE_TGT_LEN (32)  BASE_STEPS (2)
# bench/distributed_table.py table FILE prints the table again from a saved OUT file.
set -euo pipefail
if [[ -n "${OUT:-}" && "$OUT" != /* ]]; then
  OUT="$PWD/$OUT"
fi
if [[ -n "${RECIPE_CONFIG:-}" && "$RECIPE_CONFIG" != /* ]]; then
  RECIPE_CONFIG="$PWD/$RECIPE_CONFIG"
fi
cd "$(dirname "$0")/.."

BUILD="${BUILD:-build/release}"
TFM_DIST_BENCH="${TFM_DIST_BENCH:-$BUILD/bench_train_dist}"
MPIRUN="${MPIRUN:-mpirun}"
MODELS="${MODELS:-recipe base}"
REPEATS="${REPEATS:-3}"
RUNS="${RUNS:-tfm-process,tfm-ranks,pytorch-ddp,pytorch-process}"
RANKS="${RANKS:-2}"
THREADS="${THREADS:-2}"
WARMUP="${WARMUP:-2}"
BUCKET_CAP_MB="${BUCKET_CAP_MB:-25}"
RECIPE="${RECIPE:-configs/multi30k-en-de-d256.yaml}"
RECIPE_CONFIG="${RECIPE_CONFIG:-}"
RECIPE_BATCH="${RECIPE_BATCH:-128}"
RECIPE_SRC_LEN="${RECIPE_SRC_LEN:-16}"
RECIPE_TGT_LEN="${RECIPE_TGT_LEN:-16}"
RECIPE_STEPS="${RECIPE_STEPS:-10}"
BASE_VOCAB="${BASE_VOCAB:-37000}"
BASE_BATCH="${BASE_BATCH:-128}"
BASE_SRC_LEN="${BASE_SRC_LEN:-32}"
BASE_TGT_LEN="${BASE_TGT_LEN:-32}"
BASE_STEPS="${BASE_STEPS:-2}"

SCRIPT_NAME=distributed.sh
TFM_BENCH="$TFM_DIST_BENCH"
# shellcheck source=bench/pytorch_env.sh
source bench/pytorch_env.sh # (the scripts run from the project root)
if ! command -v "$MPIRUN" >/dev/null; then
  echo "distributed.sh: $MPIRUN is missing; apt-get install openmpi-bin" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
OUT="${OUT:-$(mktemp --suffix=.jsonl /tmp/tfm-distributed-XXXXXX)}"
: >"$OUT"
started=$SECONDS
has_run() { [[ ",$RUNS," == *",$1,"* ]]; }

# run_json MODEL RUN REPEAT COMMAND...: runs the command with its stderr shown (and kept for the error
# message) and appends its JSON lines to OUT tagged with the model, run and repeat, then one line with
# the error if it failed.
run_json() {
  local model="$1" run="$2" repeat="$3" status=0
  shift 3
  echo "== [$((SECONDS - started)) s] $model, repeat $repeat: $run" >&2
  "$@" 2>&1 >"$work/stdout" | tee "$work/stderr" >&2 || status=$?
  local tag="\"dist_model\": \"$model\", \"run\": \"$run\", \"repeat\": $repeat"
  grep '^{' "$work/stdout" | sed "s/^{/{$tag, /" >>"$OUT" || true
  if ((status != 0)); then
    "$PYTHON" bench/distributed_table.py error "$model" "$run" "$repeat" "$work/stderr" >>"$OUT"
  fi
}

# pytorch THREADS SCRIPT ARGS...: PyTorch in its best settings here, OMP_NUM_THREADS=THREADS.
pytorch() {
  OMP_NUM_THREADS="$1" LD_PRELOAD="$TCMALLOC $OPENBLAS" OMP_WAIT_POLICY=PASSIVE "$PYTHON" "${@:2}"
}

# model_args MODEL: sets `model` (the model arguments and batch shape) and `steps`.
model_args() {
  case "$1" in
  recipe)
    if [[ -z "$RECIPE_CONFIG" ]]; then
      if [[ ! -x "$BUILD/bench_train_step" ]]; then
        echo "distributed.sh: $BUILD/bench_train_step (it writes the recipe's config.json) is missing;" \
          "build it, or set RECIPE_CONFIG=config.json" >&2
        exit 1
      fi
      RECIPE_CONFIG="$work/$(basename "$RECIPE" .yaml).json"
      # Only the model section is read, so ${TFM_DATA_DIR} in the data paths need not point anywhere.
      TFM_DATA_DIR="${TFM_DATA_DIR:-unused}" "$BUILD/bench_train_step" --recipe "$RECIPE" \
        --write-config "$RECIPE_CONFIG" --batch 1 --src-len 1 --tgt-len 1 --steps 1 --warmup 0 \
        --threads 1 >/dev/null
    fi
    model=(--config "$RECIPE_CONFIG" --batch "$RECIPE_BATCH" --src-len "$RECIPE_SRC_LEN"
      --tgt-len "$RECIPE_TGT_LEN")
    steps="$RECIPE_STEPS"
    ;;
  base)
    model=(--preset base --vocab "$BASE_VOCAB" --batch "$BASE_BATCH" --src-len "$BASE_SRC_LEN"
      --tgt-len "$BASE_TGT_LEN")
    steps="$BASE_STEPS"
    ;;
  *)
    echo "distributed.sh: unknown model $1 in MODELS (recipe, base)" >&2
    exit 1
    ;;
  esac
}

commit="$(git rev-parse --short HEAD 2>/dev/null || echo -)"
"$PYTHON" bench/distributed_table.py settings "commit=$commit" "repeats=$REPEATS" "warmup=$WARMUP" \
  "recipe=${RECIPE_CONFIG:-$RECIPE}" "bucket_cap_mb=$BUCKET_CAP_MB" >>"$OUT"

for name in $MODELS; do
  model_args "$name"
  common=("${model[@]}" --steps "$steps" --warmup "$WARMUP")
  for ((repeat = 1; repeat <= REPEATS; repeat++)); do
    if has_run tfm-process; then
      run_json "$name" tfm-process "$repeat" env OMP_NUM_THREADS="$THREADS" \
        "$TFM_DIST_BENCH" "${common[@]}" --threads "$THREADS" --precision f32
    fi
    if has_run tfm-ranks; then
      run_json "$name" tfm-ranks "$repeat" "$MPIRUN" --allow-run-as-root --oversubscribe \
        --bind-to none -np "$RANKS" -x OMP_NUM_THREADS=1 \
        "$TFM_DIST_BENCH" "${common[@]}" --threads 1 --precision f32
    fi
    if has_run pytorch-ddp; then
      run_json "$name" pytorch-ddp "$repeat" pytorch 1 \
        bench/train_step_ddp_pytorch.py "${common[@]}" --ranks "$RANKS" --threads 1 \
        --bucket-cap-mb "$BUCKET_CAP_MB" --precision f32
    fi
    if has_run pytorch-process; then
      run_json "$name" pytorch-process "$repeat" pytorch "$THREADS" \
        bench/train_step_pytorch.py "${common[@]}" --threads "$THREADS" --modes f32
    fi
  done
done

echo "== [$((SECONDS - started)) s] done" >&2
"$PYTHON" bench/distributed_table.py table "$OUT" "$((SECONDS - started))"
