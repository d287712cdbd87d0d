#!/usr/bin/env bash
# The compile-only check of the CUDA backend: CI has no GPU, so the CUDA tests skip, but every CUDA
# source must still compile. The release build compiles them with nvcc when CMake finds a CUDA
# toolkit (CUDA 13 under /usr/local/cuda on every machine of this project); this check fails when a
# release build (BUILD, default build/release) was configured without the CUDA backend or lacks an
# object of a CUDA source, so that CI cannot pass with the backend silently left out.
# Usage: scripts/check_cuda_compiled.sh [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
cache="$build/CMakeCache.txt"
[ -f "$cache" ] || { echo "check_cuda_compiled.sh: no $cache (build the release preset first)" >&2; exit 1; }
compiler="$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$cache")"
if [ -z "$compiler" ] || [[ "$compiler" == *NOTFOUND ]]; then
  echo "check_cuda_compiled.sh: $build was configured without the CUDA backend (no nvcc found;" \
       "install the CUDA toolkit or put nvcc on PATH)" >&2
  exit 1
fi
missing=0 count=0
while IFS= read -r source; do
  count=$((count + 1))
  object="$(find "$build" -path "*/${source}.o" -print -quit)"
  if [ -z "$object" ]; then
    echo "check_cuda_compiled.sh: $source has no object in $build" >&2
    missing=$((missing + 1))
  fi
done < <(git ls-files 'src/tfm/kernels/cuda/*.cu' 'src/tfm/kernels/cuda/*.cc')
[ "$count" -gt 0 ] || { echo "check_cuda_compiled.sh: no CUDA sources tracked" >&2; exit 1; }
[ "$missing" = 0 ] || exit 1
echo "check_cuda_compiled.sh: $count CUDA backend sources compiled with $compiler ($build)"
