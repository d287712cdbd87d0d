#!/usr/bin/env bash
# One prepared check of GPU training on a lent GPU machine, run under scripts/gpu/run.sh (which
# unpacks the bundle once and sets the loader's paths):
#
#   scripts/gpu/run.sh scripts/gpu/train_check.sh OUT [tests,steps,pytorch,ncu]
#
#   tests    the GPU tests of training (fused attention, the attention ops, the model, updates)
#   steps    bench_train_step, bf16, vocab 37000, ~25000 + 25000 tokens a batch: base and big at
#            782 x (32 + 32), base at 196 x (128 + 128), each with the fused attention on and off
#            (TFM_CUDA_FUSED_ATTENTION=0); a table in OUT/steps.md
#   pytorch  bench/gpu.sh --parts peak,train: the matrix rate, then tfm and PyTorch compiled, base
#            and big, one table (OUT/gpu/table.md)
#   ncu      the kernel times of one big step (ncu, gpu__time_duration.sum), summed by kernel
#
# Each part has its own time limit and writes OUT/<part>.txt; a failing part does not stop the rest.
set -uo pipefail
out="${1:?train_check.sh: OUT folder}"
parts="${2:-tests,steps}"
build="${TFM_GPU_BUILD:-build/gpu}"
mkdir -p "$out"
has() { [[ ",$parts," == *",$1,"* ]]; }
shape=(--batch 782 --src-len 32 --tgt-len 32 --vocab 37000)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$out/gpu.txt" 2>&1

if has tests; then
  timeout 240 "$build/tfm_tests" --gtest_brief=1 \
    --gtest_filter='CudaFusedAttention*:FusedAttention*:CudaAutocast*:*BackendOpsAttention*:CudaTrainingSession*:CudaReferenceModel*:CudaTranslate*:*Bf16Copies*:*ReluBackwardBf16*:*BackendOpsCrossEntropy*' \
    >"$out/tests.txt" 2>&1
  echo "tests: exit $?" | tee -a "$out/tests.txt"
fi

if has steps; then
  # preset:length:fused; the batch keeps ~25000 + 25000 tokens (782 x 32, 196 x 128).
  for run in ${STEP_RUNS:-base:32:1 base:32:0 big:32:1 big:32:0 base:128:1 base:128:0}; do
    IFS=: read -r preset len fused <<<"$run"
    echo "== $preset, $((25024 / len)) x ($len + $len), fused attention $fused" >>"$out/steps.txt"
    TFM_CUDA_FUSED_ATTENTION="$fused" timeout 120 "$build/bench_train_step" --device cuda \
      --precision bf16 --preset "$preset" --batch $((25024 / len)) --src-len "$len" \
      --tgt-len "$len" --vocab 37000 --steps 10 --warmup 3 2>>"$out/steps.log" |
      grep '^{' >>"$out/steps.txt"
    echo "exit ${PIPESTATUS[0]}" >>"$out/steps.txt"
  done
  python3 - "$out/steps.txt" <<'PY' | tee "$out/steps.md"
import json, sys
print("| run | ms/step | forward ms | backward ms | tokens/s | peak GPU MB |")
print("|---|---:|---:|---:|---:|---:|")
label = ""
for line in open(sys.argv[1]):
    if line.startswith("=="):
        label = line[3:].strip()
    elif line.startswith("{"):
        r = json.loads(line)
        print(f"| {label} | {1e3 * r['seconds_per_step']:.1f} | {1e3 * r['forward_s']:.1f} | "
              f"{1e3 * r['backward_s']:.1f} | {r['tokens_per_second']:,.0f} | {r['peak_device_mb']:,.0f} |")
PY
fi

if has pytorch; then
  bench/gpu.sh --tfm-build "$build" --out "$out/gpu" --parts peak,train --presets base,big \
    --budget-s "${PYTORCH_BUDGET_S:-260}" >"$out/pytorch.txt" 2>&1
  cat "$out/gpu/table.md" 2>/dev/null | tee -a "$out/pytorch.txt"
fi

if has ncu; then
  timeout "${NCU_LIMIT_S:-150}" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    "$build/bench_train_step" --device cuda --precision bf16 --preset big "${shape[@]}" \
    --steps 1 --warmup 0 >"$out/ncu.csv" 2>"$out/ncu.log"
  echo "ncu: exit $?" >>"$out/ncu.log"
  python3 scripts/gpu/ncu_summary.py "$out/ncu.csv" >"$out/ncu.txt" 2>&1
  cat "$out/ncu.txt"
fi
