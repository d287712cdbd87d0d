#!/usr/bin/env bash
# Training-step throughput of a training recipe's model, tfm beside PyTorch: takes the model config of
# the newest checkpoint of a `tfm train` run directory and runs bench/train_step.sh on it with a batch
# shaped like the recipe's batches, printing the side-by-side table.
#
# The default batch is shaped like a Multi30k recipe's batch of 4096 padded source + target tokens
# (data.max_tokens 4096): 128 pairs of 16 source and 16 target tokens = 4096 tokens (Multi30k's sentences
# are ~14-15 BPE pieces on average, and a length-sorted batch is padded to its longest pair).
#
# Usage: bench/recipe_train_step.sh [run dir (default runs/multi30k-en-de)]
# Environment overrides: BATCH (128), SRC_LEN (16), TGT_LEN (16), and everything bench/train_step.sh
# reads (TFM_BENCH, VOCAB, STEPS, THREADS, MODES).
set -euo pipefail
cd "$(dirname "$0")/.."

run="${1:-runs/multi30k-en-de}"
export BATCH="${BATCH:-128}"
export SRC_LEN="${SRC_LEN:-16}"
export TGT_LEN="${TGT_LEN:-16}"

if [[ ! -d "$run/checkpoints" ]]; then
  echo "recipe_train_step.sh: $run/checkpoints is missing; is $run a tfm train run directory?" >&2
  exit 1
fi
# Checkpoint directories are step-<zero-padded step>; version sort also orders steps past 9 digits.
newest="$(find "$run/checkpoints" -mindepth 1 -maxdepth 1 -type d -name 'step-*' | sort -V | tail -n 1)"
if [[ -z "$newest" || ! -f "$newest/config.json" ]]; then
  echo "recipe_train_step.sh: no $run/checkpoints/step-*/config.json" >&2
  exit 1
fi

# A copy, as the run's checkpoint names it: a training run still in progress prunes old checkpoints
# while the benchmark runs.
copy_dir="$(mktemp -d)"
trap 'rm -rf "$copy_dir"' EXIT
config="$copy_dir/$(basename "$(cd "$run" && pwd)")-$(basename "$newest").json"
cp "$newest/config.json" "$config"

echo "== model of $newest; batch $BATCH x ($SRC_LEN + $TGT_LEN) tokens" >&2
CONFIG="$config" bench/train_step.sh
echo "(model: $newest/config.json)"
