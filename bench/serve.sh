#!/usr/bin/env bash
# Load test of `tfm serve`: throughput and latency of POST /translate under concurrent clients, against
# the offline throughput of `tfm translate` on the same sentences, with the same beam and threads.
# Bounded in time: RUNS offline runs, then per model WARMUP + one DURATION per concurrency level.
#
# For each model NAME=DIR in MODELS:
#  1. The first SENTENCES lines (BASE_SENTENCES for the model named "base", ~10x slower) of its sentence
#     file: Multi30k's test_2016_flickr.en.gz for "m30k", WMT14's newstest2014.en.gz for "base" (under
#     TFM_DATA_DIR), or the file in SENTENCES_<NAME> (plain or .gz; any other name needs one).
#  2. Offline reference: `tfm translate -m DIR -i FILE --threads THREADS -b BEAM`, timed by the wall
#     clock (the model's loading included, as a client would see it), RUNS times; the best run gives
#     the offline sentences/s, and the spread is (slowest - fastest) / fastest. tfm's own count without
#     the loading ("decode-only") is recorded too.
#  3. `tfm serve -m NAME=DIR -b BEAM SERVE_ARGS --port 0 --port-file ...`, ready once GET /health
#     answers 200 (HEALTH_TIMEOUT). A warm-up (WARMUP at concurrency WARMUP_CONCURRENCY, not measured),
#     then for each C in CONCURRENCY: `wrk -c C -t min(C, 2) -d DURATION --timeout WRK_TIMEOUT -s
#     bench/serve_post.lua`, one sentence per request ({"q": "..."}, cycling through the file), so
#     requests/s = sentences/s; the script's done() reports latency percentiles, status codes and socket
#     errors. (wrk gives each thread C / T connections: an odd C > 1 runs C - 1.) Between runs the server
#     is drained (a probe translation queued behind what is left), so that no run inherits another's
#     backlog; the mean batch size of a run comes from the tfm_batch_sentences histogram of /metrics.
#     Connections dropped by a full accept queue when wrk opens many at once would wait for TCP
#     retransmits (1 s, 3 s ...) before their first answer, a latency tail that is not the server's
#     decoding (Debian's cpp-httplib listens with a backlog of 5; tfm serve widens it to 1024): the
#     machine's TcpExt ListenOverflows count during each run is recorded ("listen_overflows") and named
#     under the table when it is not 0.
#  4. The first CHECK_SENTENCES served translations (one curl each, sequentially) must equal the offline
#     ones line by line: "matches n/20" (differences in $OUT/NAME.check.txt).
#  5. SIGTERM; the server must exit with status 0 within STOP_TIMEOUT.
# Then a markdown table: model | concurrency | sentences/s | % of offline (the best offline run) | p50 ms
# | p99 ms | errors (non-2xx answers + socket errors + 200s without a translation) | mean batch.
# Every measurement is a JSON line in $OUT/results.jsonl (kind: offline, serve, check, stop); the logs,
# sentence files, offline outputs and wrk reports stay in $OUT too. Exit status 1 when a server does not
# start or does not exit 0 on SIGTERM; slow or erroneous runs are reported, not failed.
#
# On a machine with few cores wrk competes with the server for them: pin them apart with SERVER_CPUS
# and CLIENT_CPUS (taskset -c lists; the offline runs use SERVER_CPUS too).
#
# Usage: bench/serve.sh          (build first: cmake --preset release && cmake --build --preset release)
#   short check: DURATION=3s CONCURRENCY="1 8" SENTENCES=50 BASE_SENTENCES=20 RUNS=1 bench/serve.sh
# Environment overrides (defaults in parentheses):
#   MODELS ("m30k=$M30K_MODEL base=$BASE_MODEL"), M30K_MODEL (/work/scale/runs/m30k-attn/averaged),
#   BASE_MODEL (/work/scale/runs/en-de-base/averaged), TFM_DATA_DIR (../shared/data), SENTENCES (500),
#   BASE_SENTENCES (100), SENTENCES_<NAME> (a sentence file for model NAME; non-alphanumerics in NAME
#   read as _), RUNS (2), THREADS (2), BEAM (4; the server's -b and translate's, so keep -b out of
#   SERVE_ARGS), SERVE_ARGS (--threads $THREADS; replaces the default: e.g. "--workers 2 --threads 1
#   --batch-delay-ms 10 --max-queue 4096"), CONCURRENCY (1 8 64), DURATION (20s), WRK_TIMEOUT (10s),
#   WARMUP (2s; 0: none), WARMUP_CONCURRENCY (8), CHECK_SENTENCES (20), HEALTH_TIMEOUT (120 s),
#   STOP_TIMEOUT (60 s), SERVER_CPUS, CLIENT_CPUS (none), TFM (build/release/tfm), OUT (/tmp/serve-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/serve_lib.sh
source bench/serve_lib.sh

