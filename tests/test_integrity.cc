// Integrity of what tfm reads back: checksums in safetensors files, non-finite weights, strict
// checkpoint metadata, damaged checkpoints moved aside, the run directory's lock, averaging
// models of different vocabularies.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "model_test_util.h"
#include "temp_dir.h"
#include "tfm/io/checksum.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"
#include "tfm/train/checkpoint.h"
#include "tfm/train/run_lock.h"

namespace tfm::internal {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::TempDir;

ModelConfig small_config() {
  return testing::small_model_config();
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The offset of the data area (8 + header length) of a safetensors file's bytes.
size_t data_start(const std::string& bytes) {
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(bytes[i]);
  return 8 + header;
}

// A safetensors file with the given header and data, written by hand as another tool would.
std::string handmade_safetensors(const nlohmann::json& header, const std::string& data) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(text.size() >> (8 * i));
  return bytes + text + data;
}

TEST(Checksum, ParallelChunksGiveZlibsCrcOfTheWhole) {
  std::vector<unsigned char> data((size_t{1} << 23) + 12345);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 131 + i / 7);
  // The CRC-32 check value of "123456789" (the polynomial's catalogue entry).
  EXPECT_EQ(crc32_of("123456789", 9), 0xcbf43926u);
  // Over several chunks (checksummed in parallel and combined) it is zlib's CRC of the whole.
  const uint32_t whole = crc32_of(data.data(), data.size());
  EXPECT_EQ(whole,
            static_cast<uint32_t>(::crc32_z(::crc32_z(0, nullptr, 0), data.data(), data.size())));
  // A flipped bit anywhere changes it.
  data[data.size() - 3] ^= 0x10;
  EXPECT_NE(crc32_of(data.data(), data.size()), whole);
}

TEST(Checksum, WrittenPerTensorAndABitFlipIsCaughtNamingTheTensor) {
  TempDir tmp;
  Tensor a = Tensor::from_floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::from_floats({4}, {7, 8, 9, 10});
  write_safetensors(tmp / "t.safetensors", {{"a", a}, {"b", b}}, {{"producer", "tfm"}});
  SafeTensors ok = read_safetensors(tmp / "t.safetensors");
  EXPECT_TRUE(ok.checksums_verified);
  EXPECT_EQ(ok.metadata.size(), 1u);  // the checksums are not user metadata
  EXPECT_EQ(ok.metadata.at("producer"), "tfm");

  std::string bytes = read_bytes(tmp / "t.safetensors");
  bytes[data_start(bytes) + 6 * 4 + 5] ^= 0x01;  // one bit of b's second element
  write_bytes(tmp / "t.safetensors", bytes);
  expect_error([&] { read_safetensors(tmp / "t.safetensors"); },
               {"t.safetensors", "tensor 'b' fails its checksum", "damaged"});
}

TEST(Checksum, FilesOfOtherToolsLoadAndPartialChecksumsAreRefused) {
  TempDir tmp;
  std::string data(8, '\0');
  const float values[2] = {1.5f, -2.0f};
  std::memcpy(data.data(), values, 8);
  nlohmann::json header = {{"x", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}};
  write_bytes(tmp / "other.safetensors", handmade_safetensors(header, data));
  SafeTensors other = read_safetensors(tmp / "other.safetensors");
  EXPECT_FALSE(other.checksums_verified);
  EXPECT_EQ(other.get("x").to_floats(), (std::vector<float>{1.5f, -2.0f}));

  header["y"] = {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {8, 8}}};
  header["__metadata__"] = {{"crc32:x", crc32_hex(crc32_of(data.data(), 8))}};
  write_bytes(tmp / "partial.safetensors", handmade_safetensors(header, data));
  expect_error([&] { read_safetensors(tmp / "partial.safetensors"); },
               {"partial.safetensors", "tensor 'y' has no checksum"});
}

TEST(Safetensors, ANumberBeyondDoubleInTheHeaderIsAnErrorNamingTheFile) {
  TempDir tmp;
  const std::string header = R"({"x": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header.size() >> (8 * i));
  write_bytes(tmp / "big.safetensors", bytes + header + "abcd");
  expect_error([&] { read_safetensors(tmp / "big.safetensors"); },
               {"big.safetensors", "not valid JSON"});
}

TEST(NonFinite, FoundAtItsIndexInF32AndBf16) {
  Tensor t = Tensor::zeros({300000});
  EXPECT_EQ(first_non_finite(t), -1);
  t.data<float>()[250001] = std::numeric_limits<float>::infinity();
  t.data<float>()[123457] = std::nanf("");
  EXPECT_EQ(first_non_finite(t), 123457);
  Tensor h = Tensor::zeros({10}, DType::bf16);
  static_cast<uint16_t*>(h.raw())[7] = 0xffc0;  // a bf16 NaN
  EXPECT_EQ(first_non_finite(h), 7);
  static_cast<uint16_t*>(h.raw())[7] = 0x7f7f;  // the largest finite bf16
  EXPECT_EQ(first_non_finite(h), -1);
}

