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
#
# --mpi builds the CUDA bundle with MPI, into build/gpu-mpi (build/gpu stays as it is), with
# tfm_dist_tests too, and packs this machine's Open MPI 4.1 runtime under mpi/ (the image there may
# have no MPI at all): orterun (mpirun, mpiexec), ompi_info, the MCA components, PMIx's and hwloc's
# plugins, the help files and /etc/openmpi, their absolute paths kept below mpi/, and every library
# they load in lib/. Components for networks a single host does not need (UCX, libfabric, PSM,
# InfiniBand verbs) are left out. run.sh relocates it (OPAL_PREFIX) and runs as 2 ranks on one GPU:
#   scripts/gpu/run.sh build/gpu-mpi/tfm_tests --gtest_filter='CliTrainDistributed.*Gpu*'
# Usage: scripts/gpu/bundle.sh [--no-build] [--cpu-arch ARCH | --mpi]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/gpu build_now=1 arch="" mpi=OFF
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build_now=0; shift ;;
    --cpu-arch) arch="${2:?bundle.sh: --cpu-arch needs an architecture, e.g. sapphirerapids}"
                build="build/cpu-$arch"; shift 2 ;;
    --mpi) mpi=ON build=build/gpu-mpi; shift ;;
    *) echo "bundle.sh: unknown argument $1 (--no-build, --cpu-arch ARCH, --mpi)" >&2; exit 2 ;;
  esac
done
if [ "$mpi" = ON ] && [ -n "$arch" ]; then echo "bundle.sh: --mpi is for the CUDA bundle, not --cpu-arch" >&2; exit 2; fi
programs=(tfm tfm_tests bench_train_step bench_decode)
[ "$mpi" = ON ] && programs+=(tfm_dist_tests bench_train_dist)
target=(-DTFM_ENABLE_CUDA=ON)
if [ -n "$arch" ]; then
  programs+=(gemm_bench)
  target=(-DTFM_ENABLE_CUDA=OFF "-DCMAKE_CXX_FLAGS=-march=$arch -mprefer-vector-width=512")
fi
if [ "$build_now" = 1 ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTFM_NATIVE=OFF -DTFM_ENABLE_MPI=$mpi \
    "${target[@]}" >/dev/null
  cmake --build "$build" -j 2 --target "${programs[@]}"
fi
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
rm -rf .gpu && mkdir -p .gpu/stage/bin .gpu/stage/lib
echo "$build" >.gpu/stage/build-dir  # where run.sh unpacks it: the tests' compiled-in TFM_BINARY_DIR
pwd >.gpu/stage/source-dir  # the tests' compiled-in TFM_SOURCE_DIR, which run.sh makes resolve
for p in "${programs[@]}"; do cp "$build/$p" .gpu/stage/bin/; done
elves=("${programs[@]/#/$build/}")
if [ "$mpi" = ON ]; then
  # Open MPI's files as Debian installs them (dpkg -L), less documentation, headers, static
  # libraries, Fortran and Java, and the components of the networks left out.
  dpkg -L libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc-plugins |
    grep -E '^/(etc/openmpi|usr/bin/(orterun|orted|ompi_info)$|usr/share/openmpi|usr/lib/x86_64-linux-gnu/(openmpi/lib/openmpi3|pmix2/lib/pmix|pmix2/share|hwloc))' |
    while read -r f; do [ -f "$f" ] && echo "$f"; done |
    while read -r f; do
      if ldd "$f" 2>/dev/null | grep -Eq 'lib(ucp|ucs|uct|fabric|psm|psm2|psm_infinipath|ibverbs|rdmacm)\.so'; then
        continue
      fi
      echo "$f"
    done >.gpu/stage/mpi-files
  tar -C / -chf - -T <(sed 's|^/||' .gpu/stage/mpi-files) | (mkdir -p .gpu/stage/mpi && tar -C .gpu/stage/mpi -xf -)
  ln -s orterun .gpu/stage/mpi/usr/bin/mpirun
  ln -s orterun .gpu/stage/mpi/usr/bin/mpiexec
  mapfile -t more <.gpu/stage/mpi-files
  elves+=("${more[@]}")
fi
# Every library the programs (and Open MPI's files) load, except the C runtime's own and CUDA's
# (the image has them).
for p in "${elves[@]}"; do ldd "$p" 2>/dev/null || true; done | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcublas[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/stage/lib/; done
tar -C .gpu/stage -cf - . | xz -T2 -6 >.gpu/bundle.tar.xz
rm -rf .gpu/stage
# Multi30k for train_check.sh's multi30k part (the GPU machine reaches no network): 2 MB.
mkdir -p .gpu/data && cp -r "$(scripts/fetch_multi30k.sh)" .gpu/data/
ls -la .gpu
