// safetensors: round trips of every dtype and odd shape, the byte layout, and every kind of bad
// file.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "temp_dir.h"
#include "tfm/io/checksum.h"
#include "tfm/io/safetensors.h"
#include "tfm/io/strict_json.h"

namespace tfm::internal {
namespace {

using testing::expect_error;
using testing::TempDir;

Tensor random_f32(const Shape& shape, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> values(static_cast<size_t>(shape.numel()));
  for (float& v : values) v = normal(rng);
  return Tensor::from_floats(shape, values);
}

Tensor random_bf16(const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(shape, DType::bf16);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < t.numel(); ++i) t.data<bf16>()[i] = float_to_bf16(normal(rng));
  return t;
}

Tensor random_i32(const Shape& shape, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> any(std::numeric_limits<int32_t>::min(),
                                             std::numeric_limits<int32_t>::max());
  std::vector<int32_t> values(static_cast<size_t>(shape.numel()));
  for (int32_t& v : values) v = any(rng);
  return Tensor::from_ints(shape, values);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file from raw parts: the 8-byte length (the header's own unless overridden), header, data.
void write_raw(const std::filesystem::path& path, const std::string& header,
               const std::string& data, std::optional<uint64_t> length = std::nullopt) {
  const uint64_t n = length.value_or(header.size());
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << bytes << header << data;
}

TEST(SafeTensors, RoundTripOfEveryDtypeAndShape) {
  std::mt19937 rng(7);
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"weights", random_f32({3, 5}, rng)},
      {"half.weights", random_bf16({4, 2, 3}, rng)},
      {"ids", random_i32({7}, rng)},
      {"empty", Tensor::empty({0, 4})},
      {"scalar", random_f32({}, rng)},
      {"rows", random_f32({6, 2}, rng).slice_rows(2, 5)},  // a view into a larger tensor
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "ünïcode ok"}};
  TempDir dir;
  const auto path = dir / "t.safetensors";
  write_safetensors(path, tensors, metadata);
  const SafeTensors read = read_safetensors(path);
  ASSERT_EQ(read.names.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(read.names[i], tensors[i].first);
    EXPECT_TRUE(same_bytes(read.get(tensors[i].first), tensors[i].second)) << tensors[i].first;
  }
  EXPECT_EQ(read.get("scalar").rank(), 0);
  EXPECT_EQ(read.get("empty").shape(), (Shape{0, 4}));
  EXPECT_EQ(read.metadata, metadata);
  EXPECT_TRUE(read.contains("ids"));
  expect_error([&] { read.get("nope"); }, {"no tensor named 'nope'"});

  // Overwriting goes through a temporary file that does not stay behind.
  write_safetensors(path, {tensors[0]});
  EXPECT_EQ(read_safetensors(path).names, std::vector<std::string>{"weights"});
  EXPECT_TRUE(read_safetensors(path).metadata.empty());
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path()))
    ++files;
  EXPECT_EQ(files, 1);
}

TEST(SafeTensors, ByteLayoutIsThePublicFormat) {
  std::mt19937 rng(3);
  const Tensor a = random_f32({2, 3}, rng);
  const Tensor b = random_i32({5}, rng);
  TempDir dir;
  const auto path = dir / "layout.safetensors";
  write_safetensors(path, {{"a", a}, {"b", b}}, {{"k", "v"}});
  const std::string bytes = file_bytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);  // the data area is 8-byte aligned
  ASSERT_EQ(bytes.size(), 8 + n + 24 + 20);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));  // trailing spaces are JSON space
  EXPECT_EQ(header["a"]["dtype"], "F32");
  EXPECT_EQ(header["a"]["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json::array({0, 24}));
  EXPECT_EQ(header["b"]["dtype"], "I32");
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json::array({24, 44}));
  EXPECT_EQ(header["__metadata__"]["k"], "v");
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n, a.raw(), 24), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + 24, b.raw(), 20), 0);
}

