#!/usr/bin/env bash
# A converted OPUS-MT-sized model decoded by tfm and by CTranslate2, f32 and int8, in interleaved
# rounds (issue 45): the decoding speed of a model someone else trained, beside CTranslate2 on the
# same weights.
#
# Usage: bench/opus_mt_speed.sh [--ct2 BUILD_DIR] [--out DIR] [--size opus-mt|tiny] [--batch 32]
#                               [--src-len 25] [--out-len 25] [--beams 4,1] [--threads 2]
#                               [--rounds 5] [--runs 1] [--warmup 1] [--precisions "f32 int8"]
#                               [--ct2-from marian|tfm] [--ct2-isa ISA]
#   --ct2       CTranslate2 v4.8.1 built by scripts/build_ctranslate2.sh (its BUILD_DIR; default
#               $CT2_BUILD). Without it the script prints one line and exits with status 0.
#   --size      opus-mt (default): 6 + 6 layers, d_model 512, 8 heads, FFN 2048, vocabulary 58,100,
#               as Helsinki-NLP/opus-mt-en-de; tiny: a smoke run of the same steps (seconds).
#   --ct2-from  marian (default): CTranslate2's own OPUS-MT converter (converters/opus_mt.py, with
#               `quantization` int8 for int8), as a CTranslate2 user converts the download; tfm:
#               `tfm convert --to ctranslate2` of tfm's converted model (then the outputs must be
#               identical in f32; with CTranslate2's own converter they are not compared, as it
#               writes another position table: docs/CONVERTING.md).
#   --ct2-isa   CT2_FORCE_CPU_ISA for CTranslate2's own kernels. Default: AVX512 where the
#               CPU has AVX-512, else its own choice (which stops at AVX2 on every x86-64 CPU; its
#               AVX-512 kernels took 5-9% less time by the medians on a Zen 5: docs/BENCHMARKS.md);
#               "own": its own choice everywhere.
#   Environment: PYTHON (/usr/bin/python3), PYTHONPATH (build/release/python, tfm's module),
#   TFM (build/release/tfm).
#
# What runs:
#   1. tools/random_marian_model.py writes a Marian model folder of the size (random weights, an
#      OPUS-MT download's files) and --batch sources of --src-len tokens (</s> included).
#   2. `tfm convert --from marian` makes tfm's model; CTranslate2's models come from --ct2-from.
#   3. --rounds rounds, each: for each precision, tfm then CTranslate2, each in its own process
#      (bench/peer_decode.py: its Python module, the batch as token lists, --threads threads,
#      --warmup untimed and --runs timed decodes, every sentence exactly --out-len tokens).
#      Before and after each round gemm_bench measures the machine's FMA peak
#      (bench/quiet_rounds.sh; skipped where the build has none).
#   4. The table (bench/peer_table.py): per mode the medians over the rounds of each engine's mean
#      seconds a batch and of its best run, the ratios of those medians (CTranslate2's time /
#      tfm's: above 1 = tfm faster) and the rounds' ranges; then the instruction set CTranslate2
#      ran its own kernels with, the quiet rounds (bench/quiet_rounds.py: the peak steady over the
#      round and near the run's best) and each ratio over them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

ct2="${CT2_BUILD:-}" out="" size=opus-mt batch=32 src_len=25 out_len=25 beams="4,1" threads=2
rounds=5 runs=1 warmup=1 precisions="f32 int8" ct2_from=marian ct2_isa=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ct2) ct2="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --src-len) src_len="$2"; shift 2 ;;
    --out-len) out_len="$2"; shift 2 ;;
    --beams) beams="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --precisions) precisions="$2"; shift 2 ;;
    --ct2-from) ct2_from="$2"; shift 2 ;;
    --ct2-isa) ct2_isa="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d'; exit 0 ;;
    *) echo "opus_mt_speed.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$ct2_from" == marian || "$ct2_from" == tfm ]] ||
  { echo "opus_mt_speed.sh: --ct2-from $ct2_from: expected marian or tfm" >&2; exit 2; }
