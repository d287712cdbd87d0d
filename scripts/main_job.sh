#!/usr/bin/env bash
# The main job, as far as tfm goes today: the paper's configurations, and timed training steps of a
# small Transformer (Table 3's C4 row: d_model 256) on a synthetic batch.
# Training on Multi30k (`tfm train`) and translating (`tfm translate`) replace this as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/release/tfm ] || { cmake --preset release -G Ninja >/dev/null && cmake --build --preset release; }

build/release/tfm info --preset base --vocab 37000
echo
build/release/tfm info --all-presets --vocab 37000
echo
echo "Training steps of preset C4 (d_model 256) on 32 synthetic pairs of 32+32 tokens, 2 threads:"
build/release/bench_train_step --preset C4 --vocab 8000 --batch 32 --steps 3 --threads 2
