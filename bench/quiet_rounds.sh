# Sourced by the bench scripts that time rounds beside a peer: `fma_peak` prints the machine's FMA
# peak now in GFLOP/s (gemm_bench's peak_fma row, 2 threads, the best of 3 repetitions of 0.1 s),
# or nothing where build/release/gemm_bench is absent or has no such row (no AVX-512). A script
# writes "ROUND BEFORE AFTER" lines with it, and bench/quiet_rounds.py tells the quiet rounds from
# them. Needs $PYTHON, run from the project root.
fma_peak() {
  [[ -x build/release/gemm_bench ]] || return 0
  build/release/gemm_bench --benchmark_filter='^peak_fma/' --benchmark_min_time=0.1 \
    --benchmark_repetitions=3 --benchmark_format=json 2>/dev/null | "$PYTHON" bench/quiet_rounds.py peak f32
}
