"""GFLOP/s of OpenBLAS's sgemm on 1024 x 1024 x 1024, the best of 8 calls: how fast PyTorch's f32
products run with the OpenBLAS core this process got (OPENBLAS_CORETYPE, or the one OpenBLAS detects).
bench/pytorch_env.sh runs it once per core to give PyTorch the fastest.

Usage: openblas_sgemm.py LIBBLAS_SO
"""
import ctypes
import sys
import time

import numpy as np

N = 1024


def main():
    blas = ctypes.CDLL(sys.argv[1])
    a, b = (np.random.default_rng(seed).random((N, N), dtype=np.float32) for seed in (1, 2))
    c = np.zeros((N, N), dtype=np.float32)

    def pointer(x):
        return x.ctypes.data_as(ctypes.c_void_p)

    def sgemm():  # row-major, no transposes: c = a b
        blas.cblas_sgemm(101, 111, 111, N, N, N, ctypes.c_float(1.0), pointer(a), N, pointer(b), N,
                         ctypes.c_float(0.0), pointer(c), N)

    sgemm()
    best = float("inf")
    for _ in range(8):
        start = time.perf_counter()
        sgemm()
        best = min(best, time.perf_counter() - start)
    print(f"{2 * N**3 / best / 1e9:.0f}")


if __name__ == "__main__":
    main()
