#!/usr/bin/env bash
# Parsing's main job (the paper's section 6.3) on NLTK's Penn Treebank sample: splits the sample by
# file (train wsj_0001-0159, dev 0160-0179, test 0180-0199), linearises the trees, trains
# configs/ptb-sample-parse.yaml for a time budget, averages the last 5 checkpoints, parses the test
# split's sentences (beam 21, alpha 0.3, input + 300; the gold tags put back) and scores them with
# tfm evalb, COLLINS.prm and nk.prm. With WSJ_DIR set to a full treebank's parsed/mrg/wsj folder
# (LDC licence), the standard split is used instead: sections 02-21 train, 22 dev, 23 test.
# Usage: scripts/parse_ptb.sh [minutes of training (default 5; the recipe's full budget is 60)]
#                             [run dir] [recipe (default configs/ptb-sample-parse.yaml)]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-5}"
run="${2:-runs/ptb-sample-parse-${minutes}min}"
recipe="${3:-configs/ptb-sample-parse.yaml}"
tfm=build/release/tfm
[ -x "$tfm" ] || { cmake --preset release -G Ninja >/dev/null && cmake --build --preset release; }
export PARSE_DATA="$run/data"
# The target's leaves as the recipe's model.tree_leaves says (xx or words; docs/PARSING.md).
leaves="$(sed -n 's/^ *tree_leaves: *\([a-z]*\).*/\1/p' "$recipe")"
leaves="${leaves:-xx}"
mkdir -p "$PARSE_DATA"
if [ -n "${WSJ_DIR:-}" ]; then
  [ -d "$WSJ_DIR/02" ] && [ -d "$WSJ_DIR/23" ] \
    || { echo "parse_ptb.sh: WSJ_DIR=$WSJ_DIR has no section folders 02 .. 23" >&2; exit 1; }
  for split in train:"$(seq -f %02g 2 21)" dev:22 test:23; do
    name="${split%%:*}"
    for section in ${split#*:}; do cat "$WSJ_DIR/$section"/*.mrg; done > "$PARSE_DATA/$name.mrg"
    "$tfm" linearise -i "$PARSE_DATA/$name.mrg" --words "$PARSE_DATA/$name.words" \
      --sequences "$PARSE_DATA/$name.sequences" --trees "$PARSE_DATA/$name.gold" --leaves "$leaves"
  done
else
  trees="$(scripts/fetch_ptb_sample.sh)/wsj_sample.trees.gz"
  source scripts/ptb_sample_splits.sh
  for split in train:$PTB_SAMPLE_TRAIN dev:$PTB_SAMPLE_DEV test:$PTB_SAMPLE_TEST; do
    name="${split%%:*}"
    "$tfm" linearise -i "$trees" --range "${split#*:}" --words "$PARSE_DATA/$name.words" \
      --sequences "$PARSE_DATA/$name.sequences" --trees "$PARSE_DATA/$name.gold" --leaves "$leaves"
  done
fi

resume=""
[ -d "$run/checkpoints" ] && resume="--resume"
"$tfm" train -c "$recipe" --run-dir "$run" --max-minutes "$minutes" $resume
"$tfm" average -c "$run/checkpoints" -n 5 -o "$run/averaged"
# The gold trees give the words and their tags (the model writes the brackets only).
"$tfm" parse -m "$run/averaged" --input-format trees -i "$PARSE_DATA/test.gold" -o "$run/test.parsed" \
  2> >(tee "$run/test.parse.log" >&2)
for params in collins nk; do
  "$tfm" evalb -p "$params" "$PARSE_DATA/test.gold" "$run/test.parsed" > "$run/test.evalb.$params"
  echo "== test split, EVALB $params:"
  grep -A 9 -- "-- All --" "$run/test.evalb.$params" | grep -E "All|Bracketing FMeasure|Complete match"
  grep -A 9 -- "-- len<=40 --" "$run/test.evalb.$params" | grep -E "len<=40|Bracketing FMeasure"
done
echo "== first parses:"
head -3 "$run/test.parsed"
