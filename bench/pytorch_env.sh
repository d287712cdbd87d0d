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
# OPENBLAS_L2_SIZE a cache size). Neither is sure to give PyTorch its best: an environment may name
# Haswell (AVX2 kernels on an AVX-512 CPU), and OpenBLAS 0.3.21 (Debian 12) does not know a newer Xeon
# (family 6 model 207) and falls back to Prescott's SSE3 kernels there, a fraction of SkylakeX's rate
# (the measurements: docs/journal/2026-11-27-xeon-bf16-widened.md). So the benchmarks drop both
# variables, time OpenBLAS's sgemm (bench/openblas_sgemm.py) with the core it detects and with each of
# its AVX-512 and AVX2 cores this CPU can run, and give PyTorch the fastest: OPENBLAS_CORE says which,
# and what OpenBLAS picked by itself.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
openblas_detected="$(OPENBLAS_VERBOSE=2 "$PYTHON" -c "import ctypes; ctypes.CDLL('$OPENBLAS')" 2>&1 |
  sed -n 's/^Core: //p' | head -n 1)"
openblas_detected="${openblas_detected:-unknown}"
openblas_candidates=()
cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo)"
has_flags() {
  local flag
  for flag in "$@"; do [[ " $cpu_flags " == *" $flag "* ]] || return 1; done
}
has_flags avx512f avx512bw avx512vl avx512dq avx512_bf16 && openblas_candidates+=(Cooperlake)
has_flags avx512f avx512bw avx512vl avx512dq && openblas_candidates+=(SkylakeX)
has_flags avx2 fma && openblas_candidates+=(Haswell)
# GFLOP/s with core $1, or with the core OpenBLAS detects when $1 is empty (the variable then left
# unset: set but empty, OpenBLAS picked other kernels here); 0 if the run fails.
openblas_rate() {
  local core=()
  [[ -n "$1" ]] && core=(OPENBLAS_CORETYPE="$1")
  env "${core[@]}" OMP_NUM_THREADS="${THREADS:-2}" "$PYTHON" bench/openblas_sgemm.py "$OPENBLAS" \
    2>/dev/null || echo 0
}
openblas_best_rate="$(openblas_rate "")"
openblas_best=""
openblas_rates="$openblas_detected $openblas_best_rate"
for core in "${openblas_candidates[@]}"; do
  [[ "$core" == "$openblas_detected" ]] && continue
  rate="$(openblas_rate "$core")"
  openblas_rates+=", $core $rate"
  if ((rate > openblas_best_rate * 11 / 10)); then  # 10% faster: more than the timing's noise
    openblas_best="$core" openblas_best_rate="$rate"
  fi
done
if [[ -n "$openblas_best" ]]; then
  export OPENBLAS_CORETYPE="$openblas_best"
  OPENBLAS_CORE="$openblas_best (OpenBLAS picked $openblas_detected; sgemm GFLOP/s: $openblas_rates)"
else
  OPENBLAS_CORE="$openblas_detected (sgemm GFLOP/s: $openblas_rates)"
fi
