#!/usr/bin/env bash
# int8 decoding's quality (issue 19): BLEU of f32, bf16, int8 and int8-bf16 translations with the same
# model, on two test sets:
#   - Multi30k test 2016 (EN->DE, 1000 sentences, sacreBLEU's default 13a), with MULTI30K_MODEL (a model
#     trained by scripts/multi30k.sh; skipped when empty);
#   - IWSLT14 DE->EN test (6750 sentences, fairseq's split, tokenized BLEU as fairseq reports it), with a
#     model trained here for IWSLT_MINUTES on what the data folder has of IWSLT14's training text: its
#     8,639-pair sample plus the first 6,283 validation pairs (drawn from the training split), the last
#     1,000 validation pairs for validation (the full 160k-pair split is not in the data folder,
#     ../shared/data/iwslt14-de-en/README.md). The model is small and undertrained: what counts is
#     the difference between the precisions, not the BLEU itself.
# Prints one table row per test set: BLEU per precision and int8's difference to f32.
#
# Usage: bench/int8_quality.sh
# Environment: TFM (build/release/tfm), TFM_DATA_DIR (../shared/data), WORK (/tmp/int8-quality; a
#   finished IWSLT run there is reused), IWSLT_MINUTES (20), MULTI30K_MODEL (none), THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
TFM="${TFM:-build/release/tfm}"
DATA="${TFM_DATA_DIR:-../shared/data}"
WORK="${WORK:-/tmp/int8-quality}"
IWSLT_MINUTES="${IWSLT_MINUTES:-20}"
THREADS="${THREADS:-2}"
PRECISIONS=(f32 bf16 int8 int8-bf16)
[ -x "$TFM" ] || { echo "int8_quality: $TFM is not an executable (build first)" >&2; exit 2; }
[ -d "$DATA/iwslt14-de-en" ] || { echo "int8_quality: no $DATA/iwslt14-de-en" >&2; exit 2; }
mkdir -p "$WORK/data"

# A table row named $2: BLEU of each precision's translation (model $3) of $4 against $5, files
# named after the key $1; the rest are bleu's flags.
bleu_row() {
  local name="$1" label="$2" model="$3" source="$4" reference="$5"
  shift 5
  local scores=()
  for precision in "${PRECISIONS[@]}"; do
    "$TFM" translate -m "$model" -i "$source" -o "$WORK/$name.$precision.txt" --precision "$precision" \
      --threads "$THREADS" 2> "$WORK/$name.$precision.log"
    scores+=("$("$TFM" bleu -r "$reference" -i "$WORK/$name.$precision.txt" "$@" --json |
      "${PYTHON:-python3}" -c 'import json, sys; print("%.2f" % json.load(sys.stdin)["score"])')")
  done
  local f32="${scores[0]}"
  printf '| %s | %s | %s | %s | %s | %+.2f | %+.2f |\n' "$label" "${scores[@]}" \
    "$(echo "${scores[2]} - $f32" | bc -l)" "$(echo "${scores[3]} - $f32" | bc -l)"
}

# IWSLT14 DE->EN: the data, then a model trained for IWSLT_MINUTES (kept in WORK).
iwslt="$DATA/iwslt14-de-en"
d="$WORK/data"
for lang in de en; do
  { zcat "$iwslt/train_sample.$lang.gz"; zcat "$iwslt/valid.$lang.gz" | sed -n "1,6283p"; } > "$d/train.$lang"
  zcat "$iwslt/valid.$lang.gz" | tail -n 1000 > "$d/valid.$lang"
  zcat "$iwslt/test.$lang.gz" > "$d/test.$lang"
done
if [ ! -d "$WORK/iwslt-model" ]; then
  # The Multi30k recipe's larger model on IWSLT14's German -> English files.
  TFM_DATA_DIR="$DATA" "$TFM" train -c configs/multi30k-en-de-d256.yaml \
    --set data.train_source="$d/train.de" --set data.train_target="$d/train.en" \
    --set data.valid_source="$d/valid.de" --set data.valid_target="$d/valid.en" \
    -o "$WORK/iwslt-run" --max-minutes "$IWSLT_MINUTES" \
    --threads "$THREADS" > "$WORK/iwslt-train.log" 2>&1
  "$TFM" average -c "$WORK/iwslt-run/checkpoints" -n 5 -o "$WORK/iwslt-model" >> "$WORK/iwslt-train.log" 2>&1
fi

echo "| test set | f32 | bf16 | int8 | int8-bf16 | int8 - f32 | int8-bf16 - f32 |"
echo "|---|---:|---:|---:|---:|---:|---:|"
if [ -n "${MULTI30K_MODEL:-}" ]; then
  zcat "$DATA/multi30k/test_2016_flickr.en.gz" > "$d/m30k.en"
  zcat "$DATA/multi30k/test_2016_flickr.de.gz" > "$d/m30k.de"
  bleu_row m30k "Multi30k test 2016 EN-DE (sacreBLEU)" "$MULTI30K_MODEL" "$d/m30k.en" "$d/m30k.de"
fi
bleu_row iwslt "IWSLT14 test DE-EN (tokenized BLEU)" "$WORK/iwslt-model" "$d/test.de" "$d/test.en" --tokenized
