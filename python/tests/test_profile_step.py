"""bench/profile_step.py: perf's samples put into parts by symbol and library, on a listing made up
here in `perf script -F pid,tid,ip,sym,dso`'s format (a real profile takes a minute under perf)."""

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import profile_step  # noqa: E402

PRODUCTS = "products (oneDNN's jitted code, libdnnl, our GEMM kernels)"
LIB = "/work/build/release/bench_train_step"


def test_our_kernels_and_onednn_are_products_wherever_the_compiler_left_them():
    cpu = "tfm::internal::cpu::avx512_bf16::"
    for sym, dso in [
        (f"void {cpu}blocked::gemm_block<{cpu}(anonymous namespace)::Bf16Kernel>(long)", LIB),
        (f"{cpu}(anonymous namespace)::Bf16Kernel::micro_kernel(long, unsigned int const*)", LIB),
        (f"{cpu}(anonymous namespace)::F32Kernel::pack_a({cpu}Strided<float>, long)", LIB),
        (f"{cpu}(anonymous namespace)::WidenedBf16Kernel::pack_b(long)", LIB),
        ("[unknown]", "/tmp/perf-123.map"),
        ("dnnl::impl::cpu::x64::brgemm_kernel_execute", "/usr/lib/libdnnl.so.2.6"),
    ]:
        assert profile_step.part_of(sym, dso) == PRODUCTS, sym


def test_other_functions_keep_their_names_without_the_instruction_set():
    cpu = "tfm::internal::cpu::avx512_bf16::"
    assert profile_step.part_of(f"{cpu}f32_to_bf16(float const*, long)", LIB) == "f32_to_bf16"
    assert profile_step.part_of("gomp_team_barrier_wait_end", "/usr/lib/libgomp.so.1") == (
        "OpenMP (libgomp: waiting at barriers and for work)")
    # A function that merely packs something is not a product.
    assert profile_step.part_of(f"{cpu}pack_rows(float const*)", LIB) == "pack_rows"


def test_shares_per_thread_from_a_listing():
    listing = "\n".join(
        [f"  100/100  7f00 {sym} ({LIB})" for sym in ["Bf16Kernel::micro_kernel(long)"] * 3]
        + [f"  100/100  7f00 backward_rows(float const*) ({LIB})"]
        + [f"  100/101  7f00 gomp_barrier_wait (/usr/lib/libgomp.so.1)"]) + "\n"
    out = subprocess.run([sys.executable, str(BENCH / "profile_step.py")], input=listing,
                         capture_output=True, text=True, check=True).stdout
    assert "75.0%  " + PRODUCTS in out
    assert "25.0%  backward_rows" in out
