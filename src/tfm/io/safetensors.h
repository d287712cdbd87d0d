// The safetensors file format (https://github.com/huggingface/safetensors), read and written so
// that PyTorch and others can load tfm's models and the reverse:
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   JSON header: {"<name>": {"dtype": "F32"|"BF16"|"I32", "shape": [...],
//             "data_offsets": [begin, end]}, ..., "__metadata__": {"<key>": "<value>"}} (optional),
//             padded with spaces so that the data area starts at a multiple of 8
//   the rest  the data area: each tensor's elements, row-major little-endian, at [begin, end)
//             relative to the start of the data area; the tensors cover it exactly, without gaps
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/core/tensor.h"

namespace tfm::internal {

struct SafeTensors {
  std::vector<std::string> names;               // in the order of their data in the file
  std::map<std::string, Tensor> tensors;        // by name
  std::map<std::string, std::string> metadata;  // without the checksums (below)
  // Whether the file carried a CRC-32 per tensor in its __metadata__ ("crc32:<name>") and every
  // tensor matched it. Files written by other tools have none and load unchecked.
  bool checksums_verified = false;

  bool contains(const std::string& name) const { return tensors.count(name) != 0; }
  // The tensor of that name; tfm::Error when there is none.
  const Tensor& get(const std::string& name) const;
};

// The format's name of a dtype: "F32", "BF16" or "I32".
std::string_view safetensors_dtype_name(DType dtype);

// Reads and validates the whole file. Every defect (missing file, truncated file, header length
// beyond the file, header not a JSON object, unsupported dtype, offsets that disagree with the
// shape, overlap, holes or data beyond the end, a tensor that fails its checksum) throws tfm::Error
// naming the file and the problem.
SafeTensors read_safetensors(const std::filesystem::path& path);

// Writes the tensors (CPU, f32/bf16/i32) in the given order, atomically (temporary file, fsync,
// rename), with each tensor's CRC-32 in the metadata. Names must be unique, non-empty and not
// "__metadata__".
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace tfm::internal
