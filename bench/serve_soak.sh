#!/usr/bin/env bash
# Soak test of `tfm serve`: SOAK_DURATION seconds of load at SOAK_CONCURRENCY connections, valid and
# invalid requests mixed, watching the server's memory; does it leak, does a bad request ever get
# anything but a 4xx or break a connection, does a good one ever fail, is it healthy afterwards.
#
# How: `tfm serve -m SOAK_MODEL SERVE_ARGS --port 0 --port-file ...`, ready once GET /health answers 200;
# then `wrk -c C -t C -d SOAK_DURATION --timeout WRK_TIMEOUT -s bench/serve_soak.lua` (C =
# SOAK_CONCURRENCY) POSTs to /translate: every INVALID_EVERY-th request of a wrk thread is invalid,
# rotating among malformed JSON, "q" a number, invalid UTF-8 bytes inside a JSON string, an unknown
# "model", "beam_size": 0, and a body that is a JSON array, not an object; the others are single
# sentences, {"q": "..."}, cycling through the first SENTENCES lines of SOAK_SENTENCES_FILE. With one
# connection per wrk thread and one request in flight per connection, the Lua script knows which
# request each answer belongs to, and counts the answers per kind of request (see bench/serve_soak.lua).
# (The machine's TcpExt ListenOverflows count over the run is reported: connections the server's accept
# queue dropped would wait for TCP retransmits, 1 s, 3 s ..., before their first answer. Debian's
# cpp-httplib listens with a backlog of 5; tfm serve widens it to 1024, and the count is 0.)
# Meanwhile the server's resident memory (VmRSS of /proc/PID/status) is sampled every RSS_INTERVAL
# seconds into $OUT/rss.csv (elapsed_s,rss_kb), and once more when the load ends.
#
# Reported: requests, rate, latency, answers per kind, and RSS: the mean (and max) of the samples in the
# RSS_WINDOW seconds after RSS_BASELINE s and in the last RSS_WINDOW seconds (thirds of the run when it
# is shorter than RSS_BASELINE + 2 x RSS_WINDOW), the growth from the one to the other, the maximum.
# PASS/FAIL lines:
#   - RSS growth (mean of the last window over the mean of the baseline window) < RSS_GROWTH_LIMIT % (5);
#   - answers: every valid request answered 200 (with a translation), every invalid one 4xx, and every
#     request sent answered but the at most C + 1 still in flight when wrk stopped;
#   - zero socket errors (connect, read, write, timeout);
#   - GET /health answers 200 after the load;
#   - the server exits 0 on SIGTERM.
# The summary is also a JSON object in $OUT/soak.json; exit status 1 when a check fails.
#
# Usage: bench/serve_soak.sh     (build first: cmake --preset release && cmake --build --preset release)
#   short check: SOAK_DURATION=30 bench/serve_soak.sh
# Environment overrides (defaults in parentheses):
#   SOAK_DURATION (600 s), SOAK_CONCURRENCY (32), SOAK_MODEL ([NAME=]DIR; m30k=$M30K_MODEL), M30K_MODEL
#   (/work/scale/runs/m30k-attn/averaged), SOAK_SENTENCES_FILE ($TFM_DATA_DIR/multi30k/
#   test_2016_flickr.en.gz), TFM_DATA_DIR (../shared/data), SENTENCES (500), INVALID_EVERY (8; 0: no
#   invalid requests), SERVE_ARGS (none: the server's defaults), WRK_TIMEOUT (10s), RSS_INTERVAL (10 s),
#   RSS_BASELINE (60 s), RSS_WINDOW (60 s), RSS_GROWTH_LIMIT (5 %), HEALTH_TIMEOUT (120 s), STOP_TIMEOUT (60 s),
#   SERVER_CPUS, CLIENT_CPUS (taskset -c lists; none), TFM (build/release/tfm), OUT (/tmp/serve-soak).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/serve_lib.sh
source bench/serve_lib.sh

