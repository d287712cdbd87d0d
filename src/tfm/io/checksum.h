// Checksums that guard tfm's files against silent damage (bit flips, truncation that keeps the
// header intact): CRC-32 (zlib's, the polynomial of gzip and PNG), computed in parallel chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace tfm::internal {

// CRC-32 of `bytes` bytes at `data`. Large inputs are split into chunks checksummed on all
// threads and joined with crc32_combine, so the result equals zlib's crc32 of the whole.
uint32_t crc32_of(const void* data, size_t bytes);

// CRC-32 of a whole file, read in chunks; tfm::Error naming the file when it cannot be read.
uint32_t crc32_of_file(const std::filesystem::path& path);

// As 8 lower-case hex digits, the form stored in files.
std::string crc32_hex(uint32_t crc);

}  // namespace tfm::internal
