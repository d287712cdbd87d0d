#!/usr/bin/env bash
# bench/parse_data_curve.sh: parsing F1 against the number of training trees. Trains the parsing
# recipe on the first N trees of the Penn Treebank sample's training split (file order, wsj_0001
# onwards) for a fixed number of epochs each, averages the last 5 checkpoints, parses dev and test
# (beam 21, alpha 0.3, input + 300, the tree constraint) and prints one table: trees, updates, dev and
# test F1 (COLLINS.prm), so that the F1 a larger treebank would give can be read off the curve.
#
#   bench/parse_data_curve.sh [--trees "425 849 1698 3396"] [--epochs 100] [--out DIR]
#                             [--recipe CONFIG] [--set K=V ...]
#
#   --trees    training set sizes, one run each (default "425 849 1698 3396": an eighth to all)
#   --epochs   passes over each training set (default 100): the run's budget (training.max_epochs,
#              no time limit), so the figures do not depend on the machine's speed or load
#   --out      where the runs and the table go (default runs/parse-data-curve); a size whose run
#              folder already holds test.evalb is not run again, only read
#   --recipe   the recipe (default configs/ptb-sample-parse.yaml)
#   --set      a recipe override passed to tfm train (repeatable)
#   BUILD      the build folder holding tfm (default build/release)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes="425 849 1698 3396" epochs=100 out=runs/parse-data-curve
recipe=configs/ptb-sample-parse.yaml sets=()
die() { echo "parse_data_curve.sh: $*" >&2; exit 2; }
source scripts/ptb_sample_splits.sh
while (($#)); do
  case "$1" in
    --trees) [ $# -ge 2 ] || die "--trees needs a value"; sizes="$2"; shift ;;
    --epochs) [ $# -ge 2 ] || die "--epochs needs a value"; epochs="$2"; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift ;;
    --recipe) [ $# -ge 2 ] || die "--recipe needs a value"; recipe="$2"; shift ;;
    --set) [ $# -ge 2 ] || die "--set needs a value"; sets+=(--set "$2"); shift ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift
done
[[ "$epochs" =~ ^[1-9][0-9]*$ ]] || die "--epochs must be a positive whole number, not '$epochs'"
for n in $sizes; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] && ((n <= PTB_SAMPLE_TRAIN_TREES)) \
    || die "--trees: '$n' is not a number of trees from 1 to $PTB_SAMPLE_TRAIN_TREES (the training split's)"
done
[ -f "$recipe" ] || die "no recipe $recipe"
tfm="${BUILD:-build/release}/tfm"
[ -x "$tfm" ] || die "no $tfm: build first (cmake --build --preset release)"
trees="$(scripts/fetch_ptb_sample.sh)/wsj_sample.trees.gz"
leaves="$(sed -n 's/^ *tree_leaves: *\([a-z]*\).*/\1/p' "$recipe")"
leaves="${leaves:-xx}"

mkdir -p "$out/data"
linearise() {  # name range
  [ -s "$out/data/$1.sequences" ] && return 0
  "$tfm" linearise -i "$trees" --range "$2" --words "$out/data/$1.words" \
    --sequences "$out/data/$1.sequences" --trees "$out/data/$1.gold" --leaves "$leaves"
}
linearise dev "$PTB_SAMPLE_DEV"
linearise test "$PTB_SAMPLE_TEST"

# F1 of the "-- All --" block of an EVALB report.
fmeasure() { grep -A 9 -- "-- All --" "$1" | sed -n 's/^Bracketing FMeasure *= *//p'; }

for n in $sizes; do
  run="$out/trees-$n"
  if [ ! -s "$run/test.evalb" ]; then
    linearise "train-$n" "1-$n"
    export PARSE_DATA="$run/data"
    mkdir -p "$PARSE_DATA"
    cp "$out/data/train-$n.words" "$PARSE_DATA/train.words"
    cp "$out/data/train-$n.sequences" "$PARSE_DATA/train.sequences"
    cp "$out/data/dev".{words,sequences} "$PARSE_DATA/"
    echo "== $n training trees, $epochs epochs"
    resume=""
    [ -d "$run/checkpoints" ] && resume="--resume"
    # The epochs are the budget: the schedule decays to 0 and the checkpoints are spaced over them.
    "$tfm" train -c "$recipe" --run-dir "$run" --set training.max_minutes=0 \
      --set training.max_epochs="$epochs" --set checkpoints.every_minutes=0 \
      ${sets[@]+"${sets[@]}"} $resume
    "$tfm" average -c "$run/checkpoints" -n 5 -o "$run/averaged"
    for split in dev test; do
      "$tfm" parse -m "$run/averaged" --input-format trees -i "$out/data/$split.gold" \
        -o "$run/$split.parsed" 2> "$run/$split.parse.log"
      "$tfm" evalb -p collins "$out/data/$split.gold" "$run/$split.parsed" > "$run/$split.evalb.tmp"
      mv "$run/$split.evalb.tmp" "$run/$split.evalb"
    done
  fi
done

echo "# parsing F1 against training trees: $recipe ${sets[*]:-}, $epochs epochs each, averaged, beam 21"
echo "| training trees | updates | dev F1 | test F1 |"
echo "|---:|---:|---:|---:|"
for n in $sizes; do
  run="$out/trees-$n"
  updates="$(tail -n 1 "$run/metrics.jsonl" | sed -n 's/.*"step": *\([0-9]*\).*/\1/p')"
  echo "| $n | ${updates:-?} | $(fmeasure "$run/dev.evalb") | $(fmeasure "$run/test.evalb") |"
done
