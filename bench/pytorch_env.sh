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

# OpenBLAS picks its kernels for the CPU it finds, unless OPENBLAS_CORETYPE names a core (and
# OPENBLAS_L2_SIZE a cache size). An environment that names an older core hands PyTorch a handicap:
# one here set Haswell (AVX2 kernels on an AVX-512 CPU), and PyTorch's f32 base training step took
# 8.96 s instead of 6.10 s. The benchmarks drop both, so that OpenBLAS detects the CPU, and report the
# core it picked (OPENBLAS_CORE; SkylakeX on this machine's AMD EPYC with AVX-512).
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
OPENBLAS_CORE="$(OPENBLAS_VERBOSE=2 "$PYTHON" -c "import ctypes; ctypes.CDLL('$OPENBLAS')" 2>&1 |
  sed -n 's/^Core: //p' | head -n 1)"
OPENBLAS_CORE="${OPENBLAS_CORE:-unknown}"
