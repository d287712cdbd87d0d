#!/usr/bin/env bash
# The products' split between threads when one core is slower than the other, with
# TFM_CPU_SPLIT=even (each thread an equal part, as before) and with the default, interleaved, alone
# and beside a busy loop at nice NICE pinned to the last core, which then runs tfm's thread there at
# about 1024 / (1024 + weight(NICE)) of its speed (nice 5: 75%). KIND=train: a training step
# (bench_train_step), whose blocked products split by measured rates
# (kernels/cpu/thread_shares.h); KIND=decode: a decoding batch (bench_decode), whose short products
# and output layer take their items from contiguous ranges, a thread that runs out taking from
# the other's end (kernels/cpu/stealing_ranges.h). OpenMP's threads are pinned
# (OMP_PROC_BIND=true, OMP_PLACES=cores) so that the slow thread stays the slow one, as on a VM
# whose vCPUs run at different rates. Prints each setting's median seconds (a step, or a batch)
# over ROUNDS and their spread, and the products' GFLOP/s (train) or the best run's seconds
# (decode).
#
# Usage: bench/uneven_cores.sh [bench_train_step or bench_decode options]
#   default, KIND=train: --preset base --precision f32 --batch 128 --src-len 32 --tgt-len 32
#                        --steps 2 --warmup 1
#   default, KIND=decode: --preset base --vocab 32000 --batch 32 --src-len 25 --out-len 25
#                         --beams 1 --runs 3 --warmup 1 --precision f32 (one beam size only)
# Environment: KIND (train), BUILD (build/release), ROUNDS (3), NICE (5), THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD="${BUILD:-build/release}"
ROUNDS="${ROUNDS:-3}"
NICE="${NICE:-5}"
THREADS="${THREADS:-2}"
KIND="${KIND:-train}"
case "$KIND" in
  train) bench="$BUILD/bench_train_step"
    defaults=(--preset base --precision f32 --batch 128 --src-len 32 --tgt-len 32 --steps 2
              --warmup 1) ;;
  decode) bench="$BUILD/bench_decode"
    defaults=(--preset base --vocab 32000 --batch 32 --src-len 25 --out-len 25 --beams 1 --runs 3
              --warmup 1 --precision f32) ;;
  *) echo "uneven_cores.sh: KIND must be train or decode, not '$KIND'" >&2; exit 2 ;;
esac
[ -x "$bench" ] || { echo "uneven_cores.sh: $bench is missing (build it first)" >&2; exit 1; }
[ $# -gt 0 ] || set -- "${defaults[@]}"
args=("$@")
last_core=$(($(nproc) - 1))
results="$(mktemp)"
busy_pid=""
stop_busy() { [ -z "$busy_pid" ] || kill "$busy_pid" 2>/dev/null || true; busy_pid=""; }
trap 'stop_busy; rm -f "$results"' EXIT

run() {  # LOAD SPLIT
  local json
  json="$(OMP_PROC_BIND=true OMP_PLACES=cores OMP_NUM_THREADS="$THREADS" TFM_CPU_SPLIT="$2" \
    "$bench" --threads "$THREADS" "${args[@]}" | grep '^{' | tail -1)"
  [ -n "$json" ] || { echo "uneven_cores.sh: $bench printed no result" >&2; exit 1; }
  echo "$1 $2 $json" >> "$results"
}

for round in $(seq "$ROUNDS"); do
  for load in alone busy; do
    if [ "$load" = busy ]; then
      taskset -c "$last_core" nice -n "$NICE" sh -c 'while :; do :; done' &
      busy_pid=$!
    fi
    # Alternate which split goes first.
    splits=(even measured)
    ((round % 2)) || splits=(measured even)
    for split in "${splits[@]}"; do
      echo "== round $round, $load, TFM_CPU_SPLIT=$split" >&2
      run "$load" "$split"
    done
    stop_busy
  done
done

python3 - "$results" "$NICE" "$KIND" << 'EOF'
import json, statistics, sys
train = sys.argv[3] == "train"
rows = {}
for line in open(sys.argv[1]):
    load, split, text = line.split(" ", 2)
    j = json.loads(text)
    rows.setdefault((load, split), []).append(
        (j["seconds_per_step"], j["gemm_gflops_per_second"]) if train
        else (j["seconds"], j["best_seconds"]))
print(f"{'load':28s} {'split':9s} {'s/step' if train else 's/batch':>8s} {'spread':>15s} "
      f"{'products GFLOP/s' if train else 'best s/batch':>17s}")
for load in ("alone", "busy"):
    label = "alone" if load == "alone" else f"beside nice {sys.argv[2]} on one core"
    for split in ("even", "measured"):
        r = rows.get((load, split), [])
        if not r:
            continue
        s = [x[0] for x in r]; g = [x[1] for x in r]
        # The default split: measured rates for training's products, stealing for decoding's.
        name = split if train or split == "even" else "stealing"
        last = f"{statistics.median(g):17.1f}" if train else f"{min(g):17.3f}"
        print(f"{label:28s} {name:9s} {statistics.median(s):8.3f} {min(s):7.3f}-{max(s):<7.3f} {last}")
    if rows.get((load, "even")) and rows.get((load, "measured")):
        ratio = statistics.median(x[0] for x in rows[(load, "even")]) / \
            statistics.median(x[0] for x in rows[(load, "measured")])
        print(f"{label:28s} default / even: {ratio:.3f}x faster")
EOF
