#!/usr/bin/env bash
# Builds tfm for a lent GPU machine and packs what it needs to run there into .gpu/ (ignored by
# git; the device tool carries it): a portable build (no -march=native: that machine's CPU is not
# this one's) with the CUDA backend and without MPI, the test and benchmark programs, and the shared
# libraries they load that a bare CUDA image lacks (oneDNN, SentencePiece, yaml-cpp, fmt, ICU).
# scripts/gpu/run.sh unpacks it there. Usage: scripts/gpu/bundle.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/gpu
if [ "${1:-}" != --no-build ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTFM_NATIVE=OFF -DTFM_ENABLE_MPI=OFF \
    -DTFM_ENABLE_CUDA=ON >/dev/null
  cmake --build "$build" -j 2 --target tfm tfm_tests bench_train_step bench_decode
fi
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
rm -rf .gpu && mkdir -p .gpu/stage/bin .gpu/stage/lib
programs=(tfm tfm_tests bench_train_step bench_decode)
for p in "${programs[@]}"; do cp "$build/$p" .gpu/stage/bin/; done
# Every library the programs load, except the C runtime's own and CUDA's (the image has them).
for p in "${programs[@]}"; do ldd "$build/$p"; done | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcublas[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/stage/lib/; done
tar -C .gpu/stage -cf - . | xz -T2 -6 >.gpu/bundle.tar.xz
rm -rf .gpu/stage
ls -la .gpu
