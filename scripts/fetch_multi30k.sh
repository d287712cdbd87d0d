#!/usr/bin/env bash
# Prints the folder that holds Multi30k's English and German text (train, val, test_2016_flickr as
# .gz), downloading it when neither $TFM_DATA_DIR/multi30k nor ../shared/data/multi30k has it.
# Source: the Multi30k authors' repository multi30k/dataset, data/task1/raw/ (commit a3d2e0d).
set -euo pipefail
cd "$(dirname "$0")/.."
for dir in "${TFM_DATA_DIR:-}/multi30k" ../shared/data/multi30k runs/data/multi30k; do
  if [ -f "$dir/train.en.gz" ] && [ -f "$dir/test_2016_flickr.de.gz" ]; then
    (cd "$dir" && pwd)
    exit 0
  fi
done
out=runs/data/multi30k
base="https://raw.githubusercontent.com/multi30k/dataset/a3d2e0d/data/task1/raw"
mkdir -p "$out"
echo "fetch_multi30k.sh: downloading Multi30k into $out" >&2
for split in train val test_2016_flickr; do
  for lang in en de; do
    # The repository holds train/val as .gz and test_2016_flickr as .gz too.
    curl -fsSL --retry 3 -o "$out/$split.$lang.gz.part" "$base/$split.$lang.gz" \
      || { echo "fetch_multi30k.sh: cannot download $base/$split.$lang.gz" >&2; exit 1; }
    mv "$out/$split.$lang.gz.part" "$out/$split.$lang.gz"
  done
done
(cd "$out" && pwd)
