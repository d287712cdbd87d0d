#!/usr/bin/env bash
# GPU benchmarks, tfm's CUDA backend beside PyTorch on the same GPU, in one command (issue 20): the GPU's
# measured bf16 matrix rate (the MFU's denominator), training steps of base and big on the paper's batch,
# decoding of base; JSON lines under --out and a markdown table at the end (bench/gpu_table.py).
#
# Usage: bench/gpu.sh --tfm-build DIR --out DIR [--parts peak,train,decode] [--presets base,big]
#                     [--decode-batches 32,128] [--budget-s 450]
#   --tfm-build  where tfm's bench_train_step and bench_decode are (a CUDA build, e.g. build/release)
#   --out        created; gets peak.jsonl, train.jsonl, decode.jsonl, a .log per run, table.md
#
#   e.g. on the GPU machine:  bench/gpu.sh --tfm-build build/release --out "$OUT/gpu"
#
# What runs (each part guarded: a failing or timed-out part is written down in failures.txt and the
# others go on; the exit status is 1 if any failed):
#   1. bench/matmul_peak.py: bf16 8192^3 products (3 warm-ups, 10 timed) and device copy bandwidth.
#   2. Per preset (base, big; vocab 37000): 782 rows of 32 source + 32 target tokens = 25024 + 25024
#      tokens, the paper's ~25000 + 25000 (no padding), 3 warm-up + 10 timed steps, bf16:
#      tfm's bench_train_step --device cuda --precision bf16, then PyTorch (bench/train_step_pytorch.py
#      --device cuda: bf16 autocast, flash attention through scaled_dot_product_attention, fused Adam)
#      with torch.compile; PyTorch eager runs last, if time is left (the table takes PyTorch's faster).
#   3. Decoding base (vocab 32000, 25 source tokens, exactly 25 output tokens, beam 4) for each batch of
#      --decode-batches, bf16 then f32: tfm's bench_decode --device cuda writes the random weights and
#      sources once per batch (--model-dir), PyTorch's bench/decode_pytorch.py --device cuda decodes the
#      same and counts identical outputs. If tfm's bench_decode wrote no model directory,
#      tools/random_model.py writes one so that PyTorch's rows are still measured.
# The parts run in order of importance within --budget-s seconds (default 450, so the whole stays inside
# 8 minutes on an H100 with the process starts and torch.compile's first compile); a part that would
# start with less than 20 s left is skipped and written down, and each command has its own timeout.
#
# Environment: PYTHON (default python3: on the GPU machine the one that has PyTorch), TRAIN_STEPS (10),
# TRAIN_WARMUP (3), TRAIN_BATCH (782), SRC_LEN / TGT_LEN (32), TRAIN_VOCAB (37000), DECODE_VOCAB (32000),
# DECODE_RUNS (3), DECODE_WARMUP (1), DECODE_PRECISIONS ("bf16 f32"), BEAM (4), MATMUL_SIZE (8192).
set -uo pipefail  # no -e: every part is guarded on its own
root="$(cd "$(dirname "$0")/.." && pwd)" || exit 1

tfm_build="" out="" parts="peak,train,decode" presets="base,big" decode_batches="32,128" budget=450
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tfm-build) tfm_build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --parts) parts="$2"; shift 2 ;;
    --presets) presets="$2"; shift 2 ;;
    --decode-batches) decode_batches="$2"; shift 2 ;;
    --budget-s) budget="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d'; exit 0 ;;
    *) echo "gpu.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$tfm_build" || -z "$out" ]]; then
  echo "gpu.sh: --tfm-build DIR and --out DIR are required (see --help)" >&2
  exit 2
fi
# Relative paths are the caller's; the scripts run from the project root.
tfm_build="$(realpath -m "$tfm_build")"
out="$(realpath -m "$out")"
cd "$root" || exit 1
PYTHON="${PYTHON:-python3}"
TRAIN_STEPS="${TRAIN_STEPS:-10}"
TRAIN_WARMUP="${TRAIN_WARMUP:-3}"
TRAIN_BATCH="${TRAIN_BATCH:-782}"
SRC_LEN="${SRC_LEN:-32}"
TGT_LEN="${TGT_LEN:-32}"
TRAIN_VOCAB="${TRAIN_VOCAB:-37000}"
DECODE_VOCAB="${DECODE_VOCAB:-32000}"
DECODE_RUNS="${DECODE_RUNS:-3}"
MATMUL_SIZE="${MATMUL_SIZE:-8192}"
DECODE_WARMUP="${DECODE_WARMUP:-1}"
DECODE_PRECISIONS="${DECODE_PRECISIONS:-bf16 f32}"
BEAM="${BEAM:-4}"
DECODE_SRC_LEN=25
DECODE_OUT_LEN=25

mkdir -p "$out"
: >"$out/failures.txt"
work="$out/work"  # decoding model directories (a few hundred MB): removed at the end
mkdir -p "$work"
start=$SECONDS
failed=0

has_part() { [[ ",$parts," == *",$1,"* ]]; }
left() { echo $((budget - (SECONDS - start))); }