TEST(SafeTensors, ReadsAFileWrittenByHandInAnotherOrder) {
  // Header keys in one order, data in another, no padding, metadata last: all allowed.
  std::mt19937 rng(11);
  const Tensor x = random_f32({2, 2}, rng);
  const Tensor y = random_bf16({3}, rng);
  std::string data(static_cast<const char*>(y.raw()), 6);
  data.append(static_cast<const char*>(x.raw()), 16);
  TempDir dir;
  const auto path = dir / "hand.safetensors";
  write_raw(path,
            R"({"x":{"dtype":"F32","shape":[2,2],"data_offsets":[6,22]},)"
            R"("y":{"shape":[3],"dtype":"BF16","data_offsets":[0,6]},"__metadata__":{"a":"b"}})",
            data);
  const SafeTensors read = read_safetensors(path);
  EXPECT_EQ(read.names, (std::vector<std::string>{"y", "x"}));  // data order
  EXPECT_TRUE(same_bytes(read.get("x"), x));
  EXPECT_TRUE(same_bytes(read.get("y"), y));
  EXPECT_EQ(read.metadata.at("a"), "b");
}

TEST(SafeTensors, EmptyFileOfTensors) {
  TempDir dir;
  const auto path = dir / "none.safetensors";
  write_safetensors(path, {});
  EXPECT_TRUE(read_safetensors(path).names.empty());
}

TEST(SafeTensors, BadFilesNameTheFileAndTheProblem) {
  TempDir dir;
  const std::string f32_2x3 = R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  const std::string data24(24, '\x11');
  struct Case {
    std::string name;
    std::function<void(const std::filesystem::path&)> write;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"shorter_than_8",
       [](auto& p) { std::ofstream(p, std::ios::binary) << "abcde"; },
       {"5 bytes, shorter than the 8-byte header length"}},
      {"length_too_large",
       [&](auto& p) { write_raw(p, f32_2x3, data24, 1000); },
       {"header length 1000 exceeds the"}},
      {"not_json",
       [&](auto& p) { write_raw(p, "{\"t\": [1, 2", data24); },
       {"header: not valid JSON"}},
      {"not_object",
       [&](auto& p) { write_raw(p, "[1, 2]", data24); },
       {"header is not a JSON object"}},
      {"unknown_dtype",
       [&](auto& p) {
         write_raw(p, R"({"t":{"dtype":"Q7","shape":[2,3],"data_offsets":[0,24]}})", data24);
       },
       {"tensor 't'", "unknown dtype 'Q7'"}},
      {"unsupported_dtype",
       [&](auto& p) {
         write_raw(p, R"({"t":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]}})",
                   std::string(12, 'x'));
       },
       {"dtype 'F16' is not supported"}},
      {"size_mismatch",
       [&](auto& p) {
         write_raw(p, R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                   std::string(20, 'x'));
       },
       {"tensor 't'", "hold 20 bytes, but F32 shape [2, 3] needs 24 bytes"}},
      {"reversed_offsets",
       [&](auto& p) {
         write_raw(p, R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", "");
       },
       {"data_offsets must be [begin, end]"}},
      {"negative_dim",
       [&](auto& p) {
         write_raw(p, R"({"t":{"dtype":"F32","shape":[-2,3],"data_offsets":[0,24]}})", data24);
       },
       {"shape must be an array of non-negative integers"}},
      {"missing_field",
       [&](auto& p) { write_raw(p, R"({"t":{"dtype":"F32","data_offsets":[0,24]}})", data24); },
       {"tensor 't': header entry lacks 'shape'"}},
      {"extra_field",
       [&](auto& p) {
         write_raw(p, R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24],"x":1}})", data24);
       },
       {"unexpected header field 'x'"}},
      {"bad_metadata",
       [&](auto& p) {
         write_raw(p,
                   R"({"__metadata__":{"step":5},"t":{"dtype":"F32","shape":[2,3],)"
                   R"("data_offsets":[0,24]}})",
                   data24);
       },
       {"__metadata__ value of 'step' must be a string"}},
      {"data_truncated",
       [&](auto& p) { write_raw(p, f32_2x3, std::string(16, 'x')); },
       {"tensor 't' ends at byte 24", "only 16 bytes", "truncated"}},
      {"overlap",
       [&](auto& p) {
         write_raw(p,
                   R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                   R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                   data24);
       },
       {"tensors 'a' and 'b' overlap"}},
      {"hole",
       [&](auto& p) {
         write_raw(p,
                   R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[20,24]}})",
                   data24);
       },
       {"4 bytes between tensors 'a' and 'b' belong to no tensor"}},
      {"hole_at_start",
       [&](auto& p) {
         write_raw(p, R"({"a":{"dtype":"I32","shape":[4],"data_offsets":[8,24]}})", data24);
       },
       {"8 bytes before tensor 'a' belong to no tensor"}},
      {"trailing_bytes",
       [&](auto& p) { write_raw(p, f32_2x3, data24 + "abcd"); },
       {"4 bytes after the last tensor belong to no tensor"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = dir / (c.name + ".safetensors");
    c.write(path);
    try {
      read_safetensors(path);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_NE(message.find(path.string()), std::string::npos) << message;
      for (const std::string& part : c.expected)
        EXPECT_NE(message.find(part), std::string::npos) << message << "\n  lacks: " << part;
    }
  }
  const auto missing = dir / "missing.safetensors";
  expect_error([&] { read_safetensors(missing); }, {missing.string(), "No such file or directory"});
  expect_error([&] { read_safetensors(dir.path()); }, {dir.path().string(), "is a directory"});
}