TEST(NonFinite, AModelWithANanIsRefusedNamingTheTensor) {
  TempDir tmp;
  nn::Transformer model(small_config());
  model.init(3);
  auto params = model.named_parameters();
  params[2].second.data<float>()[1] = std::nanf("");
  save_model_dir(tmp / "m", model.config(), params);
  expect_error([&] { load_model_dir(tmp / "m"); },
               {"model.safetensors", "tensor '" + params[2].first + "'", "non-finite", "nan"});
  // Averaging reads through the same loader.
  nn::Transformer good(small_config());
  save_model_dir(tmp / "g", good.config(), good.named_parameters());
  expect_error([&] { average_models({tmp / "g", tmp / "m"}, tmp / "avg"); }, {"non-finite"});
}

TEST(Average, ModelsOfDifferentVocabulariesAreRefused) {
  TempDir tmp;
  nn::Transformer model(small_config());
  for (const char* name : {"a", "b", "c"})
    save_model_dir(tmp / name, model.config(), model.named_parameters());
  write_bytes(tmp / "a" / kVocabFileName, "bpe vocabulary bytes");
  write_bytes(tmp / "b" / kVocabFileName, "unigram vocabulary bytes");
  expect_error(
      [&] {
        average_models({tmp / "a", tmp / "b"}, tmp / "avg");
      },
      {"vocab.model differs", "different vocabularies"});
  expect_error([&] { average_models({tmp / "a", tmp / "c"}, tmp / "avg"); }, {"has none"});
  write_bytes(tmp / "c" / kVocabFileName, "bpe vocabulary bytes");
  average_models({tmp / "a", tmp / "c"}, tmp / "avg");
  EXPECT_EQ(read_bytes(tmp / "avg" / kVocabFileName), "bpe vocabulary bytes");
  // The average's weights are tied to that vocabulary.
  const std::string crc = crc32_hex(crc32_of("bpe vocabulary bytes", 20));
  EXPECT_EQ(load_model_dir(tmp / "avg").metadata.at(kVocabChecksumKey), crc);
}

// A checkpoint's vocab.model (given among the extra files) is the model's: its CRC-32 is recorded.
TEST(Checkpoint, RecordsTheChecksumOfItsVocabulary) {
  TempDir tmp;
  write_bytes(tmp / kVocabFileName, "run vocabulary");
  nn::Transformer model(small_config());
  Adam adam(model.parameters());
  const fs::path dir = save_checkpoint(tmp / "ckpt", model.config(), model.named_parameters(), adam,
                                       {10, 0, 0, 1, {}}, {tmp / kVocabFileName});
  EXPECT_EQ(read_bytes(dir / kVocabFileName), "run vocabulary");
  EXPECT_EQ(load_checkpoint(dir).dir, dir);
  EXPECT_EQ(load_model_dir(dir).metadata.at(kVocabChecksumKey),
            crc32_hex(crc32_of("run vocabulary", 14)));
  write_bytes(dir / kVocabFileName, "another vocabulary");
  expect_error([&] { load_checkpoint(dir); }, {"vocab.model (crc32 ", "mixes two models' files"});
  // Saving the same step again replaces the checkpoint whole, leaving nothing beside it.
  save_checkpoint(tmp / "ckpt", model.config(), model.named_parameters(), adam, {10, 0, 0, 1, {}},
                  {tmp / kVocabFileName});
  EXPECT_EQ(read_bytes(dir / kVocabFileName), "run vocabulary");
  EXPECT_EQ(list_checkpoints(tmp / "ckpt"), std::vector<fs::path>{dir});
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(tmp / "ckpt")) ++entries;
  EXPECT_EQ(entries, 1);
}

// Saves checkpoints of `steps` with an optimizer that has taken one step.
std::vector<fs::path> save_steps(const fs::path& folder, const std::vector<int64_t>& steps) {
  nn::Transformer model(small_config());
  Adam adam(model.parameters());
  std::vector<fs::path> dirs;
  for (int64_t step : steps)
    dirs.push_back(save_checkpoint(folder, model.config(), model.named_parameters(), adam,
                                   {step, 0, 0, 1, {}}));
  return dirs;
}

