// How long an OpenMP thread that waits (at a barrier, or for the next parallel region) spins before
// it sleeps. libgomp's default is 300,000 rounds (about a millisecond): on a machine where another
// process takes a core, a thread spins through its whole time slice while the partner it waits for
// cannot run, and a translation on 2 cores becomes many times slower beside one busy process.
// 3,000 rounds (a few microseconds) keep the speed of a quiet machine and lose about half beside a
// busy process: its share of the cores (bench/contention.sh; docs/BENCHMARKS.md, "Beside a busy
// process").
#pragma once

namespace tfm::internal {

inline constexpr const char* kDefaultOpenMPSpinCount = "3000";

// libgomp reads GOMP_SPINCOUNT and OMP_WAIT_POLICY once, when it is loaded (before main; an
// executable's .preinit_array runs before the C library has its environment, so it cannot set
// them either). When the user set neither, this sets GOMP_SPINCOUNT to tfm's default and executes
// the program again (/proc/self/exe, the same arguments), which costs one program start; it
// returns when either is set, when the user binds threads (OMP_PROC_BIND, OMP_PLACES or
// GOMP_CPU_AFFINITY: libgomp has bound this thread to one place by then, and the new start would
// inherit that place as the whole process's), or when the new start fails (the program then goes
// on with libgomp's default). The Python package sets the default in its __init__.py, before the
// module loads.
void use_default_openmp_spin(char** argv);

}  // namespace tfm::internal
