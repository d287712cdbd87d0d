#!/usr/bin/env bash
# On a lent GPU machine (the device tool runs it in a copy of the repository): unpacks
# .gpu/bundle.tar.xz (scripts/gpu/bundle.sh) into build/gpu (or the build directory the bundle
# names), points the loader at its libraries and at the image's cuBLASLt, makes the build's
# absolute paths (the tests' TFM_SOURCE_DIR=/work/main) resolve to this copy, then runs the command
# given: scripts/gpu/run.sh build/gpu/tfm_tests --gtest_filter='Cuda*'
#
# A bundle of bundle.sh --mpi (build/gpu-mpi) carries Open MPI under mpi/: run.sh puts its mpirun
# first on PATH and sets the variables that relocate it, so that, as root,
#   scripts/gpu/run.sh mpirun --oversubscribe -np 2 hostname
#   scripts/gpu/run.sh build/gpu-mpi/tfm_tests --gtest_filter='CliTrainDistributed.*'
# run 2 ranks on this machine with no MPI installed (the tests' mpiexec: $TFM_MPIEXEC).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
# The bundle's build directory (build/gpu, or build/cpu-ARCH from bundle.sh --cpu-arch).
build="$(xz -dc .gpu/bundle.tar.xz | tar -xOf - ./build-dir 2>/dev/null || echo build/gpu)"
mkdir -p "$build"
xz -dc .gpu/bundle.tar.xz | tar -C "$build" -xf -
mv -f "$build"/bin/* "$build"/ 2>/dev/null || true
# The tests were compiled with TFM_SOURCE_DIR (/work/main, or the checkout the bundle names) and
# TFM_BINARY_DIR=$TFM_SOURCE_DIR/$build.
source_dir="$(cat "$build/source-dir" 2>/dev/null || echo /work/main)"
if [ "$repo" != "$source_dir" ] && [ ! -e "$source_dir" ]; then
  mkdir -p "$(dirname "$source_dir")" && ln -s "$repo" "$source_dir"
fi
cublas="$(dirname "$(find / -name 'libcublasLt.so.13*' \( -type f -o -type l \) -not -path '*/proc/*' 2>/dev/null | head -1)")"
export LD_LIBRARY_PATH="$repo/$build/lib:${cublas}:${LD_LIBRARY_PATH:-}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}"
if [ -d "$build/mpi" ]; then
  # Open MPI 4.1 from Debian 12, its files at their paths below mpi/. OPAL_PREFIX moves the
  # directories configured under the prefix (the libraries, the MCA components in pkglibdir, the
  # help files); /etc/openmpi and PMIx's and hwloc's directories are absolute, so each gets its own.
  mpi="$repo/$build/mpi" multiarch=usr/lib/x86_64-linux-gnu
  export OPAL_PREFIX="$mpi/usr" OPAL_SYSCONFDIR="$mpi/etc/openmpi"
  export PMIX_PREFIX="$mpi/$multiarch/pmix2" PMIX_PKGDATADIR="$mpi/$multiarch/pmix2/share/pmix"
  export PMIX_MCA_mca_base_component_path="$mpi/$multiarch/pmix2/lib/pmix"
  export HWLOC_PLUGINS_PATH="$mpi/$multiarch/hwloc"
  export PATH="$mpi/usr/bin:$PATH" TFM_MPIEXEC="$mpi/usr/bin/mpiexec"
  # Ranks of one host: shared memory (vader) and the ob1 messaging layer, the networks' components
  # are not in the bundle. vader's single-copy mode (CMA) needs ptrace rights a container may deny.
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # the lent machine runs as root
  # The lent machine's image has a PMIx of its own, whose compression plugin this PMIx finds and
  # cannot load (seen there: a warning for each rank); one host's ranks send nothing to compress.
  export PMIX_MCA_pcompress_base_silence_warning=1
fi
exec "$@"
