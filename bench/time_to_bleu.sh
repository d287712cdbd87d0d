#!/usr/bin/env bash
# bench/time_to_bleu.sh: time to quality. Trains a Multi30k recipe for each wall-clock budget, averages
# its last 5 checkpoints, translates test 2016 (beam 4, alpha 0.6) and prints one table: budget,
# updates, the averaged model's sacreBLEU on test 2016, the last greedy validation BLEU and the minutes
# of training, under a header with the machine, its threads and its measured peaks (f32 FMA and bf16
# dot products: the fastest of 5 repetitions of gemm_bench's peak_* rows) and the kernels in use
# (TFM_CPU_ISA caps them: `tfm info --cpu`), since the same budget buys different updates on each
# machine.
#
#   bench/time_to_bleu.sh [--recipe CONFIG] [--budgets "5 15 60"] [--out DIR] [--set K=V ...]
#                         [--device cpu|cuda] [--mbr N]
#
#   --recipe   the recipe (default configs/multi30k-en-de.yaml, the main job's)
#   --budgets  training minutes, one run each (default "5 15 60")
#   --out      where the runs and the table go (default runs/time-to-bleu-<recipe name>); a budget
#              whose run folder already holds test_2016.bleu is not run again, only read
#   --set      a recipe override passed to tfm train (repeatable)
#   --device   where test 2016 is translated (default cpu; the recipe says where it trains); with a
#              GPU, the header names it (nvidia-smi)
#   --mbr N    also translate test 2016 by minimum Bayes risk over the n-best lists of beam N
#              (tfm translate -b N --n-best N --mbr, docs/DECODING.md), in a column of its own
#   BUILD      the build folder holding tfm and gemm_bench (default build/release)
# The data come from scripts/fetch_multi30k.sh (TFM_DATA_DIR or ../shared/data, else downloaded).
# Keep the machine quiet while it runs: every budget is wall-clock time.
set -euo pipefail
cd "$(dirname "$0")/.."
recipe=configs/multi30k-en-de.yaml budgets="5 15 60" out="" sets=() device=cpu mbr=""
die() { echo "time_to_bleu.sh: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --recipe) [ $# -ge 2 ] || die "--recipe needs a value"; recipe="$2"; shift ;;
    --budgets) [ $# -ge 2 ] || die "--budgets needs a value"; budgets="$2"; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a value"; out="$2"; shift ;;
    --set) [ $# -ge 2 ] || die "--set needs a value"; sets+=(--set "$2"); shift ;;
    --device) [ $# -ge 2 ] || die "--device needs a value"; device="$2"; shift ;;
    --mbr) [ $# -ge 2 ] || die "--mbr needs a value"; mbr="$2"; shift ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift
done
[ -f "$recipe" ] || die "no recipe $recipe"
[[ "$device" == cpu || "$device" == cuda ]] || die "--device must be cpu or cuda, got '$device'"
[[ -z "$mbr" || "$mbr" =~ ^[0-9]+$ && "$mbr" -ge 2 ]] || die "--mbr must be a beam of at least 2, got '$mbr'"
for b in $budgets; do [[ "$b" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "budget '$b' is not a number of minutes"; done
BUILD="${BUILD:-build/release}"
tfm="$BUILD/tfm"
[ -x "$tfm" ] || die "$tfm is missing; build it first (cmake --build --preset release)"
name="$(basename "$recipe" .yaml)"
out="${out:-runs/time-to-bleu-$name}"
mkdir -p "$out"
data="$(scripts/fetch_multi30k.sh)"
export TFM_DATA_DIR="$(dirname "$data")"
zcat "$data/test_2016_flickr.de.gz" >"$out/test_2016.ref.de"

# The machine's peaks, measured now: GFLOP/s of f32 FMA and of bf16 dot products on every thread,
# the fastest of 5 repetitions: a peak is the most the instructions can do, and one short sample on a
# shared VM can read far below it (docs/journal/2026-12-02-zen5-hour-ctranslate2.md).
peak() {  # peak f32|bf16
  [ -x "$BUILD/gemm_bench" ] || { echo "n/a (no $BUILD/gemm_bench)"; return; }
  local name rate
  name="$([[ $1 == f32 ]] && echo peak_fma || echo peak_dot_bf16)"
  # gemm_bench has no such row where its peak rows need AVX-512: nothing is printed, then "n/a".
  rate="$("$BUILD/gemm_bench" --benchmark_filter="^$name/" --benchmark_repetitions=5 \
    --benchmark_format=json 2>/dev/null | python3 bench/quiet_rounds.py peak "$1" || true)"
  if [[ -n "$rate" ]]; then printf '%.0f\n' "$rate"; else echo n/a; fi
}
cpu="$( (lscpu 2>/dev/null || true) | sed -n 's/^Model name: *//p' | head -1)"
# The kernels in use and what `precision auto` takes: two fields of `tfm info --cpu`, run once.
info="$("$tfm" info --cpu 2>/dev/null || true)"
cpu_info() { sed -n "s/^$1  *//p" <<<"$info"; }
{
  echo "# Time to BLEU: $recipe"
  echo
  echo "Machine: $cpu, $(nproc) threads; measured peak $(peak f32) GFLOP/s f32 FMA, $(peak bf16) GFLOP/s bf16 dot products."
  echo "Kernels: $(cpu_info 'in use'); training.precision auto on the CPU: $(cpu_info 'precision auto')."
  if command -v nvidia-smi >/dev/null; then
    # training.precision auto on a GPU: bf16 where it has bf16 tensor cores (the training log says).
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)."
  fi
  echo "Command: ${TFM_CPU_ISA:+TFM_CPU_ISA=$TFM_CPU_ISA }bench/time_to_bleu.sh --recipe $recipe --budgets \"$budgets\"${sets:+ ${sets[*]}} --device $device${mbr:+ --mbr $mbr}"
  echo
  echo "| budget (min) | updates | test 2016 BLEU (averaged, beam 4) |${mbr:+ the same by MBR (beam $mbr) |} last greedy valid BLEU | training (min) |"
  echo "|---|---|---|${mbr:+---|}---|---|"
} >"$out/table.md"

for budget in $budgets; do
  run="$out/${budget}min"
  if [ ! -f "$run/test_2016.bleu" ]; then
    echo "== time_to_bleu: $budget minutes -> $run" >&2
    resume=()
    [ -d "$run/checkpoints" ] && resume=(--resume)
    "$tfm" train -c "$recipe" --run-dir "$run" --max-minutes "$budget" "${sets[@]}" "${resume[@]}"
    "$tfm" average -c "$run/checkpoints" -n 5 -o "$run/averaged"
    "$tfm" translate -m "$run/averaged" -i "$data/test_2016_flickr.en.gz" -o "$run/test_2016.hyp.de" \
      --beam-size 4 --alpha 0.6 --device "$device"
    "$tfm" bleu -r "$out/test_2016.ref.de" -i "$run/test_2016.hyp.de" >"$run/test_2016.bleu"
  fi
  if [ -n "$mbr" ] && [ ! -f "$run/test_2016.mbr$mbr.bleu" ]; then
    "$tfm" translate -m "$run/averaged" -i "$data/test_2016_flickr.en.gz" \
      -o "$run/test_2016.mbr$mbr.hyp.de" --beam-size "$mbr" --n-best "$mbr" --mbr --alpha 0.6 \
      --device "$device"
    "$tfm" bleu -r "$out/test_2016.ref.de" -i "$run/test_2016.mbr$mbr.hyp.de" \
      >"$run/test_2016.mbr$mbr.bleu"
  fi
  python3 - "$run" "$budget" "$mbr" >>"$out/table.md" <<'EOF'
import json, re, sys
run, budget, mbr = sys.argv[1], sys.argv[2], sys.argv[3]
steps, valid_bleu, elapsed = 0, None, 0.0
with open(f"{run}/metrics.jsonl") as f:
    for line in f:
        r = json.loads(line)
        steps = max(steps, r.get("step", 0))
        elapsed = max(elapsed, r.get("elapsed_s", 0.0))
        if r.get("type") == "valid" and "bleu" in r:
            valid_bleu = r["bleu"]
def bleu_of(path):
    return re.search(r"[0-9]+\.[0-9]+", open(path).read()).group(0)
bleu = bleu_of(f"{run}/test_2016.bleu")
if mbr:
    bleu += " | " + bleu_of(f"{run}/test_2016.mbr{mbr}.bleu")
valid = f"{valid_bleu:.2f}" if valid_bleu is not None else "n/a"
print(f"| {budget} | {steps} | {bleu} | {valid} | {elapsed / 60:.1f} |")
EOF
done
cat "$out/table.md"