SOAK_DURATION="${SOAK_DURATION:-600}"
SOAK_CONCURRENCY="${SOAK_CONCURRENCY:-32}"
M30K_MODEL="${M30K_MODEL:-/work/scale/runs/m30k-attn/averaged}"
SOAK_MODEL="${SOAK_MODEL:-m30k=$M30K_MODEL}"
TFM_DATA_DIR="${TFM_DATA_DIR:-../shared/data}"
SOAK_SENTENCES_FILE="${SOAK_SENTENCES_FILE:-$TFM_DATA_DIR/multi30k/test_2016_flickr.en.gz}"
SENTENCES="${SENTENCES:-500}"
INVALID_EVERY="${INVALID_EVERY:-8}"
SERVE_ARGS="${SERVE_ARGS:-}"
WRK_TIMEOUT="${WRK_TIMEOUT:-10s}"
RSS_INTERVAL="${RSS_INTERVAL:-10}"
RSS_BASELINE="${RSS_BASELINE:-60}"
RSS_WINDOW="${RSS_WINDOW:-60}"
RSS_GROWTH_LIMIT="${RSS_GROWTH_LIMIT:-5}"
HEALTH_TIMEOUT="${HEALTH_TIMEOUT:-120}"
STOP_TIMEOUT="${STOP_TIMEOUT:-60}"
CLIENT_CPUS="${CLIENT_CPUS:-}"
OUT="${OUT:-/tmp/serve-soak}"

[[ "$SOAK_DURATION" =~ ^[0-9]+$ && "$SOAK_DURATION" -gt 0 ]] || die "SOAK_DURATION: whole seconds, not '$SOAK_DURATION'"
[[ "$SOAK_CONCURRENCY" =~ ^[0-9]+$ && "$SOAK_CONCURRENCY" -gt 0 ]] || die "SOAK_CONCURRENCY: a positive number"
require_tools wrk curl jq gzip awk
mkdir -p "$OUT"

trap cleanup_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

client_pin=()
[[ -n "$CLIENT_CPUS" ]] && client_pin=(taskset -c "$CLIENT_CPUS")
read -r -a serve_args <<<"$SERVE_ARGS"

src="$OUT/sentences.txt"
extract_sentences "$SOAK_SENTENCES_FILE" "$SENTENCES" "$src"
start_server "$OUT/server.log" "$OUT/port" "$HEALTH_TIMEOUT" -m "$SOAK_MODEL" "${serve_args[@]}"
server_pid="$SERVER_PID"

# -- The load, with the server's RSS sampled meanwhile (by this shell, while wrk runs in the background).
c="$SOAK_CONCURRENCY"
report="$OUT/wrk.txt"
csv="$OUT/rss.csv"
echo "elapsed_s,rss_kb" >"$csv"
log "wrk -c $c -t $c -d ${SOAK_DURATION}s --timeout $WRK_TIMEOUT -s bench/serve_soak.lua (1 request in $INVALID_EVERY invalid)"
overflows0=$(listen_overflows)
t0=$(date +%s.%N)
"${client_pin[@]}" wrk -c "$c" -t "$c" -d "${SOAK_DURATION}s" --timeout "$WRK_TIMEOUT" \
  -s bench/serve_soak.lua "$SERVER_URL" -- "$src" "$INVALID_EVERY" "$c" "$c" >"$report" 2>&1 &
CLIENT_PID=$!
elapsed() { awk -v t0="$t0" -v now="$(date +%s.%N)" 'BEGIN { printf "%.1f", now - t0 }'; }
next_sample=0
while kill -0 "$CLIENT_PID" 2>/dev/null; do
  if awk -v e="$(elapsed)" -v n="$next_sample" 'BEGIN { exit !(e >= n) }'; then
    server_alive || break
    echo "$(elapsed),$(server_rss_kb)" >>"$csv"
    next_sample=$((next_sample + RSS_INTERVAL))
    log "$(tail -n 1 "$csv" | awk -F, '{ printf "%5.0f s: RSS %.1f MiB", $1, $2 / 1024 }')"
  fi
  sleep 0.5
done
wrk_rc=0
wait "$CLIENT_PID" || wrk_rc=$?
CLIENT_PID=""
if server_alive; then
  echo "$(elapsed),$(server_rss_kb)" >>"$csv"  # the end
else
  log "tfm serve is gone (log: $OUT/server.log)"
