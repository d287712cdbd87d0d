#!/usr/bin/env bash
# A converted OPUS-MT-sized model decoded by tfm and by CTranslate2, f32 and int8, in interleaved
# rounds (issue 45): the decoding speed of a model someone else trained, beside CTranslate2 on the
# same weights.
#
# Usage: bench/opus_mt_speed.sh [--ct2 BUILD_DIR] [--out DIR] [--size opus-mt|tiny] [--batch 32]
#                               [--src-len 25] [--out-len 25] [--beams 4,1] [--threads 2]
#                               [--rounds 5] [--runs 1] [--warmup 1] [--precisions "f32 int8"]
#                               [--ct2-from marian|tfm]
#   --ct2       CTranslate2 v4.8.1 built by scripts/build_ctranslate2.sh (its BUILD_DIR; default
#               $CT2_BUILD). Without it the script prints one line and exits with status 0.
#   --size      opus-mt (default): 6 + 6 layers, d_model 512, 8 heads, FFN 2048, vocabulary 58,100,
#               as Helsinki-NLP/opus-mt-en-de; tiny: a smoke run of the same steps (seconds).
#   --ct2-from  marian (default): CTranslate2's own OPUS-MT converter (converters/opus_mt.py, with
#               `quantization` int8 for int8), as a CTranslate2 user converts the download; tfm:
#               `tfm convert --to ctranslate2` of tfm's converted model (then the outputs must be
#               identical in f32; with CTranslate2's own converter they are not compared, as it
#               writes another position table: docs/CONVERTING.md).
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
#   4. The table: per mode the median over the rounds of each one's mean seconds a batch, the ratio
#      of the medians (CTranslate2's time / tfm's: above 1 = tfm faster) and the rounds' range; then
#      the quiet rounds (bench/quiet_rounds.py: the peak steady over the round and near the run's
#      best) and each mode's range of ratios over them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

ct2="${CT2_BUILD:-}" out="" size=opus-mt batch=32 src_len=25 out_len=25 beams="4,1" threads=2
rounds=5 runs=1 warmup=1 precisions="f32 int8" ct2_from=marian
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
    "$PYTHON" bench/peer_decode.py --framework ctranslate2 --model "$out/ct2-model-$precision" \
      --precision "$precision" --label "$precision" --outputs "$out/ct2-$precision.json" \
      "${common[@]}" >>"$out/ct2-round$round.jsonl" 2>>"$out/ct2.log"
  done
  echo "$round $peak_before $(fma_peak)" >>"$out/peaks.txt"
done

# 4. The table.
"$PYTHON" - "$out" "$rounds" "$ct2_from" "$size" "$threads" <<'EOF' | tee "$out/table.md"
import json, os, statistics, sys
out, rounds, ct2_from, size, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def rows(path):
    return {r["mode"]: r for r in (json.loads(l) for l in open(path) if l.startswith("{"))}
tfm = [rows(os.path.join(out, f"tfm-round{i}.jsonl")) for i in range(1, rounds + 1)]
ct2 = [rows(os.path.join(out, f"ct2-round{i}.jsonl")) for i in range(1, rounds + 1)]
first = next(iter(tfm[0].values()))
print(f"{size} model, batch {first['batch']}, {threads} threads, CTranslate2's model from "
      f"{'its own OPUS-MT converter' if ct2_from == 'marian' else 'tfm convert --to ctranslate2'}, "
      f"median of {rounds} interleaved rounds")
print()
print("| mode | tfm s a batch | CTranslate2 s a batch | CTranslate2 / tfm time | rounds' range "
      "| same outputs |")
print("|---|---:|---:|---:|---:|---:|")
ratios_by_mode = {}
for mode in tfm[0]:
    t = [r[mode]["seconds"] for r in tfm]
    c = [r[mode]["seconds"] for r in ct2]
    ratios = [b / a for a, b in zip(t, c)]
    precision = mode.rsplit("-", 1)[1]
    same = "not compared (another position table)"
    if ct2_from == "tfm":
        a = json.load(open(os.path.join(out, f"tfm-{precision}.json")))[mode]
        b = json.load(open(os.path.join(out, f"ct2-{precision}.json")))[mode]
        same = f"{sum(x == y for x, y in zip(a, b))} of {len(a)}"
    print(f"| {mode} | {statistics.median(t):.3f} | {statistics.median(c):.3f} | "
          f"**{statistics.median(c) / statistics.median(t):.2f}x** | "
          f"{min(ratios):.2f}-{max(ratios):.2f}x | {same} |")
    ratios_by_mode[mode] = ratios
sys.path.insert(0, "bench")
import quiet_rounds
print("\n".join(quiet_rounds.report(os.path.join(out, "peaks.txt"), rounds, ratios_by_mode)))
EOF
