#!/usr/bin/env bash
# The test command: builds the release preset with warnings as errors and runs every test with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release -G Ninja >/dev/null
cmake --build --preset release
OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" ctest --preset release -j 2 "$@"
