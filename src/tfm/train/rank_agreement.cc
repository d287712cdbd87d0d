#include "tfm/train/rank_agreement.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "tfm/core/error.h"
#include "tfm/io/atomic_file.h"

namespace tfm::internal {

namespace fs = std::filesystem;

std::string broadcast_text(dist::Communicator& communicator, const std::string& text) {
  uint64_t size = text.size();
  communicator.broadcast(&size, sizeof size, 0);
  std::string result = communicator.rank() == 0 ? text : std::string(size, '\0');
  if (size > 0) communicator.broadcast(result.data(), size, 0);
  return result;
}

data::Vocabulary share_vocabulary(dist::Communicator& communicator,
                                  std::optional<data::Vocabulary> vocab) {
  if (communicator.rank() == 0) TFM_CHECK(vocab.has_value(), "rank 0 has no vocabulary to share");
  if (communicator.size() == 1) return std::move(*vocab);
  std::string bytes;
  if (communicator.rank() == 0) {
    std::ifstream in(vocab->path(), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    TFM_CHECK(in.good() || in.eof(), "{}: cannot read the vocabulary", vocab->path().string());
  }
  bytes = broadcast_text(communicator, bytes);
  if (communicator.rank() == 0) return std::move(*vocab);
  const fs::path copy = fs::temp_directory_path() /
                        fmt::format("tfm-vocab-rank{}-{}.model", communicator.rank(), getpid());
  write_file_atomically(copy, bytes);
  data::Vocabulary shared(copy);
  fs::remove(copy);
  return shared;
}

namespace {
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

void check_ranks_agree(dist::Communicator& communicator, const std::vector<AgreementPart>& parts) {
  if (communicator.size() == 1) return;
  for (const AgreementPart& part : parts) {
    const std::vector<uint64_t> hashes = communicator.all_gather(fnv1a(part.description));
    std::string differing;
    for (size_t r = 1; r < hashes.size(); ++r)
      if (hashes[r] != hashes[0]) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
    TFM_CHECK(differing.empty(),
              "rank{} {} of {} {} a different {} than rank 0: every rank needs the same recipe, "
              "vocabulary and data",
              differing.find(',') == std::string::npos ? "" : "s", differing, hashes.size(),
              differing.find(',') == std::string::npos ? "has" : "have", part.name);
  }
}

int local_ranks() {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && std::atoi(value) > 0) return std::atoi(value);
  }
  return 1;
}

int default_threads_per_rank() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / local_ranks());
}

}  // namespace tfm::internal
