#!/usr/bin/env bash
# Checks the training-memory estimate of train/batch_size.h (data.max_tokens: auto) against the
# measured peak of training steps: bench_train_step at two batch budgets per model, sequence length
# and precision, each in its own process, on synthetic batches of equal source and target lengths.
# Prints a Markdown table: the measured peak above the process's baseline (peak RSS - RSS before
# the model; on a GPU the caching allocator's peak), the estimate, their ratio, and the measured
# memory per padded token (the slope between the two budgets) beside the estimate's.
#
# Usage: bench/batch_memory.sh [device (cpu)]
# Environment: TFM_BENCH (build/release/bench_train_step), THREADS (2), GRID (a file of lines
# "name preset-or-config.json vocab length batch1 batch2 precision"; default: the grid below).
set -euo pipefail
cd "$(dirname "$0")/.."
device="${1:-cpu}"
bench="${TFM_BENCH:-build/release/bench_train_step}"
threads="${THREADS:-2}"
[ -x "$bench" ] || { echo "batch_memory.sh: $bench is missing (cmake --build --preset release)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The model of configs/multi30k-en-de-d256.yaml (d_model 256, 3+3 layers).
cat > "$work/small.json" <<'EOF'
{"layers": 3, "d_model": 256, "d_ff": 1024, "heads": 4, "d_k": 64, "d_v": 64, "dropout": 0.2,
 "max_positions": 256, "vocab_size": 8000}
EOF
grid="${GRID:-$work/grid}"
if [ -z "${GRID:-}" ]; then
  cat > "$grid" <<EOF
small $work/small.json 8000 32 32 128 f32
small $work/small.json 8000 128 16 64 f32
small $work/small.json 8000 32 32 128 bf16
small $work/small.json 8000 128 16 64 bf16
base base 37000 32 32 96 f32
base base 37000 128 16 48 f32
base base 37000 32 32 96 bf16
base base 37000 128 16 48 bf16
EOF
fi

results="$work/results.jsonl"
while read -r name model vocab length batch1 batch2 precision; do
  [ -n "$name" ] || continue
  for batch in "$batch1" "$batch2"; do
    if [[ "$model" == *.json ]]; then source_args=(--config "$model"); else source_args=(--preset "$model"); fi
    echo "== $name $precision, length $length, batch $batch" >&2
    "$bench" "${source_args[@]}" --vocab "$vocab" --batch "$batch" --src-len "$length" \
      --tgt-len "$length" --steps 1 --warmup 1 --threads "$threads" --precision "$precision" \
      --device "$device" 2>/dev/null |
      python3 -c 'import json, sys; r = json.loads(sys.stdin.read()); r["name"] = sys.argv[1]; print(json.dumps(r))' "$name" >> "$results"
  done
done < "$grid"

python3 - "$results" "$device" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
device = sys.argv[2]
def measured(r):
    return r["peak_device_mb"] if device != "cpu" else r["peak_rss_mb"] - r["baseline_rss_mb"]
print("| model | precision | length | tokens | measured MiB | estimate MiB | estimate / measured "
      "| measured KiB/token | estimate KiB/token |")
print("|---|---|---|---|---|---|---|---|---|")
for a, b in zip(rows[0::2], rows[1::2]):
    ta, tb = a["src_tokens"] + a["tgt_tokens"], b["src_tokens"] + b["tgt_tokens"]
    slope = (measured(b) - measured(a)) * 1024 / (tb - ta)
    for r, t in ((a, ta), (b, tb)):
        print(f"| {r['name']} | {r['precision']} | {r['src_len']} | {t} | {measured(r):.0f} "
              f"| {r['estimated_mb']:.0f} | {r['estimated_mb'] / measured(r):.2f} "
              f"| {slope:.0f} | {r['estimated_kib_per_token']:.0f} |")
EOF