# run NAME JSONL CAP_S CMD...: runs CMD with a timeout of min(CAP_S, time left), appends its JSON lines
# to JSONL, its whole output to NAME.log; a failure is noted and the script goes on.
run() {
  local name="$1" jsonl="$2" cap="$3"
  shift 3
  local remaining
  remaining=$(left)
  if ((remaining < 20)); then
    echo "== $name: skipped, ${remaining} s of the budget left" >&2
    echo "$name: skipped (budget)" >>"$out/failures.txt"
    failed=1
    return 1
  fi
  local limit=$((cap < remaining ? cap : remaining))
  echo "== $name (limit ${limit} s, $((SECONDS - start)) s in): $*" >&2
  local t0=$SECONDS rc
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.out" 2>"$out/$name.log"
  rc=$?
  grep '^{' "$out/$name.out" >>"$jsonl"
  cat "$out/$name.out" >>"$out/$name.log"
  rm -f "$out/$name.out"
  if ((rc != 0)); then
    local why="exit $rc"
    ((rc == 124 || rc == 137)) && why="timed out after ${limit} s"
    echo "== $name: FAILED ($why; last lines of $out/$name.log:)" >&2
    tail -n 5 "$out/$name.log" >&2
    echo "$name: $why" >>"$out/failures.txt"
    failed=1
    return 1
  fi
  echo "== $name: done in $((SECONDS - t0)) s" >&2
}

peak_tflops=""
if has_part peak; then
  run matmul_peak "$out/peak.jsonl" 90 \
    "$PYTHON" bench/matmul_peak.py --size "$MATMUL_SIZE" --warmup 3 --runs 10
  peak_tflops=$("$PYTHON" -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(rows[-1].get("bf16_tflops","") if rows else "")' "$out/peak.jsonl" 2>/dev/null)
fi
peak_args=()
[[ -n "$peak_tflops" ]] && peak_args=(--peak-tflops "$peak_tflops")

IFS=, read -r -a preset_list <<<"$presets"
IFS=, read -r -a batch_list <<<"$decode_batches"
shape=(--batch "$TRAIN_BATCH" --src-len "$SRC_LEN" --tgt-len "$TGT_LEN" --vocab "$TRAIN_VOCAB"
       --steps "$TRAIN_STEPS" --warmup "$TRAIN_WARMUP")

if has_part train; then
  for preset in "${preset_list[@]}"; do
    run "train_${preset}_tfm" "$out/train.jsonl" 150 \
      "$tfm_build/bench_train_step" --device cuda --precision bf16 --preset "$preset" "${shape[@]}"
    # torch.compile's first compile of forward + backward takes a minute or two on a fresh machine.
    run "train_${preset}_pytorch_compile" "$out/train.jsonl" 240 \
      "$PYTHON" bench/train_step_pytorch.py --device cuda --modes bf16 --compile --preset "$preset" \
      "${shape[@]}" "${peak_args[@]}"
  done
fi

if has_part decode; then
  for batch in "${batch_list[@]}"; do
    model_dir="$work/decode_b$batch"
    outputs=()
    for precision in $DECODE_PRECISIONS; do
      # The first run of a batch writes the weights and sources (fixed seeds: every run draws the same).
      model_args=()
      [[ -d "$model_dir" ]] || model_args=(--model-dir "$model_dir")
      run "decode_b${batch}_${precision}_tfm" "$out/decode.jsonl" 90 \
        "$tfm_build/bench_decode" --device cuda --precision "$precision" --preset base \
        --vocab "$DECODE_VOCAB" --batch "$batch" --src-len "$DECODE_SRC_LEN" --out-len "$DECODE_OUT_LEN" \
        --beams "$BEAM" --runs "$DECODE_RUNS" --warmup "$DECODE_WARMUP" "${model_args[@]}" \
        --outputs "$work/tfm_outputs_b${batch}_${precision}.json" &&
        outputs+=("$work/tfm_outputs_b${batch}_${precision}.json")
      if [[ ! -f "$model_dir/sources.safetensors" ]]; then
        echo "== decode batch $batch: tfm wrote no model directory; tools/random_model.py writes one" >&2
        rm -rf "$model_dir"
        run "decode_b${batch}_random_model" /dev/null 60 "$PYTHON" tools/random_model.py \
          --out "$model_dir" --preset base --vocab "$DECODE_VOCAB" --batch "$batch" \
          --src-len "$DECODE_SRC_LEN" --no-vocab-model
      fi
      [[ -f "$model_dir/sources.safetensors" ]] || continue
      run "decode_b${batch}_${precision}_pytorch" "$out/decode.jsonl" 90 \
        "$PYTHON" bench/decode_pytorch.py --device cuda --precision "$precision" --model-dir "$model_dir" \
        --beams "$BEAM" --out-len "$DECODE_OUT_LEN" --runs "$DECODE_RUNS" --warmup "$DECODE_WARMUP" \
        --tfm-outputs "${outputs[@]}"
    done
  done
fi

# PyTorch eager last: the table takes PyTorch's faster of eager and compiled, and compiled usually is.
if has_part train; then
  for preset in "${preset_list[@]}"; do
    run "train_${preset}_pytorch_eager" "$out/train.jsonl" 90 \
      "$PYTHON" bench/train_step_pytorch.py --device cuda --modes bf16 --preset "$preset" \
      "${shape[@]}" "${peak_args[@]}"
  done
fi
rm -rf "$work"

echo "== $((SECONDS - start)) s in all" >&2
"$PYTHON" bench/gpu_table.py "$out" | tee "$out/table.md"
if [[ -s "$out/failures.txt" ]]; then
  echo >&2
  echo "gpu.sh: failed or skipped parts ($out/failures.txt):" >&2
  cat "$out/failures.txt" >&2
fi
exit "$failed"
