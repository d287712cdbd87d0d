#!/usr/bin/env bash
# The paper's WMT 2014 experiments end to end: trains a recipe of configs/wmt14-*.yaml (learning its
# shared vocabulary first, as tfm train does, from data.vocab_sample sentences), averages the last
# checkpoints.keep checkpoints (5 for base, 20 for big, as section 6.1), translates newstest2014 with
# beam 4, length penalty 0.6 and outputs of at most input length + 50, and scores it twice:
# sacreBLEU-style BLEU (detokenized, cased, with its signature) and the paper's tokenized BLEU
# (Moses-tokenized; for German with compounds split, as the paper's 27.3 and 28.4 are).
#
# Usage: scripts/wmt14.sh RECIPE [RUN_DIR] [tfm train options...]
#   RECIPE     configs/wmt14-en-de-base.yaml, configs/wmt14-en-de-big.yaml or
#              configs/wmt14-en-fr-big.yaml (the language pair is read from its name)
#   RUN_DIR    default: the recipe's name under runs/
#   options    passed to tfm train, e.g. a short trial:
#                scripts/wmt14.sh configs/wmt14-en-de-base.yaml runs/try --set training.max_steps=20
#                  --set data.update_tokens=0 --set data.vocab_size=8000
# A run directory with checkpoints is resumed (tfm train --resume), so the script can be run again
# after an interruption; a finished run goes straight to averaging and translation.
#
# Data: $WMT14_DIR when it holds train.en and train.XX; else scripts/fetch_wmt14.sh en-XX DIR
# downloads them into DIR = $WMT14_DIR or runs/data/wmt14-en-XX (../shared/data holds only the
# test sets, which fill in newstest2013/2014 where DIR lacks them).
# Environment: WMT14_DIR (above); TFM_DEVICE: cpu or cuda (default: cuda when nvidia-smi sees a GPU,
# else cpu); TFM (default build/release/tfm).
set -euo pipefail
cd "$(dirname "$0")/.."
me=wmt14.sh
die() {
  echo "$me: error: $*" >&2
  exit 1
}
[ "$#" -ge 1 ] || {
  echo "usage: scripts/wmt14.sh RECIPE [RUN_DIR] [tfm train options...]" >&2
  exit 2
}
recipe=$1
shift
[ -f "$recipe" ] || die "$recipe: no such recipe"
name=$(basename "$recipe" .yaml)
run="runs/$name"
if [ "$#" -ge 1 ] && [[ "$1" != -* ]]; then
  run=$1
  shift
fi
train_options=("$@")
pair=$(grep -o 'en-[a-z][a-z]' <<<"$name" | head -n 1) || true
case "$pair" in
  en-de | en-fr) xx=${pair#en-} ;;
  *) die "$recipe: the name says no language pair (expected wmt14-en-de-... or wmt14-en-fr-...)" ;;
esac

tfm=${TFM:-build/release/tfm}
if [ ! -x "$tfm" ]; then
  cmake --preset release -G Ninja >/dev/null && cmake --build --preset release
fi
if [ -z "${TFM_DEVICE:-}" ]; then
  TFM_DEVICE=cpu
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then TFM_DEVICE=cuda; fi
fi

# The data.
data=${WMT14_DIR:-runs/data/wmt14-$pair}
if [ ! -s "$data/train.en" ] || [ ! -s "$data/train.$xx" ]; then
  echo "$me: no train.en and train.$xx in $data: downloading WMT14 $pair (scripts/fetch_wmt14.sh)" >&2
  data=$(scripts/fetch_wmt14.sh "$pair" "$data")
fi
data=$(cd "$data" && pwd)
shared=../shared/data/wmt14-$pair-test
for set in newstest2013 newstest2014; do
  for lang in en "$xx"; do
    if [ ! -s "$data/$set.$lang" ]; then
      [ -s "$shared/$set.$lang.gz" ] || die "$data/$set.$lang is missing (and $shared has none)"
      echo "$me: $set.$lang from $shared" >&2
      gzip -dc "$shared/$set.$lang.gz" >"$data/$set.$lang.part"
      mv "$data/$set.$lang.part" "$data/$set.$lang"
    fi
  done
done
export WMT14_DIR=$data

# Training: the vocabulary is learned into the run by tfm train (data.vocab_type, vocab_size,
# vocab_sample); an existing run is resumed.
resume=()
[ -d "$run/checkpoints" ] && [ -n "$(ls -A "$run/checkpoints" 2>/dev/null)" ] && resume=(--resume)
echo "== training $recipe into $run on $TFM_DEVICE${resume:+ (resuming)}" >&2
"$tfm" train -c "$recipe" --run-dir "$run" --device "$TFM_DEVICE" "${resume[@]}" \
  "${train_options[@]}"

# Averaging: checkpoints.keep of the recipe, or of a --set given above.
keep=$(awk '/^[^ #]/ { section = $1 } section == "checkpoints:" && $1 == "keep:" { print $2 }' "$recipe")
for option in "${train_options[@]}"; do
  [[ "$option" == checkpoints.keep=* ]] && keep=${option#checkpoints.keep=}
done
keep=${keep:-5}
echo "== averaging the last $keep checkpoints" >&2
"$tfm" average -c "$run/checkpoints" -n "$keep" -o "$run/averaged"

# newstest2014: beam 4, alpha 0.6, outputs of at most input length + 50 (section 6.1).
echo "== translating newstest2014 ($pair) with beam 4" >&2
"$tfm" translate -m "$run/averaged" -i "$data/newstest2014.en" -o "$run/newstest2014.hyp.$xx" \
  --beam-size 4 --alpha 0.6 --max-length-offset 50 --device "$TFM_DEVICE"
ref="$data/newstest2014.$xx"

echo "== newstest2014, $pair, averaged model, beam 4: sacreBLEU (detokenized, cased)"
"$tfm" bleu --signature -r "$ref" -i "$run/newstest2014.hyp.$xx" | tee "$run/newstest2014.bleu"
echo "== newstest2014, $pair: tokenized BLEU as the paper reports it"
tokenized=(--tokenize moses --lang "$xx")
[ "$xx" = de ] && tokenized+=(--split-compounds)
"$tfm" bleu "${tokenized[@]}" -r "$ref" -i "$run/newstest2014.hyp.$xx" |
  tee "$run/newstest2014.tokenized.bleu"
echo "== first translations:"
paste -d '\n' <(head -n 3 "$data/newstest2014.en") <(head -n 3 "$run/newstest2014.hyp.$xx")
