#include "tfm/io/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "tfm/core/error.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/checksum.h"
#include "tfm/io/strict_json.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal {

// The data area is copied as is: the format is little-endian, and so is every machine tfm targets.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

namespace {

using Json = nlohmann::ordered_json;

// The reference implementation refuses larger headers; so do we, before allocating them.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// One tensor's header entry, checked on its own (not yet against the others or the file size).
struct Entry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

DType parse_dtype(const std::string& name, const Json& value) {
  TFM_CHECK(value.is_string(), "tensor '{}': dtype must be a string, got {}", name, value.dump());
  const std::string dtype = value.get<std::string>();
  if (dtype == "F32") return DType::f32;
  if (dtype == "BF16") return DType::bf16;
  if (dtype == "I32") return DType::i32;
  static const std::set<std::string> other_safetensors_dtypes = {
      "BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "U32", "I64", "U64", "F64"};
  if (other_safetensors_dtypes.count(dtype))
    fail("tensor '{}': dtype '{}' is not supported (tfm reads F32, BF16 and I32)", name, dtype);
  fail("tensor '{}': unknown dtype '{}' (tfm reads F32, BF16 and I32)", name, dtype);
}

Shape parse_shape(const std::string& name, const Json& value) {
  TFM_CHECK(value.is_array() && std::all_of(value.begin(), value.end(),
                                            [](const Json& d) { return d.is_number_unsigned(); }),
            "tensor '{}': shape must be an array of non-negative integers, got {}", name,
            value.dump());
  TFM_CHECK(value.size() <= static_cast<size_t>(Shape::kMaxRank),
            "tensor '{}': shape {} has rank {}, above tfm's limit of {}", name, value.dump(),
            value.size(), Shape::kMaxRank);
  // The element count must fit comfortably in int64 (Shape::numel) before the shape is built.
  std::vector<int64_t> dims;
  uint64_t numel = 1;
  bool too_large = false;
  for (const Json& d : value) {
    uint64_t dim = d.get<uint64_t>();
    too_large =
        too_large || dim > (uint64_t{1} << 48) || __builtin_mul_overflow(numel, dim, &numel);
    if (!too_large) dims.push_back(static_cast<int64_t>(dim));
  }
  TFM_CHECK(!too_large && numel <= (uint64_t{1} << 56), "tensor '{}': shape {} is too large", name,
            value.dump());
  return Shape(dims);
}

Entry parse_entry(const std::string& name, const Json& value) {
  TFM_CHECK(value.is_object(),
            "tensor '{}': header entry must be an object with dtype, shape and data_offsets", name);
  for (auto it = value.begin(); it != value.end(); ++it)
    TFM_CHECK(it.key() == "dtype" || it.key() == "shape" || it.key() == "data_offsets",
              "tensor '{}': unexpected header field '{}'", name, it.key());
  for (const char* field : {"dtype", "shape", "data_offsets"})
    TFM_CHECK(value.contains(field), "tensor '{}': header entry lacks '{}'", name, field);
  Entry e;
  e.name = name;
  e.dtype = parse_dtype(name, value["dtype"]);
  e.shape = parse_shape(name, value["shape"]);
  const Json& offsets = value["data_offsets"];
  TFM_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                offsets[1].is_number_unsigned() &&
                offsets[0].get<uint64_t>() <= offsets[1].get<uint64_t>(),
            "tensor '{}': data_offsets must be [begin, end] with 0 <= begin <= end, got {}", name,
            offsets.dump());
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  const uint64_t needed = static_cast<uint64_t>(e.shape.numel()) * dtype_size(e.dtype);
  TFM_CHECK(e.end - e.begin == needed,
            "tensor '{}': data_offsets [{}, {}] hold {} bytes, but {} shape {} needs {} bytes",
            name, e.begin, e.end, e.end - e.begin, safetensors_dtype_name(e.dtype), e.shape.str(),
            needed);
  return e;
}

std::map<std::string, std::string> parse_metadata(const Json& value) {
  TFM_CHECK(value.is_object(), "__metadata__ must be an object of strings, got {}",
            value.type_name());
  std::map<std::string, std::string> metadata;
  for (auto it = value.begin(); it != value.end(); ++it) {
    TFM_CHECK(it.value().is_string(), "__metadata__ value of '{}' must be a string, got {}",
              it.key(), it.value().dump());
    metadata[it.key()] = it.value().get<std::string>();
  }
  return metadata;
}

// safetensors requires the tensors to tile the data area exactly: no overlap, no gap, no tail.
void check_coverage(std::vector<Entry>& entries, uint64_t data_bytes) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    TFM_CHECK(e.end <= data_bytes,
              "tensor '{}' ends at byte {} of the data area, which has only {} bytes: the file is "
              "truncated",
              e.name, e.end, data_bytes);
    if (e.begin < covered)
      fail("tensors '{}' and '{}' overlap: data_offsets [{}, {}] and [{}, {}]", previous->name,
           e.name, previous->begin, previous->end, e.begin, e.end);
    if (e.begin > covered) {
      if (previous == nullptr)
        fail(
            "the {} bytes before tensor '{}' belong to no tensor (safetensors requires the "
            "tensors to cover the data area contiguously)",
            e.begin, e.name);
      fail(
          "the {} bytes between tensors '{}' and '{}' belong to no tensor (safetensors requires "
          "the tensors to cover the data area contiguously)",
          e.begin - covered, previous->name, e.name);
    }
    covered = e.end;
    previous = &e;
  }
  TFM_CHECK(covered == data_bytes,
            "the {} bytes after the last tensor belong to no tensor (safetensors requires the "
            "tensors to cover the data area contiguously)",
            data_bytes - covered);
}

