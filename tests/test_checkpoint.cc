#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "temp_dir.h"
#include "tfm/autograd/tape.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"
#include "tfm/train/checkpoint.h"

namespace tfm::internal {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

ModelConfig small_config() {
  return testing::small_model_config();
}

// Gives every parameter a gradient so that Adam's moments become non-zero.
void fake_step(nn::Transformer& model, Adam& adam, float g) {
  for (Tensor& p : model.parameters()) grad_target(p).tensor.fill(g);
  adam.step(1e-3);
  adam.zero_grad();
}

TEST(Checkpoint, RoundTripsModelOptimizerAndState) {
  TempDir tmp;
  nn::Transformer model(small_config());
  model.init(5);
  Adam adam(model.parameters());
  fake_step(model, adam, 0.25f);
  fake_step(model, adam, -0.5f);
  TrainingState state{2, 1, 7, 42, {{"elapsed_s", 12.5}}};
  fs::path dir =
      save_checkpoint(tmp / "ckpt", model.config(), model.named_parameters(), adam, state);
  EXPECT_EQ(dir.filename(), "step-000000002");

  Checkpoint c = load_checkpoint(dir);
  EXPECT_EQ(c.config, model.config());
  EXPECT_EQ(c.state.step, 2);
  EXPECT_EQ(c.state.epoch, 1);
  EXPECT_EQ(c.state.batch_in_epoch, 7);
  EXPECT_EQ(c.state.seed, 42u);
  EXPECT_EQ(c.state.extra["elapsed_s"], 12.5);
  EXPECT_EQ(c.adam_steps, 2);
  auto params = model.named_parameters();
  ASSERT_EQ(c.parameters.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(c.parameters[i].second.to_floats(), params[i].second.to_floats());
    EXPECT_EQ(c.adam_m[i].to_floats(), adam.first_moments()[i].to_floats());
    EXPECT_EQ(c.adam_v[i].to_floats(), adam.second_moments()[i].to_floats());
  }
  EXPECT_NE(adam.second_moments()[0].to_floats()[0], 0.0f);
  // A checkpoint is a model directory.
  EXPECT_EQ(load_model_dir(dir).parameters.size(), params.size());
}

TEST(Checkpoint, InterruptedWriteIsIgnoredAndDamagedNewestFallsBack) {
  TempDir tmp;
  nn::Transformer model(small_config());
  Adam adam(model.parameters());
  fs::path folder = tmp / "ckpt";
  save_checkpoint(folder, model.config(), model.named_parameters(), adam, {100, 0, 3, 1, {}});
  fs::path second =
      save_checkpoint(folder, model.config(), model.named_parameters(), adam, {200, 0, 6, 1, {}});
  // A run killed while writing step 300 leaves a partial folder: not a checkpoint.
  fs::create_directories(folder / "step-000000300.partial-999");
  std::ofstream(folder / "step-000000300.partial-999" / "model.safetensors") << "half";
  ASSERT_EQ(list_checkpoints(folder).size(), 2u);

  std::vector<std::string> warnings;
  auto warn = [&](const std::string& w) { warnings.push_back(w); };
  EXPECT_EQ(load_latest_checkpoint(folder, warn)->state.step, 200);
  EXPECT_TRUE(warnings.empty());

  // Damage the newest complete one: truncate its weights. Resume takes the previous checkpoint.
  fs::resize_file(second / "model.safetensors", 100);
  EXPECT_EQ(load_latest_checkpoint(folder, warn)->state.step, 100);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step-000000200"), std::string::npos);
  // ...and the damaged one is moved aside, out of the checkpoints.
  EXPECT_NE(warnings[0].find("moved aside to step-000000200.damaged"), std::string::npos)
      << warnings[0];
  EXPECT_TRUE(fs::is_directory(folder / "step-000000200.damaged"));

  prune_checkpoints(folder, 1);
  EXPECT_FALSE(fs::exists(folder / "step-000000300.partial-999"));
  ASSERT_EQ(list_checkpoints(folder).size(), 1u);
  EXPECT_EQ(list_checkpoints(folder)[0].filename(), "step-000000100");
}

// Saves checkpoints of steps 10 and 40 into `folder`; returns the newest's directory.
fs::path two_checkpoints(const fs::path& folder) {
  nn::Transformer model(small_config());
  Adam adam(model.parameters());
  save_checkpoint(folder, model.config(), model.named_parameters(), adam,
                  {10, 0, 10, 1, {{"elapsed_s", 1.0}, {"steps_by_products", {{"f32", 10}}}}});
  return save_checkpoint(folder, model.config(), model.named_parameters(), adam,
                         {40, 1, 2, 1, {{"elapsed_s", 4.0}, {"steps_by_products", {{"f32", 40}}}}});
}

nlohmann::json read_state(const fs::path& dir) {
  return nlohmann::json::parse(std::ifstream(dir / "state.json"));
}

void write_state(const fs::path& dir, const nlohmann::json& state) {
  std::ofstream(dir / "state.json") << state.dump(2);
}

// The error load_training_state gives for the newest checkpoint's state.json changed by `edit`
// (its checksum removed, as in a checkpoint written before state.json had one, so that the checks
// behind it are reached).
std::string state_error(const std::function<void(nlohmann::json&)>& edit) {
  TempDir tmp;
  const fs::path dir = two_checkpoints(tmp / "ckpt");
  nlohmann::json state = read_state(dir);
  state.erase("crc32");
  edit(state);
  write_state(dir, state);
  try {
    load_training_state(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Checkpoint, StateJsonOfWrongTypesOrValuesIsAnErrorNamingTheFileAndTheField) {
  // Issue 43 D4: wrong types gave an internal JSON error naming no file; D5: numbers were not
  // checked.
  const std::pair<std::function<void(nlohmann::json&)>, std::string> cases[] = {
      {[](nlohmann::json& s) { s["extra"]["elapsed_s"] = "x"; }, "'extra.elapsed_s'"},
      {[](nlohmann::json& s) { s["extra"]["elapsed_s"] = nullptr; }, "'extra.elapsed_s'"},
      {[](nlohmann::json& s) { s["extra"] = "x"; }, "'extra' must be an object"},
      {[](nlohmann::json& s) { s["extra"]["batcher_fingerprint"] = "x"; },
       "'extra.batcher_fingerprint'"},
      {[](nlohmann::json& s) {
         s["extra"]["steps_by_products"] = {{"f32", "7"}};
       },
       "'extra.steps_by_products.f32' must be a non-negative integer"},
      {[](nlohmann::json& s) {
         s["extra"]["steps_by_products"] = {{"f32", -999999999999910}};
       },
       "'extra.steps_by_products.f32' must be a non-negative integer"},
      {[](nlohmann::json& s) {
         s["extra"]["steps_by_products"] = {{"f32", 7}};
       },
       "counts 7 updates, 'step' is 40"},
      {[](nlohmann::json& s) { s["extra"]["decay_from"] = 0; },
       "'extra.decay_from' must be at least 1"},
      {[](nlohmann::json& s) { s["extra"]["decay_from_progress"] = 1.5; },
       "'extra.decay_from_progress' must be a number from 0 to 1, got 1.5"},
      {[](nlohmann::json& s) { s["extra"]["decay_from_progress"] = "0.5"; },
       "'extra.decay_from_progress' must be a number from 0 to 1"},
      {[](nlohmann::json& s) { s["step"] = -5; }, "'step' must be a non-negative integer, got -5"},
      {[](nlohmann::json& s) { s["step"] = 1e15; }, "'step' must be a non-negative integer"},
      {[](nlohmann::json& s) {
         s["step"] = 44;
         s["extra"]["steps_by_products"] = {{"f32", 44}};
       },
       "'step' is 44, but the folder is step-000000040"},
      {[](nlohmann::json& s) { s["epoch"] = -1; }, "'epoch'"},
      {[](nlohmann::json& s) { s["batch_in_epoch"] = "2"; }, "'batch_in_epoch'"},
      {[](nlohmann::json& s) { s["seed"] = -1; }, "'seed'"},
      {[](nlohmann::json& s) { s = nlohmann::json::array(); }, "not a JSON object"},
  };
  for (const auto& [edit, expected] : cases) {
    const std::string error = state_error(edit);
    EXPECT_NE(error.find("state.json: invalid training state: "), std::string::npos) << error;
    EXPECT_NE(error.find(expected), std::string::npos) << expected << " / " << error;
  }
  // Without a checksum (an older checkpoint) and with valid values it loads.
  EXPECT_EQ(state_error([](nlohmann::json&) {}), "(no error)");
}

TEST(Checkpoint, StateJsonCarriesAChecksumThatCatchesAFlippedBit) {
  TempDir tmp;
  const fs::path dir = two_checkpoints(tmp / "ckpt");
  nlohmann::json state = read_state(dir);
  ASSERT_TRUE(state["crc32"].is_string());
  EXPECT_EQ(load_training_state(dir).epoch, 1);
  state["epoch"] = 3;  // one bit of 1: a different batch plan
  write_state(dir, state);
  try {
    load_training_state(dir);
    ADD_FAILURE() << "a changed epoch loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fails its checksum"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, AnUnreadableStateMovesTheCheckpointAsideAndThePreviousOneLoads) {
  TempDir tmp;
  const fs::path folder = tmp / "ckpt";
  const fs::path newest = two_checkpoints(folder);
  nlohmann::json state = read_state(newest);
  state["extra"]["batcher_fingerprint"] = "x";
  write_state(newest, state);
  std::vector<std::string> warnings;
  auto loaded =
      load_latest_checkpoint(folder, [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->state.step, 10);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("moved aside to step-000000040.damaged"), std::string::npos)
      << warnings[0];
}

TEST(Checkpoint, PruneKeepsTheNewest) {
  TempDir tmp;
  nn::Transformer model(small_config());
  Adam adam(model.parameters());
  for (int64_t step : {10, 20, 30, 40})
    save_checkpoint(tmp / "c", model.config(), model.named_parameters(), adam, {step, 0, 0, 0, {}});
  prune_checkpoints(tmp / "c", 2);
  auto left = list_checkpoints(tmp / "c");
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].filename(), "step-000000030");
  EXPECT_EQ(left[1].filename(), "step-000000040");
}

TEST(Average, OfCopiesIsTheModelAndOfTwoIsTheMean) {
  TempDir tmp;
  nn::Transformer a(small_config()), b(small_config());
  a.init(1);
  b.init(2);
  save_model_dir(tmp / "a1", a.config(), a.named_parameters());
  save_model_dir(tmp / "a2", a.config(), a.named_parameters());
  save_model_dir(tmp / "a3", a.config(), a.named_parameters());
  save_model_dir(tmp / "b", b.config(), b.named_parameters());

  average_models({tmp / "a1", tmp / "a2", tmp / "a3"}, tmp / "avg_a");
  LoadedModel avg_a = load_model_dir(tmp / "avg_a");
  auto pa = a.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(avg_a.parameters[i].second.to_floats(), pa[i].second.to_floats()) << pa[i].first;

  average_models({tmp / "a1", tmp / "b"}, tmp / "avg_ab");
  LoadedModel avg_ab = load_model_dir(tmp / "avg_ab");
  auto pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    auto x = pa[i].second.to_floats(), y = pb[i].second.to_floats(),
         m = avg_ab.parameters[i].second.to_floats();
    for (size_t j = 0; j < x.size(); ++j)
      EXPECT_FLOAT_EQ(m[j], static_cast<float>((static_cast<double>(x[j]) + y[j]) / 2));
  }

  ModelConfig other = small_config();
  other.d_ff = 32;
  nn::Transformer c(other);
  save_model_dir(tmp / "c", other, c.named_parameters());
  testing::expect_error(
      [&] {
        average_models({tmp / "a1", tmp / "c"}, tmp / "bad");
      },
      {"configuration differs"});
}

}  // namespace
}  // namespace tfm::internal
