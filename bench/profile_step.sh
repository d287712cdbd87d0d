#!/usr/bin/env bash
# Where a training step's time goes, by part: runs bench_train_step under `perf record` (cpu-clock
# samples, so it works in a VM without hardware counters), leaving out the start (the CUDA libraries'
# loading, the weights' initialisation, the warm-up steps), and prints the calling thread's and
# another thread's samples by part (bench/profile_step.py): the products, OpenMP's waiting, the
# kernel, the C library and each of tfm's functions. The calling thread's shares are shares of the
# step's wall time. Before that, the products by kind (bench_train_step --gemm-shapes), the slowest
# first. perf's sampling slows the step a little; the step's own figures come from the same run.
#
# Usage: bench/profile_step.sh [bench_train_step options]
#   default: the main job's model on a batch like its own: --recipe configs/multi30k-en-de.yaml
#            --precision bf16 --batch 64 --src-len 16 --tgt-len 16
# Environment: BUILD (build/release), STEPS (300), DELAY_MS (3000: the start left out), OUT (a folder
# for perf.data; default a temporary one). Needs perf (Debian: apt-get install linux-perf); a recipe
# needs TFM_DATA_DIR set.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD="${BUILD:-build/release}"
STEPS="${STEPS:-300}"
DELAY_MS="${DELAY_MS:-3000}"
die() { echo "profile_step.sh: $*" >&2; exit 1; }
command -v perf > /dev/null || die "needs perf (apt-get install linux-perf)"
[ -x "$BUILD/bench_train_step" ] || die "$BUILD/bench_train_step is missing (build it first)"
if [ $# -eq 0 ]; then
  set -- --recipe configs/multi30k-en-de.yaml --precision bf16 --batch 64 --src-len 16 --tgt-len 16
fi
if [ -n "${OUT:-}" ]; then
  out="$OUT"
  mkdir -p "$out"
else
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT  # perf.data runs to tens of MB
fi

perf record -q -e cpu-clock -F 2000 -D "$DELAY_MS" -o "$out/perf.data" \
  "$BUILD/bench_train_step" "$@" --steps "$STEPS" --warmup 3 --gemm-shapes > "$out/step.json" \
  2> "$out/step.err" ||
  { echo "profile_step.sh: bench_train_step failed:" >&2; tail -n 5 "$out/step.err" >&2; exit 1; }
python3 - "$out/step.json" << 'EOF'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(f"step {d['seconds_per_step']:.4f} s, products {d['gemm_seconds_per_step']:.4f} s "
      f"({d['gemm_gflops_per_second']:.0f} GFLOP/s), outside the products "
      f"{100 * d['outside_gemm_fraction']:.1f}%; forward {d['forward_s']:.4f} s, backward "
      f"{d['backward_s']:.4f} s, update {d['update_s']:.4f} s")
print("the products by kind (M x N x K, a batch of matrices, a and b transposed or not, += c), a step:")
for kind in d["gemm_shapes"][:12]:
    share = 100 * kind["seconds_per_step"] / d["seconds_per_step"]
    print(f"  {share:5.1f}% of the step  {kind['seconds_per_step'] * 1e3:7.3f} ms  "
          f"{kind['calls_per_step']:5.1f} calls  {kind['gflops_per_second']:6.1f} GFLOP/s  "
          f"{kind['shape']}")
EOF
perf script -F pid,tid,ip,sym,dso -i "$out/perf.data" 2> /dev/null | python3 bench/profile_step.py