// Each tensor's CRC-32 is stored as "__metadata__": {"crc32:<name>": "<8 hex digits>"}: other
// readers ignore it, tfm verifies it. A file without any such key (written by another tool) loads
// unchecked; one with some tensors lacking their checksum has been edited and is refused.
const std::string kChecksumPrefix = "crc32:";

void verify_checksums(SafeTensors& result) {
  std::set<std::string> checked;
  for (auto it = result.metadata.begin(); it != result.metadata.end();) {
    if (!it->first.starts_with(kChecksumPrefix)) {
      ++it;
      continue;
    }
    const std::string name = it->first.substr(kChecksumPrefix.size());
    auto tensor = result.tensors.find(name);
    TFM_CHECK(tensor != result.tensors.end(),
              "__metadata__ has a checksum of '{}', which is not a tensor of the file", name);
    const std::string computed = crc32_hex(crc32_of(tensor->second.raw(), tensor->second.nbytes()));
    TFM_CHECK(computed == it->second,
              "tensor '{}' fails its checksum (crc32 {}, stored {}): the file is damaged", name,
              computed, it->second);
    checked.insert(name);
    it = result.metadata.erase(it);
  }
  if (checked.empty()) return;
  for (const std::string& name : result.names)
    TFM_CHECK(checked.count(name),
              "tensor '{}' has no checksum while {} others have one: the file was altered", name,
              checked.size());
  result.checksums_verified = true;
}

uint64_t read_u64_le(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::bf16:
      return "BF16";
    case DType::i32:
      return "I32";
    case DType::i8:
      return "I8";
  }
  return "?";
}

const Tensor& SafeTensors::get(const std::string& name) const {
  auto it = tensors.find(name);
  TFM_CHECK(it != tensors.end(), "no tensor named '{}'", name);
  return it->second;
}

