#!/usr/bin/env bash
# On a lent GPU machine (the device tool runs it in a copy of the repository): unpacks
# .gpu/bundle.tar.xz (scripts/gpu/bundle.sh) into build/gpu (or the build directory the bundle
# names), points the loader at its libraries and at the image's cuBLASLt, makes the build's
# absolute paths (the tests' TFM_SOURCE_DIR=/work/main) resolve to this copy, then runs the command
# given: scripts/gpu/run.sh build/gpu/tfm_tests --gtest_filter='Cuda*'
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
# The bundle's build directory (build/gpu, or build/cpu-ARCH from bundle.sh --cpu-arch).
build="$(xz -dc .gpu/bundle.tar.xz | tar -xOf - ./build-dir 2>/dev/null || echo build/gpu)"
mkdir -p "$build"
xz -dc .gpu/bundle.tar.xz | tar -C "$build" -xf -
mv -f "$build"/bin/* "$build"/ 2>/dev/null || true
# The tests were compiled with TFM_SOURCE_DIR=/work/main and TFM_BINARY_DIR=/work/main/$build.
if [ "$repo" != /work/main ] && [ ! -e /work/main ]; then mkdir -p /work && ln -s "$repo" /work/main; fi
cublas="$(dirname "$(find / -name 'libcublasLt.so.13*' -not -path '*/proc/*' 2>/dev/null | head -1)")"
export LD_LIBRARY_PATH="$repo/$build/lib:${cublas}:${LD_LIBRARY_PATH:-}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}"
exec "$@"
