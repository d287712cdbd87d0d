#!/usr/bin/env bash
# On a lent machine, with a bundle from `scripts/gpu/bundle.sh --cpu-arch ARCH` and through run.sh
# (which unpacks it and sets the loader's path): tests and measures the CPU kernels that this
# project's own machine cannot run (AVX512-BF16, VNNI), on that machine's CPU, in this order:
#   1. the kernels' tests with oneDNN on its best ISA (AMX on a Xeon that has it) and held to
#      AVX512-BF16 (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16: vdpbf16ps, as on a CPU without AMX, where
#      cpu::gemm can take our bf16 kernel);
#   2. gemm_bench on 2 threads pinned to two cores: the FMA, vdpbf16ps and vpdpbusd peaks, and
#      training's bf16 products through our kernel and through oneDNN held to AVX512-BF16;
#   3. a base bf16 training step (4096 + 4096 tokens, 2 threads), oneDNN held to AVX512-BF16, with
#      TFM_CPU_GEMM=ours (our bf16 kernel) and TFM_CPU_GEMM=onednn, alternating, two rounds;
#   4. the int8 products of few rows through our panel kernel (vpdpbusd) and through oneDNN held
#      to AVX512-VNNI;
#   5. the whole suite in 4 shards; 6. training's f32 products of 4096 rows (ours, oneDNN).
# Writes logs and JSON under OUT. Usage: scripts/gpu/run.sh scripts/gpu/cpu_check.sh OUT
set -uo pipefail  # no -e: every part runs and says how it ended
out="${1:?usage: cpu_check.sh OUT}"
mkdir -p "$out"
cd "$(dirname "$0")/../.."
build="$(xz -dc .gpu/bundle.tar.xz | tar -xOf - ./build-dir)"
lscpu >"$out/cpu.txt" 2>&1
# Two CPUs on distinct physical cores (not two hyperthreads of one).
cpus="$(for c in /sys/devices/system/cpu/cpu[0-9]*; do
  echo "$(cat "$c/topology/physical_package_id")-$(cat "$c/topology/core_id") ${c##*cpu}"
done | sort -u -k1,1 | sort -n -k2 | head -2 | awk '{print $2}' | paste -sd,)"
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c "$cpus"); fi
echo "benchmarks pinned to CPUs $cpus: ${pin[*]:-no taskset, not pinned}" | tee -a "$out/cpu.txt"

kernels='BlockedGemm*:PanelMatmul*:PanelInt8*:Int8*:Bf16*:TrainingSession.Bf16*'
OMP_NUM_THREADS=2 "$build/tfm_tests" --gtest_filter="$kernels" >"$out/kernels_best_isa.log" 2>&1
echo "kernel tests, oneDNN's best ISA: exit $?"
grep -E '^\[  (PASSED|FAILED|SKIPPED) \]' "$out/kernels_best_isa.log" | sort -u | head -20
ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 OMP_NUM_THREADS=2 "$build/tfm_tests" --gtest_filter="$kernels" \
  >"$out/kernels_avx512_bf16.log" 2>&1
echo "kernel tests, oneDNN held to AVX512_CORE_BF16: exit $?"
grep -E '^\[  (PASSED|FAILED|SKIPPED) \]' "$out/kernels_avx512_bf16.log" | sort -u | head -20
bench() {  # name, oneDNN's ISA, filter
  ONEDNN_MAX_CPU_ISA="$2" "${pin[@]}" "$build/gemm_bench" --benchmark_filter="$3" \
    --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_format=json >"$out/$1.json" 2>"$out/$1.log"
  echo "gemm_bench $1: exit $?"
}
bench products_bf16 AVX512_CORE_BF16 'peak_fma|peak_dot_bf16|peak_dot_int8|training_product_bf16'

for round in 1 2; do
  for gemm in ours onednn; do
    ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 TFM_CPU_GEMM="$gemm" "${pin[@]}" \
      "$build/bench_train_step" --preset base --precision bf16 --batch 128 --src-len 32 \
      --tgt-len 32 --steps 2 --warmup 1 --threads 2 >"$out/step_${gemm}_$round.log" 2>&1
    echo "train step $gemm round $round: exit $? $(tail -1 "$out/step_${gemm}_$round.log" |
      python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["seconds_per_step"], "s/step,", r["gemm_gflops_per_second"], "GFLOP/s in products")' 2>&1)"
  done
done

bench products_int8 AVX512_CORE_VNNI 'packed_product_i8'
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=4 "$build/tfm_tests" \
    >"$out/suite_$i.log" 2>&1 &
done
wait
for i in 0 1 2 3; do grep -E '^\[  (PASSED|FAILED) |tests ran' "$out/suite_$i.log" | tr '\n' ' '; echo; done
grep -h '^\[  FAILED  \] [A-Z]' "$out"/suite_*.log | sort -u

bench products_f32 AVX512_CORE_BF16 'training_product_f32/M:4096'
