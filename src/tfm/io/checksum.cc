#include "tfm/io/checksum.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "tfm/core/error.h"

namespace tfm::internal {

namespace {
// Small enough to spread a 75 MB embedding over many threads, large enough that combining the
// chunk checksums (O(log chunk) each) costs nothing.
constexpr size_t kChunkBytes = size_t{1} << 22;
}  // namespace

uint32_t crc32_of(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (bytes <= kChunkBytes) return static_cast<uint32_t>(crc32_z(crc32_z(0, nullptr, 0), p, bytes));
  const auto chunks = static_cast<int64_t>((bytes + kChunkBytes - 1) / kChunkBytes);
  std::vector<uLong> crcs(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t begin = static_cast<size_t>(c) * kChunkBytes;
    const size_t length = std::min(kChunkBytes, bytes - begin);
    crcs[static_cast<size_t>(c)] = crc32_z(crc32_z(0, nullptr, 0), p + begin, length);
  }
  uLong crc = crcs[0];
  for (int64_t c = 1; c < chunks; ++c) {
    const size_t length = std::min(kChunkBytes, bytes - static_cast<size_t>(c) * kChunkBytes);
    crc = crc32_combine(crc, crcs[static_cast<size_t>(c)], static_cast<z_off_t>(length));
  }
  return static_cast<uint32_t>(crc);
}

uint32_t crc32_of_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  TFM_CHECK(in.good(), "{}: cannot open: {}", path.string(), std::strerror(errno));
  std::vector<char> buffer(kChunkBytes);
  uLong crc = crc32_z(0, nullptr, 0);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    crc = crc32_z(crc, reinterpret_cast<const unsigned char*>(buffer.data()),
                  static_cast<size_t>(in.gcount()));
  }
  TFM_CHECK(!in.bad(), "{}: cannot read: {}", path.string(), std::strerror(errno));
  return static_cast<uint32_t>(crc);
}

std::string crc32_hex(uint32_t crc) {
  return fmt::format("{:08x}", crc);
}

}  // namespace tfm::internal
