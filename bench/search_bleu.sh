#!/usr/bin/env bash
# bench/search_bleu.sh: what the search does to BLEU on Multi30k test 2016, for one model. Translates
# the test set with each search setting (greedy; beam 4 with the paper's alpha 0.6, alpha 0 and 1;
# beams 8 and 12; beam 4 with n-gram blocking of 2, 3 and 4 subword tokens) and prints one table:
# sacreBLEU, the share of outputs that repeat a word bigram, and the share with a word twice in a row.
#
#   bench/search_bleu.sh MODEL_DIR [OUT_DIR]
#
# BUILD (default build/release) holds tfm; the data come from scripts/fetch_multi30k.sh. Decoding is
# deterministic: the figures do not depend on what else runs.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 1)); then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
model="$1"
out="${2:-$(mktemp -d /tmp/tfm-search-bleu-XXXXXX)}"
tfm="${BUILD:-build/release}/tfm"
[ -x "$tfm" ] || { echo "search_bleu.sh: $tfm is missing; build it first" >&2; exit 2; }
[ -f "$model/config.json" ] || { echo "search_bleu.sh: $model is not a model directory" >&2; exit 2; }
mkdir -p "$out"
data="$(scripts/fetch_multi30k.sh)"
zcat "$data/test_2016_flickr.de.gz" >"$out/ref.de"

settings=(
  "greedy|-b 1"
  "beam 4, alpha 0.6 (the paper's)|-b 4 --alpha 0.6"
  "beam 4, alpha 0|-b 4 --alpha 0"
  "beam 4, alpha 1.0|-b 4 --alpha 1.0"
  "beam 8, alpha 0.6|-b 8 --alpha 0.6"
  "beam 12, alpha 0.6|-b 12 --alpha 0.6"
  "beam 4, alpha 0.6, no repeated 2-gram|-b 4 --alpha 0.6 --no-repeat-ngram-size 2"
  "beam 4, alpha 0.6, no repeated 3-gram|-b 4 --alpha 0.6 --no-repeat-ngram-size 3"
  "beam 4, alpha 0.6, no repeated 4-gram|-b 4 --alpha 0.6 --no-repeat-ngram-size 4"
)
echo "| search | BLEU | outputs repeating a word bigram | outputs with a word twice in a row |"
echo "|---|---|---|---|"
n=0
for setting in "${settings[@]}"; do
  n=$((n + 1))
  label="${setting%%|*}" flags="${setting#*|}"
  # shellcheck disable=SC2086  # the flags are words
  "$tfm" translate -m "$model" -i "$data/test_2016_flickr.en.gz" -o "$out/$n.de" $flags 2>"$out/$n.log"
  bleu="$("$tfm" bleu -r "$out/ref.de" -i "$out/$n.de" | grep -oE '[0-9]+\.[0-9]+' | head -1)"
  python3 - "$out/$n.de" "$label" "$bleu" <<'EOF'
import sys
path, label, bleu = sys.argv[1:4]
lines = open(path, encoding="utf-8").read().splitlines()
def repeats_bigram(words):
    grams = list(zip(words, words[1:]))
    return len(grams) != len(set(grams))
def doubled(words):
    return any(a == b for a, b in zip(words, words[1:]))
words = [line.lower().split() for line in lines]
share = lambda test: 100.0 * sum(1 for w in words if test(w)) / max(len(words), 1)
print(f"| {label} | {bleu} | {share(repeats_bigram):.1f}% | {share(doubled):.1f}% |")
EOF
done
echo "(outputs in $out)" >&2