TEST(SafeTensors, DuplicateKeysAreRefused) {
  // nlohmann::json keeps the last of repeated keys: a second "__metadata__" without checksums
  // would hide a damaged data area. Every repeated key is an error naming the file and the key.
  TempDir dir;
  const Tensor t = Tensor::full({2, 3}, 1.5f);
  const std::string crc = crc32_hex(crc32_of(t.raw(), t.nbytes()));
  std::string damaged(static_cast<const char*>(t.raw()), 24);
  damaged[5] = static_cast<char>(damaged[5] ^ 0x10);
  const std::string entry = R"("t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"__metadata__":{"crc32:t":")" + crc + R"("},)" + entry +
           R"(,"__metadata__":{"producer":"x"}})",
       R"(duplicate key "__metadata__")"},
      {"{" + entry + "," + entry + "}", R"(duplicate key "t")"},
      {R"({"t":{"dtype":"F32","dtype":"I32","shape":[2,3],"data_offsets":[0,24]}})",
       R"(duplicate key "dtype" in "t")"},
      {R"({"__metadata__":{"crc32:t":")" + crc + R"(","crc32:t":"00000000"},)" + entry + "}",
       R"(duplicate key "crc32:t" in "__metadata__")"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].first);
    const auto path = dir / ("dup" + std::to_string(i) + ".safetensors");
    write_raw(path, cases[i].first, damaged);
    expect_error([&] { read_safetensors(path); }, {path.string(), cases[i].second});
  }
}

TEST(StrictJson, RefusesRepeatedKeysAtAnyDepth) {
  EXPECT_EQ(parse_strict_json(R"({"a":[{"b":1},{"b":2}],"c":{"b":3}})", "x")["c"]["b"], 3);
  expect_error([] { parse_strict_json(R"({"a":1,"a":1})", "f.json"); },
               {R"(f.json: duplicate key "a")"});
  expect_error([] { parse_strict_json(R"({"a":[{"b":1,"b":2}]})", "f.json"); },
               {R"(duplicate key "b" in "a")"});
  expect_error([] { parse_strict_ordered_json(R"({"q":"x","q":"y"})", "request"); },
               {R"(request: duplicate key "q")"});
  expect_error([] { parse_strict_json("{\"a\":1e400}", "f.json"); }, {"f.json: not valid JSON"});
  expect_error([] { parse_strict_json("{", "f.json"); }, {"f.json: not valid JSON"});
}

TEST(SafeTensors, WriteRejectsBadNames) {
  TempDir dir;
  const auto path = dir / "w.safetensors";
  const Tensor t = Tensor::full({2}, 1.5f);
  expect_error(
      [&] {
        write_safetensors(path, {{"a", t}, {"a", t}});
      },
      {"w.safetensors", "'a' given twice"});
  expect_error([&] { write_safetensors(path, {{"__metadata__", t}}); }, {"invalid tensor name"});
  expect_error([&] { write_safetensors(path, {{"u", Tensor()}}); }, {"'u' is undefined"});
  EXPECT_FALSE(std::filesystem::exists(path));
  expect_error(
      [&] {
        write_safetensors(dir / "no" / "dir.safetensors", {{"a", t}});
      },
      {"dir.safetensors", "cannot create"});
}

}  // namespace
}  // namespace tfm::internal