fi
[[ "$wrk_rc" == 0 ]] || { cat "$report" >&2; log "wrk exited with $wrk_rc"; }
wrk_json=$(grep '^{' "$report" | tail -n 1 || true)
[[ -n "$wrk_json" ]] || { cat "$report" >&2; wrk_json='{}'; log "no result line from bench/serve_soak.lua"; }

overflows1=$(listen_overflows)

# -- After the load: health, the server's own RSS figure, SIGTERM.
health=$(health_code)
metrics_rss=$(metric tfm_process_resident_memory_bytes 2>/dev/null || echo nan)
stop_server "$STOP_TIMEOUT"
log "tfm serve (pid $server_pid) exited with $SERVER_EXIT on SIGTERM"

# -- RSS: the mean of the samples in the minute after RSS_BASELINE s (the baseline window; RSS_WINDOW
# seconds, shortened for short runs) against the mean of the samples in the run's last RSS_WINDOW
# seconds. Means of windows, not single samples: with the allocator's cache bounded, blocks of 1 MiB
# and more are mapped and unmapped as batches come and go, and single samples swing by +-5% around a
# level that does not grow; a point-to-point comparison would report that swing as growth or shrinkage.
baseline_s="$RSS_BASELINE"
window_s="$RSS_WINDOW"
if ((SOAK_DURATION < RSS_BASELINE + 2 * RSS_WINDOW)); then
  baseline_s=$((SOAK_DURATION / 3))
  window_s=$((SOAK_DURATION / 3))
  log "a run of ${SOAK_DURATION}s is shorter than ${RSS_BASELINE}s + 2 x ${RSS_WINDOW}s: the RSS windows are ${baseline_s}-$((2 * baseline_s))s and the last ${window_s}s"
fi
rss_json=$(awk -F, -v b="$baseline_s" -v w="$window_s" -v end="$SOAK_DURATION" 'NR > 1 && $2 != "" {
    if ($1 >= b - 0.5 && $1 < b + w - 0.5) { base_sum += $2; base_n++; if ($2 > base_max) base_max = $2 }
    if ($1 >= end - w - 0.5) { last_sum += $2; last_n++; if ($2 > last_max) last_max = $2 }
    if ($2 > max) max = $2
    last = $2; last_at = $1; n++
  }
  END {
    if (base_n == 0 || last_n == 0) { print "{\"samples\": " n + 0 ", \"growth_pct\": null}"; exit }
    base = base_sum / base_n; final = last_sum / last_n
    printf "{\"samples\": %d, \"baseline_s\": %s, \"window_s\": %s, \"baseline_kb\": %.0f, \"baseline_max_kb\": %s, \"end_kb\": %.0f, \"end_max_kb\": %s, \"last_kb\": %s, \"max_kb\": %s, \"growth_pct\": %.3f, \"max_growth_pct\": %.3f}\n",
      n, b, w, base, base_max, final, last_max, last, max, 100 * (final - base) / base, 100 * (last_max - base_max) / base_max
  }' "$csv")

