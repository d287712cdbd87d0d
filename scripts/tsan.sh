#!/usr/bin/env bash
# ThreadSanitizer on the threading tests: builds the `tsan` preset and runs every test with "Thread"
# in its name (threads sharing one model give the outputs of one thread; two Translators over one
# Model) except the "ThreadCount" ones, and tfm serve's queue and HTTP tests (concurrent requests,
# workers, stopping with requests in flight). Usage: scripts/tsan.sh [extra gtest arguments]
#
# Debian's libgomp (OpenMP, also under oneDNN) is not built with TSan: its barriers synchronise
# through futexes TSan cannot see, so a team of several OpenMP threads reports races that are not
# there (the end of a parallel loop is the synchronisation TSan misses). The tests therefore run
# with OMP_NUM_THREADS=1, so that each of a test's own threads (std::thread) runs its kernels alone
# and every access tfm's code makes from two threads at once is checked; and the tests that compare
# OpenMP thread counts (*ThreadCount*: they set several OpenMP threads on purpose) are left out.
# Races between the iterations of one OpenMP loop are not covered here (the kernels' tests compare
# every thread count against one). No suppressions: any report fails.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset tsan -G Ninja >/dev/null
cmake --build --preset tsan --target tfm_tests
export OMP_NUM_THREADS=1
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
build/tsan/tfm_tests --gtest_filter='*Thread*:ServeQueue.*:ServeHttp.*:-*ThreadCount*' "$@"
