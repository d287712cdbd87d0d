#!/usr/bin/env bash
# The Python module's overhead: tfm.Translator.translate_batch against `tfm translate` on the same
# sentences, model, beam, precision and threads (docs/PYTHON.md, "Overhead").
#
# Both translate the first SENTENCES lines of Multi30k's test 2016 English side (all 1000 by
# default) with MODEL. The CLI's time is its own count ("translated N sentences in S s": encoding,
# decoding, detokenizing and writing, without loading the model); Python's is the time of its
# translate_batch calls and of writing the output file, the model loaded beforehand. Python calls
# translate_batch on chunks of 512 sentences, as the CLI translates its input, so that both run
# exactly the same batches: the difference is what the bindings add (converting the sentences and
# results, releasing the GIL, a signal check after each batch). Runs alternate (CLI then Python,
# then Python then CLI, ...), RUNS of each, each in a fresh process; the outputs must be identical.
# Prints every run, the medians (min-max) and the ratio Python / CLI: of the medians, and the
# median (min-max) of the ratios of the runs paired in order. The same for each process's wall time
# (starting Python and importing tfm, or starting tfm; loading the model; translating; writing).
#
# Usage: bench/python_overhead.sh     (build first: cmake --preset release && cmake --build --preset release)
#   smoke run: SENTENCES=100 RUNS=2 bench/python_overhead.sh
# Environment overrides (defaults in parentheses): MODEL (/work/scale/runs/m30k-attn/averaged),
#   TFM_DATA_DIR (../shared/data), SOURCE (TFM_DATA_DIR/multi30k/test_2016_flickr.en.gz),
#   SENTENCES (1000), RUNS (5), BEAM (4), THREADS (2), PRECISION (f32), TFM (build/release/tfm),
#   PYTHON (/usr/bin/python3), PYTHONPATH (build/release/python), OUT (a temporary directory, removed).
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL="${MODEL:-/work/scale/runs/m30k-attn/averaged}"
TFM_DATA_DIR="${TFM_DATA_DIR:-../shared/data}"
SOURCE="${SOURCE:-$TFM_DATA_DIR/multi30k/test_2016_flickr.en.gz}"
SENTENCES="${SENTENCES:-1000}"
RUNS="${RUNS:-5}"
BEAM="${BEAM:-4}"
THREADS="${THREADS:-2}"
PRECISION="${PRECISION:-f32}"
TFM="${TFM:-build/release/tfm}"
PYTHON="${PYTHON:-/usr/bin/python3}"
export PYTHONPATH="${PYTHONPATH:-build/release/python}"

die() { echo "python_overhead.sh: $*" >&2; exit 1; }
[[ -x "$TFM" ]] || die "no $TFM: build the release preset first"
[[ -d "$MODEL" ]] || die "no model directory $MODEL (set MODEL)"
[[ -f "$SOURCE" ]] || die "no $SOURCE (set TFM_DATA_DIR or SOURCE)"
[[ "$RUNS" =~ ^[0-9]+$ && "$RUNS" -ge 1 ]] || die "RUNS: at least 1, not '$RUNS'"
"$PYTHON" -c "import tfm" 2>/dev/null || die "cannot import tfm with PYTHONPATH=$PYTHONPATH"

if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
else
  OUT="$(mktemp -d)"
  trap 'rm -rf "$OUT"' EXIT
fi
source_file="$OUT/source.en"
{ gzip -cdf "$SOURCE" || true; } | head -n "$SENTENCES" >"$source_file"
lines=$(wc -l <"$source_file")
[[ "$lines" -eq "$SENTENCES" ]] || die "$SOURCE has $lines lines, fewer than SENTENCES=$SENTENCES"
results="$OUT/results.jsonl"
: >"$results"

now() { date +%s.%N; }

run_cli() {  # run number
  local out="$OUT/cli.$1.de" log="$OUT/cli.$1.log" start
  start=$(now)
  "$TFM" translate -m "$MODEL" -i "$source_file" -o "$out" -b "$BEAM" --threads "$THREADS" \
    --precision "$PRECISION" 2>"$log"
  local seconds
  seconds=$(sed -n 's/^translated [0-9]* sentences in \([0-9.]*\) s.*/\1/p' "$log" | tail -1)
  [[ -n "$seconds" ]] || die "no time in $log"
  local wall
  wall=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
  echo "{\"side\": \"cli\", \"run\": $1, \"seconds\": $seconds, \"wall\": $wall}" | tee -a "$results"
}

run_python() {  # run number
  local start line wall
  start=$(now)
  line=$("$PYTHON" - "$MODEL" "$source_file" "$OUT/python.$1.de" "$BEAM" "$THREADS" "$PRECISION" "$1" \
    <<'PY'
import json
import sys
import time

import tfm

model, source, output, beam, threads, precision, run = sys.argv[1:]
translator = tfm.Translator(model, compute_type=precision, threads=int(threads))
with open(source, encoding="utf-8") as file:
    sentences = file.read().splitlines()
begin = time.perf_counter()
translations = []
for start in range(0, len(sentences), 512):  # tfm translate's chunks
    for result in translator.translate_batch(sentences[start:start + 512], beam_size=int(beam)):
        translations.append(result.hypotheses[0] if result.hypotheses else "")
with open(output, "w", encoding="utf-8") as file:
    file.write("".join(line + "\n" for line in translations))
seconds = time.perf_counter() - begin
print(json.dumps({"side": "python", "run": int(run), "seconds": round(seconds, 4)}))
PY
)
  wall=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
  echo "${line%\}}, \"wall\": $wall}" | tee -a "$results"
}

echo "== $SENTENCES sentences of $SOURCE, $MODEL, beam $BEAM, $THREADS threads, $PRECISION" >&2
for run in $(seq 1 "$RUNS"); do
  if (( run % 2 )); then run_cli "$run"; run_python "$run"; else run_python "$run"; run_cli "$run"; fi
  cmp -s "$OUT/cli.$run.de" "$OUT/python.$run.de" ||
    die "run $run: the translations differ ($OUT/cli.$run.de, $OUT/python.$run.de; set OUT to keep them)"
done

"$PYTHON" - "$results" "$SENTENCES" <<'PY'
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
sentences = int(sys.argv[2])
for key, what in (("seconds", "translating (each side's own count)"),
                  ("wall", "the whole process (start, load, translate, write)")):
    times = {side: [r[key] for r in rows if r["side"] == side] for side in ("cli", "python")}
    print()
    print(f"{what}:")
    print(f"{'side':<7} {'runs (s)':<40} {'median s':>9} {'min-max':>15} {'sent/s':>7}")
    for side, values in times.items():
        median = statistics.median(values)
        runs = " ".join(f"{v:.3f}" for v in values)
        print(f"{side:<7} {runs:<40} {median:>9.3f} {min(values):>7.3f}-{max(values):<7.3f} "
              f"{sentences / median:>7.1f}")
    ratios = [p / c for p, c in zip(times["python"], times["cli"])]
    medians = statistics.median(times["python"]) / statistics.median(times["cli"])
    print(f"python / cli: of the medians {medians:.3f}; per run median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
print()
print("translations identical in every run")
PY