M30K_MODEL="${M30K_MODEL:-/work/scale/runs/m30k-attn/averaged}"
BASE_MODEL="${BASE_MODEL:-/work/scale/runs/en-de-base/averaged}"
MODELS="${MODELS:-m30k=$M30K_MODEL base=$BASE_MODEL}"
TFM_DATA_DIR="${TFM_DATA_DIR:-../shared/data}"
SENTENCES="${SENTENCES:-500}"
BASE_SENTENCES="${BASE_SENTENCES:-100}"
RUNS="${RUNS:-2}"
THREADS="${THREADS:-2}"
BEAM="${BEAM:-4}"
SERVE_ARGS="${SERVE_ARGS---threads $THREADS}"
CONCURRENCY="${CONCURRENCY:-1 8 64}"
DURATION="${DURATION:-20s}"
WRK_TIMEOUT="${WRK_TIMEOUT:-10s}"
WARMUP="${WARMUP:-2s}"
WARMUP_CONCURRENCY="${WARMUP_CONCURRENCY:-8}"
CHECK_SENTENCES="${CHECK_SENTENCES:-20}"
HEALTH_TIMEOUT="${HEALTH_TIMEOUT:-120}"
STOP_TIMEOUT="${STOP_TIMEOUT:-60}"
CLIENT_CPUS="${CLIENT_CPUS:-}"
OUT="${OUT:-/tmp/serve-bench}"

[[ "$RUNS" =~ ^[0-9]+$ && "$RUNS" -ge 1 ]] || die "RUNS: at least 1, not '$RUNS'"
for c in $CONCURRENCY; do
  [[ "$c" =~ ^[0-9]+$ && "$c" -ge 1 ]] || die "CONCURRENCY: positive numbers, not '$c'"
done
require_tools wrk curl jq gzip awk
mkdir -p "$OUT"
results="$OUT/results.jsonl"
: >"$results"
trap cleanup_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

server_pin=() client_pin=()
[[ -n "$SERVER_CPUS" ]] && server_pin=(taskset -c "$SERVER_CPUS")
[[ -n "$CLIENT_CPUS" ]] && client_pin=(taskset -c "$CLIENT_CPUS")
read -r -a serve_args <<<"$SERVE_ARGS"

now() { date +%s.%N; }

# run_wrk C DURATION FILE REPORT: wrk at concurrency C for DURATION with bench/serve_post.lua over FILE,
# its report (with the script's JSON line) into REPORT.
run_wrk() {
  local c="$1" duration="$2" file="$3" report="$4"
  local t=$((c < 2 ? c : 2))
  run_client "$report" "${client_pin[@]}" wrk -c "$c" -t "$t" -d "$duration" --timeout "$WRK_TIMEOUT" \
    -s bench/serve_post.lua "$SERVER_URL" -- "$file" "$t" ||
    { cat "$report" >&2; die "wrk failed (report: $report)"; }
  grep -q '^{' "$report" || die "no result line from bench/serve_post.lua in $report"
}

