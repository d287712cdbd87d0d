#!/usr/bin/env bash
# tfm beside CTranslate2 decoding the same base model on the CPU, f32 and int8 (issues 19 and 48), in
# one command: both read the same weights and sources, in interleaved rounds; their outputs are
# compared and a table of ratios is printed.
#
# Usage: bench/ctranslate2.sh [--ct2 BUILD_DIR] [--out DIR] [--preset base] [--vocab 32000]
#                             [--batch 32] [--src-len 25] [--out-len 25] [--beams 4,1] [--threads 2]
#                             [--rounds 3] [--runs 1] [--warmup 1] [--precisions "f32 int8"]
#                             [--ct2-isa ISA]
#   --ct2   CTranslate2 v4.8.1 built from its sources by scripts/build_ctranslate2.sh (its BUILD_DIR;
#           default $CT2_BUILD). Without it the script prints one line and exits with status 0.
#   --out   gets the model, tfm-*.jsonl, ct2-*.jsonl, the outputs, the logs and table.md (default: a
#           temporary folder)
#   --ct2-isa  CT2_FORCE_CPU_ISA for CTranslate2's own kernels. Default: AVX512 where the
#           CPU has AVX-512, else its own choice (which stops at AVX2 on every x86-64 CPU; its
#           AVX-512 kernels took 5-9% less time by the medians on a Zen 5: docs/BENCHMARKS.md);
#           "own": its own choice everywhere.
#
# What runs:
#   1. tfm's bench_decode writes a random model of the preset (--vocab) and --batch sources of
#      --src-len tokens (--model-dir).
#   2. bench/ct2_convert.py writes the same weights as a CTranslate2 model, float32 and int8 (its
#      converter's `--quantization int8`: per-row int8 weights and embeddings).
#   3. --rounds rounds, each: for each precision, tfm's bench_decode (the suite's decoding timer),
#      then bench/peer_decode.py --framework ctranslate2 (CTranslate2's Python module), each with
#      --warmup untimed and --runs timed decodes of the whole batch, --threads threads. Every
#      sentence decodes exactly --out-len tokens in both (end of sentence forbidden until then).
#      Before and after each round gemm_bench measures the machine's FMA peak
#      (bench/quiet_rounds.sh; skipped where the build has none).
#   4. The table (bench/peer_table.py): per mode, the medians over the rounds of each engine's mean
#      seconds a batch and of its best run, the ratios of those medians (CTranslate2's time /
#      tfm's: above 1 = tfm faster) and the rounds' ranges, and how many sentences have identical
#      outputs (last round). Then the instruction set CTranslate2 ran its own kernels with, the
#      quiet rounds (bench/quiet_rounds.py: the peak steady over the round and near the run's
#      best) and each ratio over them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

ct2="${CT2_BUILD:-}" out="" preset=base vocab=32000 batch=32 src_len=25 out_len=25 beams="4,1"
threads=2 rounds=3 runs=1 warmup=1 precisions="f32 int8" ct2_isa=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ct2) ct2="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    --vocab) vocab="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --src-len) src_len="$2"; shift 2 ;;
    --out-len) out_len="$2"; shift 2 ;;
    --beams) beams="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --precisions) precisions="$2"; shift 2 ;;
    --ct2-isa) ct2_isa="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d'; exit 0 ;;
    *) echo "ctranslate2.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
# tfm's precision -> the CTranslate2 model's weights (bench/ct2_convert.py --quantization).
declare -A CT2_QUANTIZATION=([f32]=float32 [int8]=int8)
for precision in $precisions; do
  [[ -n "${CT2_QUANTIZATION[$precision]:-}" ]] ||
    { echo "ctranslate2.sh: --precisions $precision has no CTranslate2 counterpart (f32, int8)" >&2; exit 2; }
done
cd "$root"
PYTHON="${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}"
# CTranslate2 present? Else one line and status 0.
source bench/ct2_present.sh
ct2_present ctranslate2.sh "$ct2"
# CTranslate2 at its best: its AVX-512 kernels where the CPU has them.
ct2_isa="$(ct2_force_isa "$ct2_isa")"
bench_decode="$root/build/release/bench_decode"
[[ -x "$bench_decode" ]] || { echo "ctranslate2.sh: $bench_decode is missing (cmake --build --preset release)" >&2; exit 1; }
# The converter reads safetensors with tools/read_safetensors.py: PyTorch's interpreter
# (scripts/setup.sh --with-torch).
"$PYTHON" -c "import numpy, torch" 2>/dev/null || { echo "ctranslate2.sh: $PYTHON has no numpy or torch (scripts/setup.sh --with-torch)" >&2; exit 1; }
out="$(realpath -m "${out:-$(mktemp -d)}")"
mkdir -p "$out"

# 1 and 2. The model, its sources, and the CTranslate2 models.
model="$out/model"
"$bench_decode" --preset "$preset" --vocab "$vocab" --batch "$batch" --src-len "$src_len" --out-len 1 \
  --beams 1 --runs 1 --warmup 0 --threads "$threads" --model-dir "$model" >/dev/null 2>>"$out/tfm.log"
"$PYTHON" bench/ct2_convert.py --model "$model" --sources-out "$out/sources.txt"
for precision in $precisions; do
  "$PYTHON" bench/ct2_convert.py --model "$model" --out "$out/ct2-model-$precision" \
    --quantization "${CT2_QUANTIZATION[$precision]}"
done

source bench/quiet_rounds.sh
: >"$out/peaks.txt"

# 3. Interleaved rounds.
for round in $(seq 1 "$rounds"); do
  peak_before="$(fma_peak)"
  for precision in $precisions; do
    echo "ctranslate2.sh: round $round, $precision" >&2
    "$bench_decode" --preset "$preset" --vocab "$vocab" --batch "$batch" --src-len "$src_len" \
      --out-len "$out_len" --beams "$beams" --runs "$runs" --warmup "$warmup" --threads "$threads" \
      --precision "$precision" --outputs "$out/tfm-$precision.json" \
      >>"$out/tfm-round$round.jsonl" 2>>"$out/tfm.log"
    CT2_VERBOSE=1 CT2_FORCE_CPU_ISA="$ct2_isa" "$PYTHON" bench/peer_decode.py --framework ctranslate2 --ct2 "$ct2" \
      --model "$out/ct2-model-$precision" --sources "$out/sources.txt" --precision "$precision" \
      --beams "$beams" --threads "$threads" --runs "$runs" --warmup "$warmup" --out-len "$out_len" \
      --label "$precision" --outputs "$out/ct2-$precision.json" \
      >>"$out/ct2-round$round.jsonl" 2>>"$out/ct2.log"
  done
  echo "$round $peak_before $(fma_peak)" >>"$out/peaks.txt"
done

# 4. The table.
"$PYTHON" bench/peer_table.py ctranslate2 "$out" "$rounds" "$precisions" | tee "$out/table.md"
