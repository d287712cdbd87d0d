// Where the tests find the source tree, the build tree (the `tfm` program) and mpiexec. Only
// build_paths.cc is compiled with these paths (CMake's definitions): every other test file's
// compile command is the same in any checkout, so a clean clone reuses ccache's objects.
#pragma once

const char* tfm_source_dir();  // the repository's root
const char* tfm_binary_dir();  // the CMake build folder (holds `tfm`)
// Open MPI's launcher: $TFM_MPIEXEC when set (a bundle's relocated Open MPI, scripts/gpu/run.sh),
// else the one found at configure time; "" in a build without MPI.
const char* tfm_mpiexec();
