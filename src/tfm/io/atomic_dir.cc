#include "tfm/io/atomic_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "tfm/core/error.h"

namespace tfm::internal {

namespace fs = std::filesystem;

fs::path sibling_path(const fs::path& dir, std::string_view tag) {
  fs::path sibling = dir;
  sibling += fmt::format(".{}-{}", tag, ::getpid());
  return sibling;
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void replace_directory(const fs::path& built, const fs::path& target) {
  std::error_code ec;
  fs::path aside;
  if (fs::exists(target, ec)) {
    aside = sibling_path(target, "deleting");
    fs::remove_all(aside, ec);
    fs::rename(target, aside, ec);
    TFM_CHECK(!ec, "{}: cannot move the old directory aside to {}: {}", target.string(),
              aside.filename().string(), ec.message());
  }
  fs::rename(built, target, ec);
  if (ec) {
    const std::string reason = ec.message();
    if (!aside.empty()) fs::rename(aside, target, ec);  // the old one back
    fail("cannot rename {} to {}: {}", built.string(), target.filename().string(), reason);
  }
  sync_directory(target.parent_path());
  if (!aside.empty()) {
    fs::remove_all(aside, ec);
    TFM_CHECK(!ec, "{}: cannot remove the replaced directory: {}", aside.string(), ec.message());
  }
}

}  // namespace tfm::internal
