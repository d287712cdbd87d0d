#!/usr/bin/env bash
# bench/output_fingerprint.sh: the sha256 of everything a build of tfm writes for one fixed small job,
# to show that a change left outputs byte for byte unchanged (a refactor's proof).
#
#   bench/output_fingerprint.sh BUILD OUT        e.g. bench/output_fingerprint.sh build/release /tmp/fp-after
#
# With BUILD's `tfm`, in OUT: trains a small Multi30k model (2+2 layers, d_model 64, f32, seed 1, warmup 100, 300
# updates with a checkpoint and validation BLEU at step 200), then with it translates the first 100
# sentences of test 2016 (beam 4; greedy; 3-best lists; alignments; attention weights), scores the
# translation with `tfm bleu`, draws one attention figure, and prints one line per output file:
# its sha256 and its name. Files that carry wall-clock times (logs, metrics, state.json's timings) are
# left out. Compare two builds with: diff <(bench/output_fingerprint.sh A /tmp/a) <(... B /tmp/b).
# Data: $TFM_DATA_DIR/multi30k (default ../shared/data). Takes about a minute on 2 cores.
set -euo pipefail
if (($# != 2)); then
  sed -n '2,13p' "$0" >&2
  exit 2
fi
tfm="$(realpath "$1")/tfm"
out="$(realpath -m "$2")"
cd "$(dirname "$0")/.."
[ -x "$tfm" ] || { echo "output_fingerprint.sh: no tfm in $1" >&2; exit 2; }
export TFM_DATA_DIR="${TFM_DATA_DIR:-$(realpath ../shared/data)}"
rm -rf "$out"
mkdir -p "$out"

"$tfm" train -c configs/multi30k-en-de.yaml -o "$out/run" --max-steps 300 --threads 2 \
  --set model.layers=2 --set model.d_model=64 --set model.d_ff=128 --set model.heads=2 \
  --set model.d_k=32 --set model.d_v=32 --set data.vocab_size=1000 --set data.max_tokens=1024 \
  --set optimizer.warmup=100 --set training.precision=f32 --set training.seed=1 --set validation.every_steps=200 \
  --set validation.max_sentences=50 --set checkpoints.every_fraction=0 \
  --set checkpoints.every_steps=40 >"$out/train.log" 2>&1 ||
  { tail -5 "$out/train.log" >&2; exit 1; }

model="$(ls -d "$out"/run/checkpoints/*/ 2>/dev/null | sort | tail -1)"
[ -n "$model" ] || model="$out/run/model"
zcat "$TFM_DATA_DIR/multi30k/test_2016_flickr.en.gz" | sed -n 1,100p >"$out/source.en"
zcat "$TFM_DATA_DIR/multi30k/test_2016_flickr.de.gz" | sed -n 1,100p >"$out/reference.de"
t=("$tfm" translate -m "$model" -i "$out/source.en" --threads 2)
"${t[@]}" -o "$out/beam4.de"
"${t[@]}" -b 1 -o "$out/greedy.de"
"${t[@]}" --n-best 3 --n-best-output -o "$out/nbest3.txt"
"${t[@]}" --alignment -o "$out/aligned.txt"
"${t[@]}" --attention-output "$out/attention.jsonl" --attention-layer 1 -o "$out/beam4-again.de"
"$tfm" bleu -i "$out/beam4.de" -r "$out/reference.de" >"$out/bleu.txt"
"$tfm" attention -m "$model" -i "$(head -1 "$out/source.en")" -o "$out/figure.svg" --threads 2

cd "$out"
find . -type f ! -name '*.log' ! -name 'metrics*' ! -name 'state.json' ! -name '*.lock' \
  ! -path './run/cache/*' | LC_ALL=C sort | xargs sha256sum
