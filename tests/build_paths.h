// Where the tests find the source tree, the build tree (the `tfm` program) and mpiexec. Only
// build_paths.cc is compiled with these paths (CMake's definitions): every other test file's
// compile command is the same in any checkout, so a clean clone reuses ccache's objects.
#pragma once

const char* tfm_source_dir();  // the repository's root
const char* tfm_binary_dir();  // the CMake build folder (holds `tfm`)
const char* tfm_mpiexec();     // Open MPI's launcher; "" in a build without MPI
