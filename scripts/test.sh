#!/usr/bin/env bash
# The test command: builds a preset (release unless --preset NAME, e.g. asan) with warnings as errors
# and runs every test with CTest; further arguments go to ctest.
# Usage: scripts/test.sh [--preset NAME] [ctest arguments]
# Compiles through ccache (scripts/ccache_env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=release
if [ "${1:-}" = --preset ]; then
  [ $# -ge 2 ] || { echo "test.sh: --preset needs a name" >&2; exit 2; }
  preset="$2"
  shift 2
fi

source scripts/ccache_env.sh
cmake --preset "$preset" -G Ninja >/dev/null
cmake --build --preset "$preset"
ccache_report
OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" ctest --preset "$preset" -j 2 "$@"
