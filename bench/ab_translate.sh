#!/usr/bin/env bash
# A/B timing of two tfm builds on the same translation: `tfm translate` of each binary in turn, ROUNDS
# times (A B A B ...), so that both see the same machine noise; prints each wall time, the median per
# binary and its spread (max/min - 1), the ratio B/A of the medians, and whether the outputs are
# identical. Use it for a change that must not cost speed (e.g. a kernel's cache).
#
# Usage: bench/ab_translate.sh TFM_A TFM_B MODEL_DIR SOURCE_FILE [extra translate flags...]
# Environment: ROUNDS (3), LINES (all lines of SOURCE_FILE; plain or .gz), THREADS (2), OUT (/tmp/ab-translate).
# Example: bench/ab_translate.sh /tmp/tfm_before build/release/tfm /work/scale/runs/m30k-attn/averaged \
#            ../shared/data/multi30k/test_2016_flickr.en.gz -b 4
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
a="$1" b="$2" model="$3" source="$4"
shift 4
ROUNDS="${ROUNDS:-3}" THREADS="${THREADS:-2}" OUT="${OUT:-/tmp/ab-translate}"
for f in "$a" "$b"; do [ -x "$f" ] || { echo "ab_translate: $f is not an executable" >&2; exit 2; }; done
[ -d "$model" ] || { echo "ab_translate: no model directory $model" >&2; exit 2; }
[ -f "$source" ] || { echo "ab_translate: no source file $source" >&2; exit 2; }
mkdir -p "$OUT"
if [[ "$source" == *.gz ]]; then zcat "$source"; else cat "$source"; fi > "$OUT/all.txt"
if [ -n "${LINES:-}" ]; then head -n "$LINES" "$OUT/all.txt"; else cat "$OUT/all.txt"; fi > "$OUT/src.txt"
echo "ab_translate: $(wc -l < "$OUT/src.txt") sentences, model $model, flags: --threads $THREADS $*"
declare -A times=([A]="" [B]="")
for round in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    bin="$a"; [ "$side" = B ] && bin="$b"
    start=$(date +%s.%N)
    "$bin" translate -m "$model" -i "$OUT/src.txt" -o "$OUT/out.$side.txt" --threads "$THREADS" "$@" \
      2> "$OUT/log.$side.txt" || { cat "$OUT/log.$side.txt" >&2; exit 1; }
    t=$(echo "$(date +%s.%N) - $start" | bc -l)
    times[$side]+="$t "
    printf 'round %d %s %.2f s\n' "$round" "$side" "$t"
  done
done
python3 - "${times[A]}" "${times[B]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
for name, t in (("A", a), ("B", b)):
    print(f"{name}: median {statistics.median(t):.2f} s, spread {max(t) / min(t) - 1:.1%} over {len(t)} runs")
print(f"B/A (medians): {statistics.median(b) / statistics.median(a):.3f}")
PY
if cmp -s "$OUT/out.A.txt" "$OUT/out.B.txt"; then echo "outputs: identical"; else echo "outputs: DIFFER"; fi
