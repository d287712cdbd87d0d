#include "tfm/convert/npz.h"

#include <minizip/unzip.h>

#include <bit>
#include <cstring>
#include <memory>
#include <regex>

#include "tfm/core/error.h"

namespace tfm::internal::convert {

namespace {

// IEEE 754 binary16 -> binary32 (subnormals, infinities and NaNs included).
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    while ((mantissa & 0x400) == 0) {  // normalise the subnormal
      mantissa <<= 1;
      --exponent;
    }
    ++exponent;
    mantissa &= 0x3ff;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// The value of `key` in the .npy header dict ({'descr': '<f4', 'fortran_order': False, 'shape':
// (2, 3), }), as its source text.
std::string header_value(const std::string& header, const std::string& key,
                         const std::string& what) {
  const std::regex pattern("['\"]" + key + "['\"]\\s*:\\s*('[^']*'|\\([^)]*\\)|[A-Za-z]+)");
  std::smatch match;
  TFM_CHECK(std::regex_search(header, match, pattern), "{}: .npy header has no '{}': {}", what, key,
            one_line(header));
  return match[1].str();
}

std::vector<int64_t> parse_shape(const std::string& text, const std::string& what) {
  std::vector<int64_t> shape;
  const std::regex number("\\d+");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), number);
       it != std::sregex_iterator(); ++it) {
    TFM_CHECK(it->str().size() < 12, "{}: dimension {} is too large", what, it->str());
    shape.push_back(std::stoll(it->str()));
  }
  return shape;
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor NpyArray::to_f32(const std::string& what) const {
  TFM_CHECK(shape.size() <= 6, "{}: rank {} (at most 6)", what, shape.size());
  Tensor tensor = Tensor::empty(Shape(shape));
  float* out = tensor.data<float>();
  if (descr == "<f4") {
    if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
  } else if (descr == "<f2") {
    for (int64_t i = 0; i < numel(); ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = half_to_float(h);
    }
  } else {
    fail("{}: element type '{}' is not supported (float32 '<f4' or float16 '<f2')", what, descr);
  }
  return tensor;
}

NpyArray parse_npy(const std::string& bytes, const std::string& what) {
  TFM_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0,
            "{}: not a .npy array (no \\x93NUMPY magic)", what);
  const int major = static_cast<unsigned char>(bytes[6]);
  TFM_CHECK(major >= 1 && major <= 3, "{}: .npy version {} is not supported", what, major);
  const size_t length_bytes = major == 1 ? 2 : 4;
  size_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i)
    header_length |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  const size_t data_begin = 8 + length_bytes + header_length;
  TFM_CHECK(data_begin <= bytes.size(), "{}: .npy header runs past the end (truncated)", what);
  const std::string header = bytes.substr(8 + length_bytes, header_length);

  NpyArray array;
  array.descr = header_value(header, "descr", what);
  array.descr = array.descr.substr(1, array.descr.size() - 2);
  TFM_CHECK(header_value(header, "fortran_order", what) == "False",
            "{}: Fortran-ordered arrays are not supported", what);
  array.shape = parse_shape(header_value(header, "shape", what), what);
  TFM_CHECK(array.descr.size() >= 3 && (array.descr[0] == '<' || array.descr[0] == '|'),
            "{}: element type '{}' is not little-endian", what, array.descr);
  const int64_t item = std::stoll(array.descr.substr(2));
  const int64_t expected = array.numel() * item;
  const int64_t present = static_cast<int64_t>(bytes.size() - data_begin);
  TFM_CHECK(present == expected, "{}: {} bytes of data, expected {} for shape {} of '{}'{}", what,
            present, expected, fmt::join(array.shape, "x"), array.descr,
            present < expected ? " (truncated)" : "");
  array.bytes = bytes.substr(data_begin);
  return array;
}

std::map<std::string, NpyArray> read_npz(const std::filesystem::path& path) {
  const std::string file = path.string();
  TFM_CHECK(std::filesystem::is_regular_file(path), "{}: no such file", file);
  const std::unique_ptr<void, int (*)(unzFile)> zip(unzOpen64(file.c_str()), unzClose);
  TFM_CHECK(zip != nullptr, "{}: not a zip archive (.npz), or truncated", file);
  std::map<std::string, NpyArray> arrays;
  for (int status = unzGoToFirstFile(zip.get()); status != UNZ_END_OF_LIST_OF_FILE;
       status = unzGoToNextFile(zip.get())) {
    TFM_CHECK(status == UNZ_OK, "{}: damaged zip directory (minizip error {})", file, status);
    unz_file_info64 info;
    char name[4096];
    TFM_CHECK(unzGetCurrentFileInfo64(zip.get(), &info, name, sizeof name, nullptr, 0, nullptr,
                                      0) == UNZ_OK,
              "{}: damaged zip entry", file);
    std::string member = name;
    const std::string what = file + ": array '" + member + "'";
    TFM_CHECK(info.uncompressed_size < (uint64_t{1} << 40), "{}: too large", what);
    TFM_CHECK(unzOpenCurrentFile(zip.get()) == UNZ_OK, "{}: cannot be opened", what);
    std::string bytes(info.uncompressed_size, '\0');
    const int read = bytes.empty() ? 0
                                   : unzReadCurrentFile(zip.get(), bytes.data(),
                                                        static_cast<unsigned>(bytes.size()));
    const int closed = unzCloseCurrentFile(zip.get());
    TFM_CHECK(read == static_cast<int>(bytes.size()), "{}: truncated or damaged (read {} of {})",
              what, read, bytes.size());
    TFM_CHECK(closed == UNZ_OK, "{}: fails its CRC-32: the file is damaged", what);
    if (member.ends_with(".npy")) member.resize(member.size() - 4);
    arrays[member] = parse_npy(bytes, file + ": array '" + member + "'");
  }
  return arrays;
}

}  // namespace tfm::internal::convert
