// The browser test's model (tests/browser/attention_page.test.mjs): writes OUT/model, a tiny random
// Transformer (2 layers, 4 heads) with a 200-piece BPE vocabulary trained on generated English and
// German text, so that `tfm attention` can read text with it.
// Usage: tfm_browser_fixture OUT
#include <cstdio>
#include <exception>
#include <filesystem>

#include "data_test_util.h"
#include "tfm/data/vocab.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: tfm_browser_fixture OUT\n", stderr);
    return 2;
  }
  try {
    namespace fs = std::filesystem;
    using namespace tfm;  // (tfm::testing, not gtest's ::testing, below)
    const fs::path out = argv[1];
    fs::create_directories(out);
    tfm::testing::write_text(
        out / "en.txt",
        tfm::testing::joined_lines(tfm::testing::generated_sentences(400, false, 11)));
    tfm::testing::write_text(out / "de.txt", tfm::testing::joined_lines(
                                                 tfm::testing::generated_sentences(400, true, 12)));
    data::VocabTrainOptions options;
    options.inputs = {out / "en.txt", out / "de.txt"};
    options.output_prefix = out / "vocab";
    options.model_type = "bpe";
    options.vocab_size = 200;
    options.num_threads = 1;
    const fs::path vocab = data::train_vocabulary(options).model_path;

    ModelConfig config = preset("base");
    config.layers = 2;
    config.d_model = 32;
    config.d_ff = 64;
    config.heads = 4;
    config.d_k = config.d_v = 8;
    config.vocab_size = 200;
    config.max_positions = 64;
    config.dropout = 0.0;
    nn::Transformer model(config);
    model.init(7);
    save_model_dir(out / "model", config, model.named_parameters());
    fs::copy_file(vocab, out / "model" / kVocabFileName, fs::copy_options::overwrite_existing);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tfm_browser_fixture: %s\n", error.what());
    return 1;
  }
}