for precision in $precisions; do
  [[ "$precision" == f32 || "$precision" == int8 ]] ||
    { echo "opus_mt_speed.sh: --precisions $precision: expected f32 or int8" >&2; exit 2; }
done
cd "$root"
PYTHON="${PYTHON:-/usr/bin/python3}"
TFM="${TFM:-$root/build/release/tfm}"
export PYTHONPATH="${PYTHONPATH:-$root/build/release/python}"
# CTranslate2 present? Else one line and status 0.
source bench/ct2_present.sh
ct2_present opus_mt_speed.sh "$ct2"
# CTranslate2 at its best: its AVX-512 kernels where the CPU has them.
ct2_isa="$(ct2_force_isa "$ct2_isa")"
[[ -x "$TFM" ]] || { echo "opus_mt_speed.sh: $TFM is missing (cmake --build --preset release)" >&2; exit 1; }
"$PYTHON" -c "import tfm" 2>/dev/null ||
  { echo "opus_mt_speed.sh: cannot import tfm with PYTHONPATH=$PYTHONPATH" >&2; exit 1; }
out="$(realpath -m "${out:-$(mktemp -d)}")"
mkdir -p "$out"

# 1 and 2. The Marian model, its sources, tfm's and CTranslate2's models.
"$PYTHON" tools/random_marian_model.py --out "$out/marian" --size "$size" --sources "$batch" \
  --src-len "$src_len" --sources-out "$out/sources.txt"
"$TFM" convert --from marian -i "$out/marian" -o "$out/tfm-model" >/dev/null
for precision in $precisions; do
  target="$out/ct2-model-$precision"
  rm -rf "$target"
  if [[ $ct2_from == marian ]]; then
    "$PYTHON" -c 'import sys; sys.path.insert(0, "bench"); import ct2_common
ct2 = ct2_common.import_ctranslate2(sys.argv[1], "opus_mt_speed.sh")
ct2.converters.OpusMTConverter(sys.argv[2]).convert(sys.argv[3], quantization=sys.argv[4])' \
      "$ct2" "$out/marian" "$target" "$([[ $precision == f32 ]] && echo float32 || echo int8)"
  else
    "$TFM" convert --to ctranslate2 -m "$out/tfm-model" -o "$target" \
      --quantization "$([[ $precision == f32 ]] && echo float32 || echo int8)" >/dev/null
  fi
done

# 3. Interleaved rounds.
common=(--sources "$out/sources.txt" --beams "$beams" --threads "$threads" --runs "$runs"
        --warmup "$warmup" --out-len "$out_len" --ct2 "$ct2")
source bench/quiet_rounds.sh
: >"$out/peaks.txt"
for round in $(seq 1 "$rounds"); do
  peak_before="$(fma_peak)"
  for precision in $precisions; do
    echo "opus_mt_speed.sh: round $round, $precision" >&2
    "$PYTHON" bench/peer_decode.py --framework tfm --model "$out/tfm-model" --precision "$precision" \
      --label "$precision" --outputs "$out/tfm-$precision.json" "${common[@]}" \
      >>"$out/tfm-round$round.jsonl" 2>>"$out/tfm.log"
    CT2_VERBOSE=1 CT2_FORCE_CPU_ISA="$ct2_isa" "$PYTHON" bench/peer_decode.py --framework ctranslate2 --model "$out/ct2-model-$precision" \
      --precision "$precision" --label "$precision" --outputs "$out/ct2-$precision.json" \
      "${common[@]}" >>"$out/ct2-round$round.jsonl" 2>>"$out/ct2.log"
  done
  echo "$round $peak_before $(fma_peak)" >>"$out/peaks.txt"
done

# 4. The table.
"$PYTHON" bench/peer_table.py opus-mt "$out" "$rounds" "$ct2_from" "$size" "$threads" |
  tee "$out/table.md"