failed=0
for spec in $MODELS; do
  [[ "$spec" == ?*=?* ]] || die "MODELS: '$spec' is not NAME=DIR"
  name="${spec%%=*}" dir="${spec#*=}"
  [[ -d "$dir" ]] || die "$dir: no such model directory (model $name)"
  safe="${name//[^A-Za-z0-9_]/_}"
  var="SENTENCES_$safe"
  source_file="${!var:-}"
  if [[ -z "$source_file" ]]; then
    case "$name" in
      m30k) source_file="$TFM_DATA_DIR/multi30k/test_2016_flickr.en.gz" ;;
      base) source_file="$TFM_DATA_DIR/wmt14-en-de-test/newstest2014.en.gz" ;;
      *) die "no default sentence file for model '$name': set SENTENCES_$safe=FILE" ;;
    esac
  fi
  count="$SENTENCES"
  [[ "$name" == base ]] && count="$BASE_SENTENCES"
  src="$OUT/$name.src.txt"
  extract_sentences "$source_file" "$count" "$src"
  n=$(wc -l <"$src")

  # -- Offline reference.
  offline="$OUT/$name.offline.txt"
  times=() rates=()
  for ((run = 1; run <= RUNS; run++)); do
    log "$name: offline run $run/$RUNS: $TFM translate -m $dir -i $src --threads $THREADS -b $BEAM ($n sentences)"
    start=$(now)
    run_client "$OUT/$name.offline.$run.log" "${server_pin[@]}" "$TFM" translate -m "$dir" -i "$src" \
      -o "$offline" --threads "$THREADS" -b "$BEAM" ||
      { cat "$OUT/$name.offline.$run.log" >&2; die "tfm translate failed"; }
    end=$(now)
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')")
    rates+=("$(grep -o '[0-9.]* sentences/s' "$OUT/$name.offline.$run.log" | tail -n 1 | awk '{print $1}' || true)")
  done
  offline_json=$(printf '%s\n' "${times[@]}" | jq -sc --arg model "$name" --arg dir "$dir" \
    --arg source "$source_file" --argjson n "$n" --argjson threads "$THREADS" --argjson beam "$BEAM" \
    --argjson rates "$(printf '%s\n' "${rates[@]}" | jq -sc 'map(select(. != null))')" '
    (min) as $best | (max) as $worst |
    {kind: "offline", model: $model, dir: $dir, source: $source, sentences: $n, threads: $threads,
     beam: $beam, runs: length, seconds: ., best_s: $best, sentences_per_s: ($n / $best),
     spread_pct: (100 * ($worst - $best) / $best),
     decode_sentences_per_s: (if ($rates | length) > 0 then ($rates | max) else null end)}')
  echo "$offline_json" >>"$results"
  log "$name: offline $(jq -r '"\(.sentences_per_s * 10 | round / 10) sentences/s (best of \(.runs), spread \(.spread_pct * 10 | round / 10)%; decode-only \(.decode_sentences_per_s)/s)"' <<<"$offline_json")"

  # -- Server.
  start_server "$OUT/$name.server.log" "$OUT/$name.port" "$HEALTH_TIMEOUT" -m "$name=$dir" -b "$BEAM" \
    "${serve_args[@]}"
  if [[ "$WARMUP" != 0 ]]; then
    log "$name: warm-up, $WARMUP at concurrency $WARMUP_CONCURRENCY"
    run_wrk "$WARMUP_CONCURRENCY" "$WARMUP" "$src" "$OUT/$name.warmup.wrk.txt"
  fi
  for c in $CONCURRENCY; do
    t=$((c < 2 ? c : 2))
    drain
    sum0=$(metric tfm_batch_sentences_sum) count0=$(metric tfm_batch_sentences_count)
    overflows0=$(listen_overflows)
    log "$name: wrk -c $c -t $t -d $DURATION --timeout $WRK_TIMEOUT -s bench/serve_post.lua"
    run_wrk "$c" "$DURATION" "$src" "$OUT/$name.c$c.wrk.txt"
    line=$(grep '^{' "$OUT/$name.c$c.wrk.txt" | tail -n 1)
    sum1=$(metric tfm_batch_sentences_sum) count1=$(metric tfm_batch_sentences_count)
    overflows1=$(listen_overflows)
    row=$(jq -c --arg model "$name" --argjson c "$c" --argjson t "$t" --arg duration "$DURATION" \
      --arg serve_args "$SERVE_ARGS" --argjson beam "$BEAM" \
      --arg s0 "$sum0" --arg n0 "$count0" --arg s1 "$sum1" --arg n1 "$count1" \
      --arg o0 "$overflows0" --arg o1 "$overflows1" '
      {kind: "serve", model: $model, concurrency: $c, wrk_threads: $t,
       connections: ($t * (($c / $t) | floor)), duration: $duration, beam: $beam,
       serve_args: $serve_args} + . +
      {errors: (.non2xx + .socket_errors.total + .bad_bodies),
       batches: (($n1 | tonumber) - ($n0 | tonumber)),
       mean_batch_sentences: (if ($n1 | tonumber) > ($n0 | tonumber)
         then (($s1 | tonumber) - ($s0 | tonumber)) / (($n1 | tonumber) - ($n0 | tonumber))
         else null end),
       listen_overflows: (try (($o1 | tonumber) - ($o0 | tonumber)) catch null)}' <<<"$line")
    echo "$row" >>"$results"
    log "$name c=$c: $(jq -r '"\(.requests_per_s * 10 | round / 10) sentences/s, p50 \(.latency_ms.p50 | round) ms, p99 \(.latency_ms.p99 | round) ms, errors \(.errors)"' <<<"$row")"
  done

  # -- Served translations against the offline ones.
  drain
  check_n=$((CHECK_SENTENCES < n ? CHECK_SENTENCES : n))
  check="$OUT/$name.check.txt"
  : >"$check"
  matches=0 i=0
  while IFS= read -r body; do
    i=$((i + 1))
    served=$(curl -s --max-time 120 -H 'Content-Type: application/json' --data-binary "$body" \
      "$SERVER_URL/translate" | jq -r '.translatedText // "(no translatedText)"' 2>/dev/null ||
      echo "(no answer)")
    expected=$(sed -n "${i}p" "$offline")
    if [[ "$served" == "$expected" ]]; then
      matches=$((matches + 1))
    else
      printf 'line %d\n  source:  %s\n  offline: %s\n  served:  %s\n' "$i" "$(sed -n "${i}p" "$src")" \
        "$expected" "$served" >>"$check"
    fi
  done < <(head -n "$check_n" "$src" | jq -Rc '{q: .}')
  jq -nc --arg model "$name" --argjson m "$matches" --argjson n "$check_n" \
    '{kind: "check", model: $model, matches: $m, checked: $n}' >>"$results"
  log "$name: served translations equal to the offline ones: $matches/$check_n"

  # -- SIGTERM.
  rss=$(metric tfm_process_resident_memory_bytes)
  stop_server "$STOP_TIMEOUT"
  jq -nc --arg model "$name" --arg exit "$SERVER_EXIT" --arg rss "$rss" \
    '{kind: "stop", model: $model, exit_code: (try ($exit | tonumber) catch $exit),
      rss_bytes_before_stop: (try ($rss | tonumber) catch null)}' >>"$results"
  log "$name: tfm serve exited with $SERVER_EXIT on SIGTERM"
  [[ "$SERVER_EXIT" == 0 ]] || failed=1
done

# -- The table.
echo
jq -rs '
  def r1: . * 10 | round / 10;
  (map(select(.kind == "offline")) | map({key: .model, value: .}) | from_entries) as $offline |
  (map(select(.kind == "check")) | map({key: .model, value: .}) | from_entries) as $check |
  (map(select(.kind == "stop")) | map({key: .model, value: .}) | from_entries) as $stop |
  "| model | concurrency | sentences/s | % of offline | p50 ms | p99 ms | errors | mean batch |",
  "|---|---:|---:|---:|---:|---:|---:|---:|",
  (.[] | select(.kind == "offline" or .kind == "serve") |
    if .kind == "offline" then
      "| \(.model) | offline (\(.threads) threads) | \(.sentences_per_s | r1) (spread \(.spread_pct | r1)% over \(.runs) runs; decode-only \(.decode_sentences_per_s // "?")) | 100 | | | | |"
    else
      "| \(.model) | \(.concurrency) | \(.requests_per_s | r1) | \(100 * .requests_per_s / $offline[.model].sentences_per_s | round) | \(.latency_ms.p50 | r1) | \(.latency_ms.p99 | r1) | \(.errors) | \(.mean_batch_sentences // "?" | if type == "number" then r1 else . end) |"
    end),
  "",
  ([.[] | select(.kind == "serve" and (.listen_overflows // 0) > 0)] |
    if length > 0 then
      "Accept-queue overflows during the runs (TcpExt ListenOverflows): " +
      (map("\(.model) c=\(.concurrency): \(.listen_overflows)") | join(", ")) +
      ". Connections dropped at the start of a run wait for TCP retransmits (1 s, 3 s ...): that inflates their p99."
    else empty end),
  ($check | to_entries[] | "\(.key): served translations equal to the offline ones: \(.value.matches)/\(.value.checked)"),
  ($stop | to_entries[] | "\(.key): exit status on SIGTERM: \(.value.exit_code)")
' "$results"
echo
echo "raw results: $results"
exit "$failed"
