#!/usr/bin/env bash
# bench/mbr_bleu.sh: what minimum Bayes risk decoding (tfm translate --mbr, docs/DECODING.md) does to
# BLEU on Multi30k, beside beam search, for one or more models. Each model translates the validation
# set (1014 sentences, where the settings are chosen) and test 2016 (1000, where they are reported)
# with each setting: beam 4 (alpha 0.6, the recipe's), the 1-best of beam 16, and MBR over the n-best
# lists of beams 8, 16 and 32 at temperature 1 and of beam 16 at 0.5 and 2. Prints one table of
# sacreBLEU per model, set and setting.
#
#   bench/mbr_bleu.sh MODEL_DIR [MODEL_DIR ...]
#   SETTINGS=$'beam 4|-b 4\nMBR, 32 samples|--sampling 32 --mbr' bench/mbr_bleu.sh MODEL_DIR
#
# SETTINGS (lines of "column title|tfm translate flags") replaces the default settings.
# BUILD (default build/release) holds tfm; OUT (default a new /tmp folder) keeps the translations; the
# data come from scripts/fetch_multi30k.sh. Decoding is deterministic: the figures do not depend on
# what else runs.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 1)); then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
tfm="${BUILD:-build/release}/tfm"
[ -x "$tfm" ] || { echo "mbr_bleu.sh: $tfm is missing; build it first" >&2; exit 2; }
for model in "$@"; do
  [ -f "$model/config.json" ] || { echo "mbr_bleu.sh: $model is not a model directory" >&2; exit 2; }
done
out="${OUT:-$(mktemp -d /tmp/tfm-mbr-bleu-XXXXXX)}"
mkdir -p "$out"
data="$(scripts/fetch_multi30k.sh)"
zcat "$data/val.de.gz" >"$out/valid.ref.de"
zcat "$data/test_2016_flickr.de.gz" >"$out/test.ref.de"
declare -A sources=([valid]="$data/val.en.gz" [test]="$data/test_2016_flickr.en.gz")

settings=(
  "beam 4|-b 4"
  "beam 16, 1-best|-b 16"
  "MBR, beam 8, T 1|-b 8 --n-best 8 --mbr"
  "MBR, beam 16, T 1|-b 16 --n-best 16 --mbr"
  "MBR, beam 32, T 1|-b 32 --n-best 32 --mbr"
  "MBR, beam 16, T 0.5|-b 16 --n-best 16 --mbr --mbr-temperature 0.5"
  "MBR, beam 16, T 2|-b 16 --n-best 16 --mbr --mbr-temperature 2"
)
if [ -n "${SETTINGS:-}" ]; then
  mapfile -t settings <<<"$SETTINGS"
  for setting in "${settings[@]}"; do
    [[ "$setting" == *"|"* ]] || { echo "mbr_bleu.sh: SETTINGS line '$setting' has no '|'" >&2; exit 2; }
  done
fi
echo "| model | set | $(for s in "${settings[@]}"; do printf '%s | ' "${s%%|*}"; done)"
echo "|---|---|$(for _ in "${settings[@]}"; do printf -- '---:|'; done)"
m=0
for model in "$@"; do
  m=$((m + 1))
  for set in valid test; do
    row="| $model | $set |"
    n=0
    for setting in "${settings[@]}"; do
      n=$((n + 1))
      hyp="$out/$m.$set.$n.de"
      # shellcheck disable=SC2086  # the flags are words
      "$tfm" translate -m "$model" -i "${sources[$set]}" -o "$hyp" --alpha 0.6 ${setting#*|} \
        2>"$hyp.log"
      bleu="$("$tfm" bleu -r "$out/$set.ref.de" -i "$hyp" | grep -oE '[0-9]+\.[0-9]+' | head -1)"
      row+=" $bleu |"
    done
    echo "$row"
  done
done
echo "(translations in $out)" >&2
