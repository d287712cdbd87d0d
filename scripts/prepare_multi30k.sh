#!/usr/bin/env bash
# Learns the shared BPE vocabulary on Multi30k's English and German training text, then checks and
# encodes train, val and test 2016 (filling the cache that training reuses) and shows the batching.
# Usage: scripts/prepare_multi30k.sh [output dir (default runs/multi30k)] [vocabulary size (default 8000)]
# Data: $TFM_DATA_DIR/multi30k, else ../shared/data/multi30k relative to the project root.
# The program: $TFM_BIN, else build/release/tfm (built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
data="${TFM_DATA_DIR:-../shared/data}/multi30k"
out="${1:-runs/multi30k}"
size="${2:-8000}"
[ -f "$data/train.en.gz" ] || { echo "prepare_multi30k.sh: no $data/train.en.gz (set TFM_DATA_DIR)" >&2; exit 1; }
tfm="${TFM_BIN:-build/release/tfm}"
[ -x "$tfm" ] || { cmake --preset release -G Ninja >/dev/null && cmake --build --preset release; }

mkdir -p "$out"
"$tfm" vocab -i "$data/train.en.gz" "$data/train.de.gz" -o "$out/spm$size" --size "$size"
for split in train val test_2016_flickr; do
  echo "== $split"
  "$tfm" corpus --src "$data/$split.en.gz" --tgt "$data/$split.de.gz" --vocab "$out/spm$size.model" \
    --cache-dir "$out/cache" --max-tokens 8192
done
