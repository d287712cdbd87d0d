// CPU dispatch (kernels/cpu/isa_dispatch.h): the kernel set a process chooses, TFM_CPU_ISA, and
// `tfm info --cpu`, in this process and through the built binary, which is compiled for the
// baseline x86-64 and carries every kernel set.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "data_test_util.h"
#include "text_model_test_util.h"
#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/cpu/isa_dispatch.h"

namespace tfm::internal {
namespace {

using testing::CommandResult;
using testing::quoted;
using testing::run_tfm_command;
using testing::TempDir;

int count_lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// The tests are compiled with -march=native, so their kernel set (isa.h) is this machine's best:
// the one the dispatch must choose here, whose functions the kernel tests call directly.
TEST(CpuDispatch, ChoosesTheKernelSetThisMachineCompilesFor) {
  const cpu::CpuDispatch& d = cpu::cpu_dispatch();
  ASSERT_FALSE(d.levels.empty());
  ASSERT_LT(d.chosen, d.levels.size());
  EXPECT_EQ(d.level().kernel_set, TFM_CPU_ISA_NAME);
  EXPECT_TRUE(d.level().supported);
  EXPECT_NE(d.kernels, nullptr);
  EXPECT_EQ(&d.kernels->kernel_table(), &cpu::dispatched_kernel_table());
  EXPECT_STREQ(cpu::dispatched_kernel_table().name, "CPU");
  if (d.levels.size() == 1) {  // a TFM_NATIVE=ON build
    EXPECT_EQ(d.level().name, "native");
    return;
  }
  const std::vector<std::string> names = {"x86-64-v2", "avx2", "avx512", "avx512-bf16", "amx"};
  ASSERT_EQ(d.levels.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(d.levels[i].name, names[i]);
    // Levels are cumulative: a supported level's lower ones are supported; a level above the
    // chosen one is not, and says what it lacks.
    if (i < d.chosen) {
      EXPECT_TRUE(d.levels[i].supported) << names[i];
    }
    if (i > d.chosen) {
      EXPECT_FALSE(d.levels[i].supported) << names[i];
      EXPECT_FALSE(d.levels[i].missing.empty()) << names[i];
    }
  }
  EXPECT_TRUE(d.levels[0].supported);  // every CPU these tests run on
  EXPECT_EQ(d.reason, "the highest level this CPU supports");
  EXPECT_EQ(d.onednn_cap, "");
}

// The built tfm run by the shell command `launcher` ("env VAR=...", an emulator), with `arguments`.
CommandResult run_launched(const std::string& launcher, const std::string& arguments,
                           const TempDir& dir) {
  const auto out = dir / "stdout", err = dir / "stderr";
  const std::string command = fmt::format("{} '{}/tfm' {} > {} 2> {}", launcher, tfm_binary_dir(),
                                          arguments, quoted(out), quoted(err));
  const int raw = std::system(command.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, testing::read_text(out), testing::read_text(err)};
}

// The built tfm with TFM_CPU_ISA set to `level` ("" counts as unset).
CommandResult run_with_level(const std::string& level, const std::string& arguments,
                             const TempDir& dir) {
  return run_launched(fmt::format("env TFM_CPU_ISA='{}'", level), arguments, dir);
}

// The levels `tfm info --cpu` lists as this CPU's ("in use" or "supported") and those it lacks.
struct Levels {
  std::vector<std::string> supported, lacking;
  std::string in_use;
};

Levels levels_of(const std::string& info) {
  Levels levels;
  bool in_table = false;
  for (const std::string& line : testing::lines_of(info)) {
    if (line.starts_with("levels (TFM_CPU_ISA)")) {
      in_table = true;
      continue;
    }
    if (!in_table || !line.starts_with("  ")) {
      in_table = false;
      continue;
    }
    const std::string name = line.substr(2, line.find(' ', 2) - 2);
    if (line.find(" in use ") != std::string::npos) levels.in_use = name;
    if (line.find(" lacking ") != std::string::npos)
      levels.lacking.push_back(name);
    else
      levels.supported.push_back(name);
  }
  return levels;
}

TEST(CpuDispatch, InfoCpuSaysWhatIsInUseAndWhy) {
  TempDir dir;
  const CommandResult run = run_with_level("", "info --cpu", dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.err, "");
  for (const char* part : {"cpu ", "levels (TFM_CPU_ISA)", "in use ", "oneDNN ",
                           "vdpbf16ps / FMA rate ", "precision auto ", "threads' split "})
    EXPECT_NE(run.out.find(part), std::string::npos) << part << " in\n" << run.out;
  const Levels levels = levels_of(run.out);
  const cpu::CpuDispatch& d = cpu::cpu_dispatch();
  EXPECT_EQ(levels.in_use, d.level().name) << run.out;
  EXPECT_EQ(levels.supported.size() + levels.lacking.size(), d.levels.size()) << run.out;
  EXPECT_NE(run.out.find("in use                " + d.level().name + ": " + d.reason),
            std::string::npos)
      << run.out;
}

// The blocked products' split between threads (kernels/cpu/thread_shares.h): measured rates by
// default, equal parts with TFM_CPU_SPLIT=even, none at a level without the blocked kernels.
TEST(CpuDispatch, InfoCpuSaysHowTheThreadsSplitAProduct) {
  TempDir dir;
  const std::string measured = run_launched("env -u TFM_CPU_SPLIT", "info --cpu", dir).out;
  const std::string even = run_launched("env TFM_CPU_SPLIT=even", "info --cpu", dir).out;
  if (std::string(cpu::cpu_dispatch().kernels->product_split()).empty()) {
    EXPECT_NE(measured.find("threads' split        none: the kernels in use have no blocked"),
              std::string::npos)
        << measured;
    return;
  }
  EXPECT_NE(measured.find("threads' split        measured: "), std::string::npos) << measured;
  EXPECT_NE(even.find("threads' split        even: equal parts"), std::string::npos) << even;
}

TEST(CpuDispatch, TfmCpuIsaChoosesALowerLevelAndCapsOneDnn) {
  if (cpu::cpu_dispatch().levels.size() == 1) {
    // A TFM_NATIVE=ON build has one set: any other value is refused, naming the build.
    TempDir dir;
    const CommandResult run = run_with_level("avx2", "info --cpu", dir);
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("TFM_CPU_ISA=avx2: this build has one kernel set"), std::string::npos)
        << run.err;
    return;
  }
  TempDir dir;
  const CommandResult run = run_with_level("avx2", "info --cpu", dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(levels_of(run.out).in_use, "avx2") << run.out;
  EXPECT_NE(run.out.find("in use                avx2: TFM_CPU_ISA=avx2 (the CPU's highest: " +
                         cpu::cpu_dispatch().level().name + ")"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("oneDNN                AVX2 (capped by TFM_CPU_ISA)"), std::string::npos)
      << run.out;
  // No bf16 products at avx2: precision auto is f32 whatever the CPU has.
  EXPECT_NE(run.out.find("precision auto        f32: the kernels in use have no AVX512-BF16"),
            std::string::npos)
      << run.out;
}

TEST(CpuDispatch, AnUnknownOrUnsupportedLevelIsAOneLineError) {
  TempDir dir;
  const CommandResult unknown = run_with_level("avx3", "info --cpu", dir);
  EXPECT_EQ(unknown.status, 1);
  EXPECT_EQ(count_lines(unknown.err), 1) << unknown.err;
  EXPECT_TRUE(unknown.out.empty()) << unknown.out;
  const bool native = cpu::cpu_dispatch().levels.size() == 1;
  EXPECT_NE(unknown.err.find(native ? "TFM_CPU_ISA=avx3: this build has one kernel set"
                                    : "TFM_CPU_ISA=avx3: not a level (one of x86-64-v2, avx2, "
                                      "avx512, avx512-bf16, amx)"),
            std::string::npos)
      << unknown.err;
  if (native) return;
  // A level above this CPU's, where there is one, names what the CPU lacks; on a CPU with every
  // level (AMX), the highest is in use.
  const cpu::CpuDispatch& d = cpu::cpu_dispatch();
  if (d.chosen + 1 == d.levels.size()) {
    EXPECT_EQ(d.level().name, "amx");
    return;
  }
  const cpu::IsaLevel& above = d.levels[d.chosen + 1];
  const CommandResult lacking = run_with_level(above.name, "info --cpu", dir);
  EXPECT_EQ(lacking.status, 1);
  EXPECT_EQ(count_lines(lacking.err), 1) << lacking.err;
  EXPECT_NE(lacking.err.find(fmt::format("TFM_CPU_ISA={}: this CPU lacks {} (its highest level "
                                         "is {})",
                                         above.name, above.missing, d.level().name)),
            std::string::npos)
      << lacking.err;
}

// f32 translations do not depend on the kernel set: every level this CPU has, beam 4 and greedy,
// gives the default's output, byte for byte.
TEST(CpuDispatch, EveryLevelTranslatesAlikeInF32) {
  TempDir dir;
  const auto model = testing::write_tiny_text_model(dir);
  testing::write_text(dir / "in.txt",
                      "a small house .\nthe cat sat on the mat .\nwhere is the station ?\n"
                      "two men walk along a long road near the sea .\n");
  const cpu::CpuDispatch& d = cpu::cpu_dispatch();
  for (const char* beam : {"4", "1"}) {
    const std::string arguments =
        fmt::format("translate -m {} -i {} --beam-size {} --precision f32 --threads 2",
                    quoted(model), quoted(dir / "in.txt"), beam);
    const CommandResult reference = run_with_level("", arguments, dir);
    ASSERT_EQ(reference.status, 0) << reference.err;
    ASSERT_EQ(count_lines(reference.out), 4) << reference.out;
    int compared = 0;
    for (const cpu::IsaLevel& level : d.levels) {
      if (!level.supported || level.name == "native") continue;
      const CommandResult run = run_with_level(level.name, arguments, dir);
      ASSERT_EQ(run.status, 0) << level.name << ": " << run.err;
      EXPECT_EQ(run.out, reference.out) << "TFM_CPU_ISA=" << level.name << ", beam " << beam;
      ++compared;
    }
    EXPECT_GE(compared, d.levels.size() == 1 ? 0 : 2);
  }
}

// A level forced below avx512-bf16 caps oneDNN below VNNI, whose u8 x s8 products then add pairs
// in saturating 16-bit sums (gemm:jit: 255 x 127 summed over 1024 came out 16776704, not
// 33162240): the activations take 7 bits there, as on a CPU without VNNI, and `info --cpu` says
// so; int8 translates at that level.
TEST(CpuDispatch, AForcedLevelQuantisesInt8ForItsProducts) {
  if (cpu::cpu_dispatch().levels.size() == 1) {
    EXPECT_EQ(cpu::cpu_dispatch().level().name, "native");
    return;
  }
  TempDir dir;
  const CommandResult forced_info = run_with_level("avx2", "info --cpu", dir);
  ASSERT_EQ(forced_info.status, 0) << forced_info.err;
  EXPECT_NE(forced_info.out.find("int8 products         7-bit activations (oneDNN without VNNI "
                                 "here): oneDNN's products"),
            std::string::npos)
      << forced_info.out;
  const CommandResult own_info = run_with_level("", "info --cpu", dir);
  ASSERT_EQ(own_info.status, 0) << own_info.err;
  const bool vnni = __builtin_cpu_supports("avx512vnni");
  EXPECT_NE(own_info.out.find(std::string("int8 products         ") + (vnni ? "8-bit" : "7-bit")),
            std::string::npos)
      << own_info.out;

  const auto model = testing::write_tiny_text_model(dir);
  testing::write_text(dir / "in.txt", "a small house .\nthe cat sat on the mat .\n");
  const CommandResult forced =
      run_with_level("avx2",
                     fmt::format("translate -m {} -i {} --beam-size 4 --precision int8 --threads 1",
                                 quoted(model), quoted(dir / "in.txt")),
                     dir);
  ASSERT_EQ(forced.status, 0) << forced.err;
  EXPECT_EQ(count_lines(forced.out), 2) << forced.out;
}

// The binary on older CPUs, emulated by QEMU (qemu-user, which scripts/setup.sh installs): on a
// Nehalem (x86-64-v2: no AVX) and a Haswell (AVX2, no AVX-512) it starts, takes that CPU's level,
// and translates as this CPU does. An instruction that the emulated CPU lacks would end the run
// with SIGILL.
TEST(CpuDispatch, OlderCpusTakeTheirLevelAndTranslateAlike) {
  if (cpu::cpu_dispatch().levels.size() == 1) {
    // A TFM_NATIVE=ON build is for this machine alone: nothing to run on another CPU.
    EXPECT_EQ(cpu::cpu_dispatch().level().name, "native");
    return;
  }
  const std::string qemu = "/usr/bin/qemu-x86_64";
  ASSERT_TRUE(std::filesystem::exists(qemu))
      << qemu << " is missing: scripts/setup.sh installs qemu-user";
  TempDir dir;
  const auto model = testing::write_tiny_text_model(dir);
  testing::write_text(dir / "in.txt", "a small house .\nthe cat sat on the mat .\n");
  const std::string translate =
      fmt::format("translate -m {} -i {} --beam-size 4 --precision f32 --threads 1", quoted(model),
                  quoted(dir / "in.txt"));
  const CommandResult reference = run_with_level("", translate, dir);
  ASSERT_EQ(reference.status, 0) << reference.err;
  ASSERT_EQ(count_lines(reference.out), 2) << reference.out;
  const std::pair<const char*, const char*> cpus[] = {{"Nehalem", "x86-64-v2"},
                                                      {"Haswell", "avx2"}};
  for (const auto& [model_name, level] : cpus) {
    auto run = [&](const std::string& arguments) {
      return run_launched(fmt::format("env -u TFM_CPU_ISA {} -cpu {}", qemu, model_name), arguments,
                          dir);
    };
    const CommandResult info = run("info --cpu");
    ASSERT_EQ(info.status, 0) << model_name << ": " << info.err;
    EXPECT_EQ(levels_of(info.out).in_use, level) << model_name << ":\n" << info.out;
    const CommandResult translated = run(translate);
    ASSERT_EQ(translated.status, 0) << model_name << ": " << translated.err;
    EXPECT_EQ(translated.out, reference.out) << model_name;
  }
}

}  // namespace
}  // namespace tfm::internal
