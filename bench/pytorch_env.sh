# Sourced by the side-by-side benchmarks: PyTorch's best settings on this machine, checked.
# Sets TCMALLOC, OPENBLAS, PYTHON and PYTORCH_ENV (the environment to run PyTorch with); needs
# SCRIPT_NAME (for messages) and TFM_BENCH (our benchmark binary) to be set by the caller.
#
# Debian's PyTorch does its f32 matrix products through libblas.so.3, which by default is the reference
# (netlib) BLAS, ~100x slower than an optimised one; OpenBLAS (libopenblas0-openmp, OpenMP like PyTorch)
# is preloaded so that the f32 baseline is a fair one, and tcmalloc as PyTorch recommends on CPU.
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4
OPENBLAS=/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
PYTHON=/usr/bin/python3  # the interpreter that has PyTorch

if [[ ! -x "$TFM_BENCH" ]]; then
  echo "$SCRIPT_NAME: $TFM_BENCH is missing; build it first (cmake --build --preset release)" >&2
  exit 1
fi
# PYTORCH=0 (bench/suite.sh's tfm rows only): PyTorch's libraries are not needed.
if [[ "${PYTORCH:-1}" == 0 ]]; then
  return 0
fi
if [[ ! -e "$TCMALLOC" ]]; then
  echo "$SCRIPT_NAME: $TCMALLOC is missing; apt-get install libgoogle-perftools4" >&2
  exit 1
fi
if [[ ! -e "$OPENBLAS" ]]; then
  echo "$SCRIPT_NAME: $OPENBLAS is missing; apt-get install libopenblas0-openmp" \
    "(without it PyTorch's f32 runs on the reference BLAS, ~100x slow)" >&2
  exit 1
fi