TEST(Checkpoint, DamagedNewestOnesAreMovedAsideAndNeverCountTowardKeep) {
  TempDir tmp;
  const fs::path folder = tmp / "ckpt";
  auto dirs = save_steps(folder, {10, 20, 30, 40});
  // The newest `keep` (2) are damaged: one truncated, one with a flipped bit.
  fs::resize_file(dirs[3] / "model.safetensors", 200);
  std::string bytes = read_bytes(dirs[2] / "model.safetensors");
  bytes[bytes.size() - 5] ^= 0x40;
  write_bytes(dirs[2] / "model.safetensors", bytes);

  std::vector<std::string> warnings;
  auto latest =
      load_latest_checkpoint(folder, [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->state.step, 20);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[1].find("fails its checksum"), std::string::npos) << warnings[1];
  EXPECT_TRUE(fs::is_directory(folder / "step-000000040.damaged"));
  EXPECT_TRUE(fs::is_directory(folder / "step-000000030.damaged"));

  // Training goes on from step 20: its new checkpoints and the good step 20 are what is kept.
  save_steps(folder, {25});
  prune_checkpoints(folder, 2);
  auto left = list_checkpoints(folder);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].filename(), "step-000000020");
  EXPECT_EQ(left[1].filename(), "step-000000025");
  EXPECT_TRUE(fs::is_directory(folder / "step-000000030.damaged"));  // kept for inspection
}

TEST(Checkpoint, OptimizerStepsAreParsedStrictly) {
  TempDir tmp;
  auto dirs = save_steps(tmp / "ckpt", {5});
  SafeTensors opt = read_safetensors(dirs[0] / "optimizer.safetensors");
  for (const std::string bad : {"abc", "3p0", "-1", "", "99999999999999999999"}) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const std::string& name : opt.names) tensors.emplace_back(name, opt.tensors.at(name));
    write_safetensors(dirs[0] / "optimizer.safetensors", tensors, {{"steps", bad}});
    expect_error([&] { load_checkpoint(dirs[0]); },
                 {"optimizer.safetensors", "'steps' is '" + bad + "', not a non-negative integer"});
  }
}

TEST(Checkpoint, NonFiniteOptimizerMomentsMakeACheckpointDamaged) {
  TempDir tmp;
  auto dirs = save_steps(tmp / "ckpt", {5, 6});
  SafeTensors opt = read_safetensors(dirs[1] / "optimizer.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : opt.names) tensors.emplace_back(name, opt.tensors.at(name));
  tensors[1].second.data<float>()[0] = std::numeric_limits<float>::infinity();
  write_safetensors(dirs[1] / "optimizer.safetensors", tensors, opt.metadata);
  std::vector<std::string> warnings;
  auto latest =
      load_latest_checkpoint(tmp / "ckpt", [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->state.step, 5);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("non-finite"), std::string::npos) << warnings[0];
}

TEST(Checkpoint, LeftoversOfAKilledRunAreCleanedAtStartUp) {
  TempDir tmp;
  const fs::path folder = tmp / "ckpt";
  auto dirs = save_steps(folder, {1, 2});
  // A kill while pruning (older tfm: deleting in place) leaves a step folder without state.json;
  // one while pruning now leaves a ".deleting-" folder; one while saving a ".partial-" folder.
  fs::remove(dirs[0] / "state.json");
  fs::create_directories(folder / "step-000000000.deleting-77");
  fs::create_directories(folder / "step-000000003.partial-77");
  std::vector<std::string> said;
  clean_checkpoint_folder(folder, [&](const std::string& s) { said.push_back(s); });
  EXPECT_EQ(said.size(), 3u);
  EXPECT_FALSE(fs::exists(dirs[0]));
  EXPECT_FALSE(fs::exists(folder / "step-000000000.deleting-77"));
  EXPECT_FALSE(fs::exists(folder / "step-000000003.partial-77"));
  EXPECT_TRUE(fs::exists(dirs[1] / "state.json"));
}

TEST(RunLock, ASecondHolderFailsNamingTheFirstsPid) {
  TempDir tmp;
  {
    RunDirectoryLock first(tmp / "run");
    expect_error([&] { RunDirectoryLock second(tmp / "run"); },
                 {(tmp / "run").string(), "in use by another training run",
                  "pid " + std::to_string(::getpid())});
  }
  RunDirectoryLock again(tmp / "run");  // released with its holder
}

TEST(RunLock, AWaitingHolderTakesTheLockOnceTheFirstReleasesIt) {
  TempDir tmp;
  std::atomic<bool> taken = false;
  std::thread waiter;
  {
    RunDirectoryLock first(tmp / "vocab");
    waiter = std::thread([&] {
      RunDirectoryLock second(tmp / "vocab", LockWait::yes);  // the sweep's shared vocabulary
      taken = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(taken);  // still waiting: the first holds it
  }
  waiter.join();
  EXPECT_TRUE(taken);
}

TEST(RunLock, ADirectoryThatCannotBeCreatedIsNamedWithTheReason) {
  TempDir tmp;
  write_bytes(tmp / "file", "x");
  expect_error([&] { RunDirectoryLock lock(tmp / "file" / "run"); },
               {"file/run", "cannot create the run directory", "Not a directory"});
}

}  // namespace
}  // namespace tfm::internal
