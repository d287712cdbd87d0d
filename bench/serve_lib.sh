# Functions shared by bench/serve.sh and bench/serve_soak.sh (sourced from the project root, after
# `set -euo pipefail`): the sentence files, starting `tfm serve` on a free port and waiting until it is
# ready, draining it between runs, reading its metrics, and stopping it with SIGTERM.
#
# Environment: TFM (the binary, default build/release/tfm), SERVER_CPUS (optional `taskset -c` list the
# server runs on; empty: no pinning).
# shellcheck shell=bash
# shellcheck disable=SC2034  # SERVER_EXIT: read by the scripts that source this file

TFM="${TFM:-build/release/tfm}"
SERVER_CPUS="${SERVER_CPUS:-}"
SERVER_PID=""
SERVER_URL=""
SERVER_EXIT=""

log() { echo "== $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

# Checks that the tools the scripts use are here.
require_tools() {
  local tool
  for tool in "$@"; do command -v "$tool" >/dev/null || die "$tool is not installed"; done
  [[ -x "$TFM" ]] || die "$TFM: no such binary (build first: cmake --preset release && cmake --build --preset release)"
}

# extract_sentences SOURCE COUNT DEST: the first COUNT lines of SOURCE (plain text or .gz) into DEST.
extract_sentences() {
  local source="$1" count="$2" dest="$3"
  [[ -f "$source" ]] || die "$source: no such sentence file"
  # sed reads its whole input (no SIGPIPE for gzip under pipefail, as with head).
  gzip -cdf -- "$source" | sed -n "1,${count}p" >"$dest"
  local lines
  lines=$(wc -l <"$dest")
  [[ "$lines" -gt 0 ]] || die "$source: no sentences"
  if [[ "$lines" -lt "$count" ]]; then
    log "$source has only $lines lines (asked for $count)"
  fi
}

# server_alive: the server process exists and is not a zombie waiting to be reaped.
server_alive() {
  [[ -n "$SERVER_PID" ]] || return 1
  local state
  state=$(awk '/^State:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z ]]
}

# server_rss_kb: the server's resident memory (VmRSS) in KiB.
server_rss_kb() {
  awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status"
}

# start_server LOG PORT_FILE TIMEOUT_S ARGS...: starts `tfm serve ARGS --port 0 --port-file PORT_FILE`
# (stderr to LOG), waits until GET /health answers 200, and sets SERVER_PID and SERVER_URL. Dies if the
# server exits or is not ready within TIMEOUT_S seconds.
start_server() {
  local log_file="$1" port_file="$2" timeout="$3"
  shift 3
  local pin=()
  [[ -n "$SERVER_CPUS" ]] && pin=(taskset -c "$SERVER_CPUS")
  rm -f "$port_file"
  SERVER_URL=""
  log "${pin[*]}${pin[*]:+ }$TFM serve $* --port 0 --port-file $port_file"
  "${pin[@]}" "$TFM" serve "$@" --port 0 --port-file "$port_file" 2>"$log_file" &
  SERVER_PID=$!
  local deadline=$((SECONDS + timeout)) code=""
  while :; do
    server_alive || { cat "$log_file" >&2; die "tfm serve exited before it was ready (log: $log_file)"; }
    if [[ -z "$SERVER_URL" && -s "$port_file" ]]; then
      SERVER_URL="http://127.0.0.1:$(tr -d '[:space:]' <"$port_file")"
    fi
    if [[ -n "$SERVER_URL" ]]; then
      code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$SERVER_URL/health" || true)
      [[ "$code" == 200 ]] && break
    fi
    [[ $SECONDS -lt $deadline ]] || die "tfm serve not ready after ${timeout}s (last /health: ${code:-none}; log: $log_file)"
    sleep 0.2
  done
  log "ready at $SERVER_URL (pid $SERVER_PID)"
}

# health_code: the status code of GET /health now.
health_code() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$SERVER_URL/health" || true
}

# metric NAME: the sum of the samples of one metric (every label set) in GET /metrics.
metric() {
  curl -sf --max-time 10 "$SERVER_URL/metrics" |
    awk -v name="$1" '$1 == name || index($1, name "{") == 1 { sum += $NF; found = 1 }
                      END { if (found) printf "%.17g\n", sum; else print "nan" }'
}

# listen_overflows: the machine's count of connections dropped because a listening socket's accept
# queue was full (TcpExt ListenOverflows in /proc/net/netstat; "nan" where it cannot be read). When many
# connections open at once (wrk's start), the ones beyond the backlog wait for TCP retransmits (1 s, then
# 3 s ...), which shows as a latency tail; the scripts report the count (tfm serve's backlog is 1024).
listen_overflows() {
  awk '$1 == "TcpExt:" { if (!named) { for (i = 2; i <= NF; i++) name[i] = $i; named = 1 }
                         else for (i = 2; i <= NF; i++) if (name[i] == "ListenOverflows") { print $i; found = 1 } }
       END { if (!found) print "nan" }' /proc/net/netstat 2>/dev/null || echo nan
}

# drain: waits (up to 10 minutes) until the server has no sentence queued or being decoded, so that the
# work of one load run does not spill into the next: a probe translation, queued behind whatever is left,
# is answered once that is done, and the queue is then empty.
drain() {
  local deadline=$((SECONDS + 600)) queued
  while :; do
    curl -sf --max-time 600 -H 'Content-Type: application/json' --data-binary '{"q": "Drain."}' \
      "$SERVER_URL/translate" >/dev/null || log "drain: the probe translation failed"
    queued=$(curl -sf --max-time 10 "$SERVER_URL/health" | jq -r '.queued_sentences // 0' || echo 0)
    [[ "$queued" == 0 ]] && return 0
    [[ $SECONDS -lt $deadline ]] || { log "drain: still $queued sentences queued"; return 0; }
  done
}

# stop_server TIMEOUT_S: SIGTERM, then waits for the exit; sets SERVER_EXIT to the exit status, or to
# "timeout" when the server did not stop in time (it is then killed). Not in a $(...): the server must be
# this shell's child.
stop_server() {
  local timeout="$1"
  SERVER_EXIT=0
  [[ -n "$SERVER_PID" ]] || { SERVER_EXIT="not running"; return 0; }
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  local deadline=$((SECONDS + timeout))
  while server_alive && [[ $SECONDS -lt $deadline ]]; do sleep 0.2; done
  if server_alive; then
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_EXIT=timeout
  else
    wait "$SERVER_PID" || SERVER_EXIT=$?
  fi
  SERVER_PID=""
  SERVER_URL=""
}

# run_client REPORT COMMAND...: runs a load client (wrk) in the background, its output into REPORT, and
# waits for it: a signal to this script is then handled at once (bash runs a trap only between
# commands), and cleanup can end the client. Returns the client's exit status.
CLIENT_PID=""
run_client() {
  local report="$1" rc=0
  shift
  "$@" >"$report" 2>&1 &
  CLIENT_PID=$!
  wait "$CLIENT_PID" || rc=$?
  CLIENT_PID=""
  return "$rc"
}

# cleanup_server: for an EXIT trap; ends a load client still running, and a server (SIGTERM, then
# SIGKILL after 10 s).
cleanup_server() {
  if [[ -n "$CLIENT_PID" ]] && kill -0 "$CLIENT_PID" 2>/dev/null; then
    kill -TERM "$CLIENT_PID" 2>/dev/null || true
    wait "$CLIENT_PID" 2>/dev/null || true
  fi
  if server_alive; then
    log "stopping tfm serve (pid $SERVER_PID)"
    stop_server 10
  fi
}
