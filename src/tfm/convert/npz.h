// NumPy's .npz archives (a zip of .npy arrays, numpy.savez and Marian's cnpy), as Marian stores its
// models: every array with its name (the member's name less ".npy"), element type, shape and bytes.
// The zip is read with zlib's minizip, so stored and deflated members (savez, savez_compressed) and
// zip64 archives are all accepted, and every member's CRC-32 is checked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tfm/core/tensor.h"

namespace tfm::internal::convert {

struct NpyArray {
  std::string descr;           // NumPy's type string: "<f4", "<f2", "|i1", "|u1", ...
  std::vector<int64_t> shape;  // C order (Fortran-ordered arrays are refused)
  std::string bytes;           // the elements, little-endian

  int64_t numel() const;
  // The elements as an F32 tensor of the array's shape: "<f4" as is, "<f2" widened. `what` (the
  // file and the array) prefixes the error for any other type.
  Tensor to_f32(const std::string& what) const;
};

// Reads a .npy file's bytes; `what` names it in the one-line errors.
NpyArray parse_npy(const std::string& bytes, const std::string& what);

// Every array of an .npz file, by name. Errors name the file and the member: a missing or
// truncated file, a member that fails its CRC-32, a member that is not .npy.
std::map<std::string, NpyArray> read_npz(const std::filesystem::path& path);

}  // namespace tfm::internal::convert