SafeTensors read_safetensors(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  // The type first: a FIFO would block the open, a device (a link to /dev/zero) read on forever.
  const std::optional<std::string> problem = file_type_problem(path);
  TFM_CHECK(!problem, "{}: {}", file, problem.value_or(""));
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  TFM_CHECK(!ec, "{}: cannot read the file size: {}", file, ec.message());
  std::ifstream in(path, std::ios::binary);
  TFM_CHECK(in.good(), "{}: cannot open: {}", file, std::strerror(errno));
  TFM_CHECK(file_bytes >= 8,
            "{}: the file is {} bytes, shorter than the 8-byte header length (truncated or not a "
            "safetensors file)",
            file, file_bytes);

  std::array<unsigned char, 8> length_bytes{};
  in.read(reinterpret_cast<char*>(length_bytes.data()), 8);
  const uint64_t header_bytes = read_u64_le(length_bytes.data());
  TFM_CHECK(header_bytes <= file_bytes - 8,
            "{}: header length {} exceeds the {} bytes that follow it (truncated or not a "
            "safetensors file)",
            file, header_bytes, file_bytes - 8);
  TFM_CHECK(header_bytes <= kMaxHeaderBytes,
            "{}: header length {} is above the format's limit of {}", file, header_bytes,
            kMaxHeaderBytes);
  std::string header_text(header_bytes, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(header_bytes));
  TFM_CHECK(in.good(), "{}: cannot read the header", file);

  SafeTensors result;
  std::vector<Entry> entries;
  try {
    // A repeated key is refused: a second "__metadata__" would replace the checksums.
    const Json header = parse_strict_ordered_json(header_text, "header");
    TFM_CHECK(header.is_object(), "header is not a JSON object (it is {})", header.type_name());
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__")
        result.metadata = parse_metadata(it.value());
      else
        entries.push_back(parse_entry(it.key(), it.value()));
    }
    check_coverage(entries, file_bytes - 8 - header_bytes);
  } catch (const Error& e) {
    fail("{}: {}", file, e.what());
  }

  // Contiguous coverage means the data area is read front to back in the sorted order.
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(e.end - e.begin));
    TFM_CHECK(in.good() || e.end == e.begin, "{}: cannot read the data of tensor '{}'", file,
              e.name);
    result.names.push_back(e.name);
    result.tensors.emplace(e.name, std::move(t));
  }
  try {
    verify_checksums(result);
  } catch (const Error& e) {
    fail("{}: {}", file, e.what());
  }
  return result;
}

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& device_tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string file = path.string();
  // Tensors on a GPU are written from host copies: the file is the same whichever device wrote it.
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.reserve(device_tensors.size());
  for (const auto& [name, tensor] : device_tensors)
    tensors.emplace_back(name, tensor.defined() ? tensor.to(Device::cpu) : tensor);
  Json header = Json::object();
  std::map<std::string, std::string> all_metadata = metadata;
  for (const auto& [name, tensor] : tensors)
    if (tensor.defined() && tensor.device() == Device::cpu)
      all_metadata[kChecksumPrefix + name] = crc32_hex(crc32_of(tensor.raw(), tensor.nbytes()));
  if (!all_metadata.empty()) header["__metadata__"] = all_metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    TFM_CHECK(!name.empty() && name != "__metadata__", "{}: invalid tensor name '{}'", file, name);
    TFM_CHECK(seen.insert(name).second, "{}: tensor name '{}' given twice", file, name);
    TFM_CHECK(tensor.defined(), "{}: tensor '{}' is undefined", file, name);
    TFM_CHECK(tensor.device() == Device::cpu, "{}: tensor '{}' is not on the CPU", file, name);
    const uint64_t end = offset + tensor.nbytes();
    header[name] = {{"dtype", safetensors_dtype_name(tensor.dtype())},
                    {"shape", tensor.shape().to_vector()},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail("{}: cannot encode the header (tensor names must be UTF-8): {}", file, e.what());
  }
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::array<unsigned char, 8> length_bytes{};
  for (int i = 0; i < 8; ++i)
    length_bytes[i] = static_cast<unsigned char>(header_text.size() >> (8 * i));
  AtomicFileWriter writer(path);
  writer.write(length_bytes.data(), length_bytes.size());
  writer.write(header_text);
  for (const auto& [name, tensor] : tensors) writer.write(tensor.raw(), tensor.nbytes());
  writer.commit();
}

}  // namespace tfm::internal
