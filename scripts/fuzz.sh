#!/usr/bin/env bash
# Fuzzes the file readers (docs/RELIABILITY.md) with libFuzzer under ASan and UBSan: each target runs
# for a fixed time on a copy of its committed seed corpus (fuzz/corpus/<target>); a crash, sanitizer
# report, uncaught non-tfm exception, leak, timeout or out-of-memory is a finding.
# Usage: scripts/fuzz.sh [--seconds N] [--jobs J] [--build-only] [target...]
#   --seconds N    fuzzing time per target (default 600)
#   --jobs J       parallel fuzzing processes per target (libFuzzer -fork=J; default 1)
#   --build-only   configure and build build/fuzz, run nothing
#   targets        some of: safetensors config_json model_dir checkpoint recipe serve_request trees
#                  (default: all)
# Writes build/fuzz/logs/<target>.log, a summary line per target, and reproducers under
# build/fuzz/findings/<target>/; exits 1 when any target had a finding.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
jobs=1
build_only=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all_targets=(safetensors config_json model_dir checkpoint recipe serve_request trees)
[ "${#targets[@]}" -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target $t (${all_targets[*]})" >&2; exit 2; }
done

# clang and its fuzzer/sanitizer runtimes (Debian clang, libclang-rt-dev), installed as setup.sh does.
fuzzer_links() {
  command -v clang++ >/dev/null || return 1
  local tmp; tmp="$(mktemp -d)"
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
    > "$tmp/probe.cc"
  clang++ -fsanitize=fuzzer,address,undefined "$tmp/probe.cc" -o "$tmp/probe" 2>/dev/null
  local rc=$?
  rm -rf "$tmp"
  return $rc
}
if ! fuzzer_links; then
  echo "fuzz.sh: installing clang libclang-rt-dev"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends clang libclang-rt-dev
  fuzzer_links || { echo "fuzz.sh: clang++ cannot link -fsanitize=fuzzer" >&2; exit 1; }
fi

build=build/fuzz
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S fuzz -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER=clang++ >/dev/null
fi
cmake --build "$build" -j "${TFM_FUZZ_BUILD_JOBS:-2}"
[ "$build_only" = 1 ] && exit 0

# Sanitizer settings: stop at the first error with a stack trace; fuzz/lsan.supp lists the leaks of
# libraries outside tfm (none needed so far).
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:symbolize=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export OMP_NUM_THREADS=1

dict_of() {
  case "$1" in
    recipe) echo fuzz/dict/yaml.dict ;;
    trees) echo fuzz/dict/trees.dict ;;
    *) echo fuzz/dict/json.dict ;;
  esac
}

mkdir -p "$build/logs"
failed=0
summary=()
for t in "${targets[@]}"; do
  work="$build/corpus-work/$t"
  findings="$build/findings/$t"
  log="$build/logs/$t.log"
  rm -rf "$work" "$findings"
  mkdir -p "$work" "$findings"
  cp fuzz/corpus/"$t"/* "$work"/
  parallel=()
  [ "$jobs" -gt 1 ] && parallel=(-fork="$jobs")
  echo "== fuzz_$t: $seconds s, corpus $(ls "$work" | wc -l) seeds, log $log"
  set +e
  # A single input may take 20 s and 1 GiB at most (a loader asking for more on a small file is a
  # finding); the process 2 GiB.
  "$build/fuzz_$t" "$work" -dict="$(dict_of "$t")" -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$findings/" \
    "${parallel[@]}" >"$log" 2>&1
  rc=$?
  set -e
  # A crashing target (abort) leaves its scratch folder (fuzz_util.h) behind.
  for d in /dev/shm/tfm-fuzz-* "${TMPDIR:-/tmp}"/tfm-fuzz-*; do
    [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null && rm -rf "$d"
  done
  execs="$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')"
  [ -n "$execs" ] || execs="$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')"
  cov="$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 | awk '{print $2 " edges, " $4 " features"}')"
  corpus="$(ls "$work" | wc -l)"
  artifacts="$(find "$findings" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' -o -name 'minimized-*' \) | sort | tr '\n' ' ')"
  if [ "$rc" -eq 0 ] && [ -z "$artifacts" ]; then
    result="no finding"
  else
    failed=1
    result="FINDING (exit $rc): ${artifacts:-see $log}"
    grep -m1 -E 'ERROR: |runtime error:|fuzz: |deadly signal|out-of-memory|timeout' "$log" \
      | sed 's/^/    /' || true
  fi
  line="$(printf '%-12s %s s, %s executions, corpus %s, coverage %s: %s' "$t" "$seconds" \
    "${execs:-?}" "$corpus" "${cov:-?}" "$result")"
  echo "$line"
  summary+=("$line")
done

echo "== summary (logs in $build/logs)"
printf '%s\n' "${summary[@]}"
exit "$failed"
