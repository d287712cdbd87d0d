#!/usr/bin/env bash
# bench/parse_constraint.sh: tfm parse with the tree constraint (the default) against the model alone
# (--no-constraints), at the paper's settings (beam 21, alpha 0.3, input + 300), on the Penn Treebank
# sample's splits as scripts/parse_ptb.sh prepares them (DATA/dev.gold, DATA/test.gold).
#
#   bench/parse_constraint.sh MODEL DATA [OUT] [THREADS]
#
# For each split (dev: speed; test: F1) and each mode, parses the gold trees' words with their tags
# (--input-format trees, as scripts/parse_ptb.sh), and prints a table row: sentences/s, the summary
# line's counts (best hypothesis not a tree, repaired) and, for test, tfm evalb's F1 (COLLINS.prm and
# nk.prm, all lengths and <= 40 words). OUT (default a temporary folder) keeps the parses and logs.
# THREADS (default 2) is tfm parse's --threads. Keep the machine quiet: the speeds are wall-clock.
set -euo pipefail
if (($# < 2)); then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
model="$1" data="$2" out="${3:-$(mktemp -d /tmp/tfm-parse-constraint-XXXXXX)}" threads="${4:-2}"
cd "$(dirname "$0")/.."
tfm="${TFM:-build/release/tfm}"
mkdir -p "$out"

# F1 of an evalb report's summary: "-- All --" or "-- len<=40 --".
f1() { grep -A 9 -- "-- $2 --" "$1" | grep "Bracketing FMeasure" | awk '{print $NF}'; }

echo "| split | constraint | sentences | sentences/s | best not a tree | repaired | F1 collins all / <=40 | F1 nk all / <=40 |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for split in dev test; do
  for mode in on off; do
    flag=""
    [[ "$mode" == off ]] && flag="--no-constraints"
    "$tfm" parse -m "$model" --input-format trees -i "$data/$split.gold" -o "$out/$split.$mode.parsed" \
      --threads "$threads" $flag 2>"$out/$split.$mode.log"
    summary="$(tail -1 "$out/$split.$mode.log")"
    sentences="$(sed -E 's/^parsed ([0-9]+) sentences.*/\1/' <<<"$summary")"
    speed="$(sed -E 's/.* s, ([0-9.]+) sentences\/s.*/\1/' <<<"$summary")"
    ill="$(sed -E 's/.*best hypothesis not a tree: ([0-9]+),.*/\1/' <<<"$summary")"
    repaired="$(sed -E 's/.*repaired \(no tree in the beam\): ([0-9]+).*/\1/' <<<"$summary")"
    scores="" nk=""
    if [[ "$split" == test ]]; then
      for params in collins nk; do
        "$tfm" evalb -p "$params" "$data/$split.gold" "$out/$split.$mode.parsed" \
          >"$out/$split.$mode.evalb.$params" 2>/dev/null
      done
      scores="$(f1 "$out/$split.$mode.evalb.collins" All) / $(f1 "$out/$split.$mode.evalb.collins" 'len<=40')"
      nk="$(f1 "$out/$split.$mode.evalb.nk" All) / $(f1 "$out/$split.$mode.evalb.nk" 'len<=40')"
    fi
    echo "| $split | $mode | $sentences | $speed | $ill | $repaired | $scores | $nk |"
  done
done
echo "(parses and logs in $out)" >&2
