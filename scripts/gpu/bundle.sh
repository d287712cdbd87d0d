#!/usr/bin/env bash
# Builds tfm for a lent GPU machine and packs what it needs to run there into .gpu/ (ignored by
# git; the device tool carries it): a portable build (no -march=native: that machine's CPU is not
# this one's) with the CUDA backend and without MPI, the test and benchmark programs, and the shared
# libraries they load that a bare CUDA image lacks (oneDNN, SentencePiece, yaml-cpp, fmt, ICU), and
# Multi30k's text (.gpu/data/multi30k).
# scripts/gpu/run.sh unpacks it there.
#
# --cpu-arch ARCH builds instead for that machine's CPU (GCC's -march=ARCH, e.g. sapphirerapids for
# the lent H100's Xeon), without CUDA, into build/cpu-ARCH, with gemm_bench too: so that the CPU
# kernels this machine cannot run (AVX512-BF16, VNNI) are tested and measured there.
# Usage: scripts/gpu/bundle.sh [--no-build] [--cpu-arch ARCH]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/gpu build_now=1 arch=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build_now=0; shift ;;
    --cpu-arch) arch="${2:?bundle.sh: --cpu-arch needs an architecture, e.g. sapphirerapids}"
                build="build/cpu-$arch"; shift 2 ;;
    *) echo "bundle.sh: unknown argument $1 (--no-build, --cpu-arch ARCH)" >&2; exit 2 ;;
  esac
done
programs=(tfm tfm_tests bench_train_step bench_decode)
target=(-DTFM_ENABLE_CUDA=ON)
if [ -n "$arch" ]; then
  programs+=(gemm_bench)
  target=(-DTFM_ENABLE_CUDA=OFF "-DCMAKE_CXX_FLAGS=-march=$arch -mprefer-vector-width=512")
fi
if [ "$build_now" = 1 ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTFM_NATIVE=OFF -DTFM_ENABLE_MPI=OFF \
    "${target[@]}" >/dev/null
  cmake --build "$build" -j 2 --target "${programs[@]}"
fi
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
rm -rf .gpu && mkdir -p .gpu/stage/bin .gpu/stage/lib
echo "$build" >.gpu/stage/build-dir  # where run.sh unpacks it: the tests' compiled-in TFM_BINARY_DIR
for p in "${programs[@]}"; do cp "$build/$p" .gpu/stage/bin/; done
# Every library the programs load, except the C runtime's own and CUDA's (the image has them).
for p in "${programs[@]}"; do ldd "$build/$p"; done | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcublas[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/stage/lib/; done
tar -C .gpu/stage -cf - . | xz -T2 -6 >.gpu/bundle.tar.xz
rm -rf .gpu/stage
# Multi30k for train_check.sh's multi30k part (the GPU machine reaches no network): 2 MB.
mkdir -p .gpu/data && cp -r "$(scripts/fetch_multi30k.sh)" .gpu/data/
ls -la .gpu
