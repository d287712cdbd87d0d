#!/usr/bin/env bash
# bench/ab_train.sh: training speed on real batches for two tfm binaries, side by side in one run.
#
#   bench/ab_train.sh TFM_BEFORE TFM_AFTER [ROUNDS]
#
# Trains the Multi30k recipe (RECIPE, default configs/multi30k-en-de-d256.yaml) for STEPS updates (default
# 400) with each binary, alternating (before, after, after, before, ...) ROUNDS times each (default
# 3), and prints per run the seconds an update from update 150 on (metrics.jsonl's elapsed_s), then
# the medians, after / before and the runs' spread. Real batches change shape from update to update,
# which bench_train_step's one fixed batch does not show. Then one run of each binary with
# ONEDNN_VERBOSE=2 counts the oneDNN primitives made (COUNT_STEPS updates, default 150) and the
# milliseconds spent making them. MAX_TOKENS (default: the recipe's) and DROPOUT (default 0.1) are
# set for every run; validation and checkpoints are off but for the last step. Keep the machine
# quiet while it runs. The data come as scripts/multi30k.sh gets them (TFM_DATA_DIR or
# ../shared/data, else downloaded).
set -euo pipefail
if (($# < 2)); then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
before="$(realpath "$1")" after="$(realpath "$2")" rounds="${3:-3}"
for b in "$before" "$after"; do [ -x "$b" ] || { echo "ab_train.sh: $b is not a program" >&2; exit 2; }; done
cd "$(dirname "$0")/.."
recipe="${RECIPE:-configs/multi30k-en-de-d256.yaml}" steps="${STEPS:-400}" count_steps="${COUNT_STEPS:-150}"
data="$(scripts/fetch_multi30k.sh)"
export TFM_DATA_DIR="$(dirname "$data")"
out="$(mktemp -d /tmp/tfm-ab-train-XXXXXX)"
sets=(--set "model.dropout=${DROPOUT:-0.1}" --set validation.every_steps=1000000
  --set checkpoints.every_fraction=1.0)
[ -n "${MAX_TOKENS:-}" ] && sets+=(--set "data.max_tokens=$MAX_TOKENS")

# One vocabulary, learned once and copied into every run (with its vocab.recipe.json, so that the
# run takes it), so that every run starts training at once.
"$before" train -c "$recipe" --run-dir "$out/vocab-run" --max-steps 1 "${sets[@]}" >"$out/vocab.log" 2>&1

train() {  # train BINARY RUN_DIR STEPS [ENV...]
  local binary="$1" dir="$2" n="$3"
  shift 3
  mkdir -p "$dir"
  cp "$out/vocab-run/vocab."* "$dir/"
  env "$@" "$binary" train -c "$recipe" --run-dir "$dir" --max-steps "$n" "${sets[@]}" >"$dir.log" 2>&1
}

seconds_per_step() {
  python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r.get("type") == "train" and r["step"] >= 150]
first, last = rows[0], rows[-1]
print("%.4f" % ((last["elapsed_s"] - first["elapsed_s"]) / (last["step"] - first["step"])))
PY
}

order=()
for ((i = 0; i < rounds; i++)); do
  if ((i % 2 == 0)); then order+=(before after); else order+=(after before); fi
done
declare -A times=([before]="" [after]="")
n=0
for which in "${order[@]}"; do
  n=$((n + 1))
  binary="$before"
  [[ "$which" == after ]] && binary="$after"
  train "$binary" "$out/$which-$n" "$steps"
  s="$(seconds_per_step "$out/$which-$n")"
  times[$which]+="$s "
  echo "run $n of ${#order[@]}: $which: $s s an update" >&2
done

count() {  # primitives made and their milliseconds, from ONEDNN_VERBOSE's create lines
  train "$1" "$out/count-$2" "$count_steps" ONEDNN_VERBOSE=2
  grep '^onednn_verbose,create:' "$out/count-$2.log" |
    awk -F, -v steps="$count_steps" '{n++; ms += $NF} END {printf "%d primitives, %.1f ms (%.2f a step, %.2f ms a step)", n, ms, n / steps, ms / steps}'
}

python3 - "${times[before]}" "${times[after]}" <<'PY'
import statistics, sys
before = [float(x) for x in sys.argv[1].split()]
after = [float(x) for x in sys.argv[2].split()]
mb, ma = statistics.median(before), statistics.median(after)
print("| binary | s an update, median | runs |")
print("|---|---:|---|")
print("| before | %.4f | %s |" % (mb, ", ".join("%.4f" % x for x in before)))
print("| after | %.4f | %s |" % (ma, ", ".join("%.4f" % x for x in after)))
print()
print("after / before: %.3f (before / after: %.3f)" % (ma / mb, mb / ma))
PY
echo
echo "primitives made in $count_steps updates (ONEDNN_VERBOSE=2):"
echo "  before: $(count "$before" before)"
echo "  after:  $(count "$after" after)"
echo "runs: $out"