summary=$(jq -n --argjson wrk_line "$wrk_json" --argjson rss "$rss_json" --argjson c "$c" \
  --arg health "$health" --arg exit "$SERVER_EXIT" --arg metrics_rss "$metrics_rss" \
  --argjson duration "$SOAK_DURATION" --argjson every "$INVALID_EVERY" --arg serve_args "$SERVE_ARGS" \
  --argjson limit "$RSS_GROWTH_LIMIT" --arg model "$SOAK_MODEL" \
  --arg o0 "$overflows0" --arg o1 "$overflows1" '
  ({sent: {}, answered: {}, status: {}, valid_bad: {}, invalid_4xx: {}, invalid_bad: {}, wrong_reason: {},
    latency_ms: {}, socket_errors: {}} + $wrk_line) as $wrk |
  {model: $model, duration_s: $duration, concurrency: $c, invalid_every: $every, serve_args: $serve_args,
   wrk: $wrk, rss: ($rss + {metrics_end_bytes: (try ($metrics_rss | tonumber) catch null)}),
   listen_overflows: (try (($o1 | tonumber) - ($o0 | tonumber)) catch null),
   health_after: (try ($health | tonumber) catch $health),
   exit_code: (try ($exit | tonumber) catch $exit)} |
  .checks = {
    rss_growth: (.rss.growth_pct != null and .rss.growth_pct < $limit),
    answers: (($wrk.valid_ok // 0) > 0 and $wrk.valid_not_200 == 0 and $wrk.invalid_not_4xx == 0
              and ($every == 0 or ([$wrk.invalid_4xx[]] | add // 0) > 0)
              and $wrk.unanswered >= 0 and $wrk.unanswered <= $c + 1),
    socket_errors: ($wrk.socket_errors.total == 0),
    health: (.health_after == 200),
    sigterm_exit: (.exit_code == 0)}')
echo "$summary" >"$OUT/soak.json"

# -- Report.
echo
jq -r --argjson limit "$RSS_GROWTH_LIMIT" '
  def r1: . * 10 | round / 10;
  def mib: . / 1024 | r1 | tostring + " MiB";
  def pf: if . then "PASS" else "FAIL" end;
  def kinds: to_entries | map("\(.key) \(.value)") | join(", ");
  .wrk as $w | .rss as $r |
  "soak: \(.model), \(.duration_s) s at \(.concurrency) connections, 1 request in \(.invalid_every) invalid",
  "requests: \($w.requests) answered (\($w.requests_per_s | r1)/s), latency p50 \($w.latency_ms.p50 | r1) ms, p99 \($w.latency_ms.p99 | r1) ms, max \($w.latency_ms.max | r1) ms",
  "sent: \($w.sent | kinds)",
  "answered: \($w.answered | kinds); status codes: \($w.status | kinds)",
  "valid: \($w.valid_ok) answered 200 with a translation, \($w.valid_not_200) otherwise (\($w.valid_bad | kinds))",
  "invalid: \([$w.invalid_4xx[]] | add // 0) answered 4xx (\($w.invalid_4xx | kinds)), \($w.invalid_not_4xx) otherwise (\($w.invalid_bad | kinds)); 4xx whose error names another problem: \([$w.wrong_reason[]] | add // 0)",
  "accept-queue overflows (TcpExt ListenOverflows: connections that waited for TCP retransmits): \(.listen_overflows)",
  "unanswered when wrk stopped (in flight, at most \(.concurrency) + 1): \($w.unanswered)",
  "socket errors: connect \($w.socket_errors.connect), read \($w.socket_errors.read), write \($w.socket_errors.write), timeout \($w.socket_errors.timeout)",
  "RSS: mean \($r.baseline_kb | mib) (max \($r.baseline_max_kb | mib)) over \($r.baseline_s)-\($r.baseline_s + $r.window_s) s, mean \($r.end_kb | mib) (max \($r.end_max_kb | mib)) over the last \($r.window_s) s; growth of the mean \($r.growth_pct | r1)%, of the max \($r.max_growth_pct | r1)%; max of the run \($r.max_kb | mib), last sample \($r.last_kb | mib) (\($r.samples) samples; /metrics at the end: \(($r.metrics_end_bytes // 0) / 1048576 | r1) MiB)",
  "",
  "\(.checks.rss_growth | pf) RSS growth \($r.growth_pct | r1)% < \($limit)% (mean over \($r.baseline_s)-\($r.baseline_s + $r.window_s) s to mean over the last \($r.window_s) s)",
  "\(.checks.answers | pf) valid requests all 200 (\($w.valid_not_200) not), invalid ones all 4xx (\($w.invalid_not_4xx) not), unanswered \($w.unanswered) <= \(.concurrency + 1)",
  "\(.checks.socket_errors | pf) socket errors: \($w.socket_errors.total)",
  "\(.checks.health | pf) GET /health after the load: \(.health_after)",
  "\(.checks.sigterm_exit | pf) exit status on SIGTERM: \(.exit_code)"
' "$OUT/soak.json"
echo
echo "RSS samples: $csv; summary: $OUT/soak.json; wrk report: $report; server log: $OUT/server.log"
jq -e '[.checks[]] | all' "$OUT/soak.json" >/dev/null
