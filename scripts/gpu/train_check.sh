#!/usr/bin/env bash
# One prepared check of GPU training on a lent GPU machine, run under scripts/gpu/run.sh (which
# unpacks the bundle once and sets the loader's paths):
#
#   scripts/gpu/run.sh scripts/gpu/train_check.sh OUT [tests,steps,pytorch,ncu,gputests,multi30k,decode]
#
#   tests    the GPU tests of training (fused attention, the attention ops, the model, updates)
#   gputests every test of the suite that runs on the GPU or on its bf16 and int8 paths (OUT/gputests.txt)
#   probe    bench_train_step on the Multi30k GPU recipe's model (bf16, 16 + 16 tokens a sentence),
#            batches of 4096 to 32768 tokens: how a step's time grows with the batch (OUT/probe.md)
#   multi30k bench/time_to_bleu.sh with configs/multi30k-en-de-gpu.yaml (3 minutes, MULTI30K_BUDGETS),
#            test 2016 translated on the GPU; the data from TFM_DATA_DIR (default .gpu/data, which
#            bundle.sh fills); OUT/multi30k.md: the table and the validation curve against wall-clock
#            time; OUT/metrics.jsonl: the run's metrics
#   dist     (a bundle of bundle.sh --mpi: TFM_GPU_BUILD=build/gpu-mpi) the tests of data-parallel
#            training with the GPU ones, tfm_dist_tests on 2 ranks, and bench_train_dist: base bf16
#            on the one GPU as 1 process with 782 x (32 + 32) and as 2 ranks with 391 x (32 + 32) each
#            (OUT/dist.txt, OUT/dist.md)
#   decode   bench/gpu.sh --parts decode: base, beam 4, bf16, batches 1, 32 and 128 (DECODE_BATCHES),
#            tfm beside PyTorch (OUT/decode.md)
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
  python3 scripts/gpu/steps_table.py "$out/steps.txt" | tee "$out/steps.md"
fi

if has pytorch; then
  bench/gpu.sh --tfm-build "$build" --out "$out/gpu" --parts peak,train --presets base,big \
    --budget-s "${PYTORCH_BUDGET_S:-260}" >"$out/pytorch.txt" 2>&1
  cat "$out/gpu/table.md" 2>/dev/null | tee -a "$out/pytorch.txt"
fi

if has probe; then
  for batch in ${PROBE_BATCHES:-256 512 1024 2048}; do
    echo "== multi30k-en-de-gpu model, $batch x (16 + 16)" >>"$out/probe.txt"
    TFM_DATA_DIR=/data timeout 60 "$build/bench_train_step" --device cuda --precision bf16 \
      --recipe configs/multi30k-en-de-gpu.yaml --vocab 8000 --batch "$batch" --src-len 16 \
      --tgt-len 16 --steps 50 --warmup 5 2>>"$out/probe.log" | grep '^{' >>"$out/probe.txt"
  done
  python3 scripts/gpu/steps_table.py "$out/probe.txt" | tee "$out/probe.md"
fi

if has multi30k; then
  run="/tmp/multi30k-gpu"
  BUILD="$build" TFM_DATA_DIR="${TFM_DATA_DIR:-$PWD/.gpu/data}" timeout "${MULTI30K_LIMIT_S:-420}" \
    bench/time_to_bleu.sh --recipe configs/multi30k-en-de-gpu.yaml \
    --budgets "${MULTI30K_BUDGETS:-3}" --out "$run" --device cuda >"$out/multi30k.log" 2>&1
  echo "multi30k: exit $?" >>"$out/multi30k.log"
  for b in ${MULTI30K_BUDGETS:-3}; do
    python3 scripts/gpu/curve.py "$run/${b}min/metrics.jsonl" >>"$run/table.md" 2>&1
    cp "$run/${b}min/metrics.jsonl" "$out/metrics-${b}min.jsonl"
  done
  cp "$run/table.md" "$out/multi30k.md"
  tail -n 40 "$out/multi30k.md"
fi

if has decode; then
  DECODE_PRECISIONS="${DECODE_PRECISIONS:-bf16}" bench/gpu.sh --tfm-build "$build" --out /tmp/gpu-decode \
    --parts decode --presets base --decode-batches "${DECODE_BATCHES:-1,32,128}" \
    --budget-s "${DECODE_BUDGET_S:-200}" >"$out/decode.log" 2>&1
  cp /tmp/gpu-decode/decode.jsonl "$out/decode.jsonl" 2>/dev/null
  cat /tmp/gpu-decode/table.md 2>/dev/null | tee "$out/decode.md"
fi

if has dist; then
  timeout "${DIST_LIMIT_S:-300}" "$build/tfm_tests" --gtest_brief=1 \
    --gtest_filter='CliTrainDistributed.*:CudaGradientBuckets.*:*Nccl*:GradientBuckets.*:TrainingSession.*:CudaTrainingSession.*' \
    >"$out/dist.txt" 2>&1
  echo "dist tests: exit $?" | tee -a "$out/dist.txt"
  timeout 60 mpirun --oversubscribe -np 2 "$build/tfm_dist_tests" --gtest_brief=1 >>"$out/dist.txt" 2>&1
  echo "tfm_dist_tests on 2 ranks: exit $?" | tee -a "$out/dist.txt"
  for ranks in 1 2; do
    OMP_NUM_THREADS=4 timeout 120 mpirun --oversubscribe -np "$ranks" "$build/bench_train_dist" \
      --device cuda --precision bf16 --preset base --batch $((782 / ranks)) --src-len 32 \
      --tgt-len 32 --steps 10 --warmup 3 --threads 4 --bucket-mb 25 2>>"$out/dist.txt" |
      grep '^{' >>"$out/dist.jsonl"
  done
  python3 - "$out/dist.jsonl" <<'PY' | tee "$out/dist.md"
import json, sys
print("| ranks | batch a rank | ms/update (min-max) | tokens/s | all-reduce MB | exposed ms | alone ms | hidden |")
print("|---:|---:|---|---:|---:|---:|---:|---:|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['ranks']} | {r['batch']} | {1e3 * r['seconds_per_step']:.1f} ({1e3 * r['seconds_per_step_min']:.1f}-"
          f"{1e3 * r['seconds_per_step_max']:.1f}) | {r['tokens_per_second']:,.0f} | {r['allreduce_bytes'] / 1e6:.1f} | "
          f"{1e3 * r['allreduce_exposed_s']:.1f} | {1e3 * r['allreduce_standalone_s']:.1f} | {r['hidden_fraction']:.2f} |")
PY
fi

if has gputests; then
  timeout "${GPUTESTS_LIMIT_S:-300}" "$build/tfm_tests" --gtest_brief=1 \
    --gtest_filter='Cuda*:*Cuda*:*/cuda:*Gpu*:*Bf16*:*Int8*:*Quantiz*:Dispatch*:RecipeBatchSize*:CliTranslateInput.OutputErrors*' \
    >"$out/gputests.txt" 2>&1
  echo "gputests: exit $?" | tee -a "$out/gputests.txt"
  tail -n 3 "$out/gputests.txt"
fi

if has ncu; then
  timeout "${NCU_LIMIT_S:-150}" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    "$build/bench_train_step" --device cuda --precision bf16 --preset big "${shape[@]}" \
    --steps 1 --warmup 0 >"$out/ncu.csv" 2>"$out/ncu.log"
  echo "ncu: exit $?" >>"$out/ncu.log"
  python3 scripts/gpu/ncu_summary.py "$out/ncu.csv" >"$out/ncu.txt" 2>&1
  cat "$out/ncu.txt"
fi
