#!/usr/bin/env bash
# tfm beside a competing busy process (issue 19's "steady under contention"): `tfm translate` alone,
# then while one single-threaded busy loop runs, for each OpenMP wait policy in POLICIES; prints the
# wall times (median of ROUNDS) and loaded / alone. A program that keeps its speed would lose at
# most its share of the cores (about 2x on 2 cores); spinning OpenMP threads that wait for a
# descheduled partner at every barrier lose far more.
#
# Usage: bench/contention.sh MODEL_DIR SOURCE_FILE [extra translate flags...]
#        bench/contention.sh --command PROGRAM [ARGS...]   (any command instead, e.g. a training step:
#          build/release/bench_train_step --recipe configs/multi30k-en-de-d256.yaml --steps 3,
#          with TFM_DATA_DIR set, which the recipe's data paths name)
# Environment: TFM (build/release/tfm), ROUNDS (3), LINES (all; plain or .gz source), THREADS (2),
#   POLICIES (space-separated env settings; "tfm" = tfm's own default, nothing set),
#   OUT (/tmp/contention).
# Example: bench/contention.sh /work/scale/runs/m30k-attn/averaged \
#            ../shared/data/multi30k/test_2016_flickr.en.gz --precision int8
set -euo pipefail
unset GOMP_SPINCOUNT OMP_WAIT_POLICY  # each policy below sets its own; "tfm" is tfm's default
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
command=()
if [ "$1" = --command ]; then
  shift
  command=("$@")
  set --
fi
TFM="${TFM:-build/release/tfm}" ROUNDS="${ROUNDS:-3}" THREADS="${THREADS:-2}"
OUT="${OUT:-/tmp/contention}"
POLICIES="${POLICIES:-tfm GOMP_SPINCOUNT=300000 OMP_WAIT_POLICY=passive}"
mkdir -p "$OUT"
if ((${#command[@]} == 0)); then
  model="$1" source="$2"
  shift 2
  [ -x "$TFM" ] || { echo "contention: $TFM is not an executable" >&2; exit 2; }
  [ -d "$model" ] || { echo "contention: no model directory $model" >&2; exit 2; }
  [ -f "$source" ] || { echo "contention: no source file $source" >&2; exit 2; }
  if [[ "$source" == *.gz ]]; then zcat "$source"; else cat "$source"; fi > "$OUT/all.txt"
  if [ -n "${LINES:-}" ]; then sed -n "1,${LINES}p" "$OUT/all.txt"; else cat "$OUT/all.txt"; fi > "$OUT/src.txt"
  command=("$TFM" translate -m "$model" -i "$OUT/src.txt" -o "$OUT/out.txt" --threads "$THREADS" "$@")
  echo "contention: $(wc -l < "$OUT/src.txt") sentences, model $model, flags: --threads $THREADS $*"
else
  echo "contention: ${command[*]}"
fi

busy_pid=""
stop_busy() { [ -z "$busy_pid" ] || kill "$busy_pid" 2> /dev/null || true; busy_pid=""; }
trap stop_busy EXIT

# Median wall time of ROUNDS translations with the policy's environment.
run() {
  local policy="$1" times=()
  local -a env_args=()
  [ "$policy" = tfm ] || env_args=("$policy")
  for _ in $(seq 1 "$ROUNDS"); do
    local start; start=$(date +%s.%N)
    env "${env_args[@]}" "${command[@]}" > "$OUT/stdout.txt" 2> "$OUT/log.txt" ||
      { cat "$OUT/log.txt" >&2; exit 1; }
    times+=("$(echo "$(date +%s.%N) - $start" | bc -l)")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{t[NR]=$1} END {printf "%.2f %.2f %.2f", t[int((NR+1)/2)], t[1], t[NR]}'
}

printf '| policy | alone, s (min-max) | beside a busy process, s (min-max) | loaded / alone |\n|---|---:|---:|---:|\n'
for policy in $POLICIES; do
  read -r alone alone_min alone_max <<< "$(run "$policy")"
  sh -c 'while :; do :; done' &
  busy_pid=$!
  read -r loaded loaded_min loaded_max <<< "$(run "$policy")"
  stop_busy
  printf '| %s | %s (%s-%s) | %s (%s-%s) | %.2f |\n' "$policy" "$alone" "$alone_min" "$alone_max" \
    "$loaded" "$loaded_min" "$loaded_max" "$(echo "$loaded / $alone" | bc -l)"
done
