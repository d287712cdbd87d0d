// Each subcommand registers itself on the app; its callback does the work and throws tfm::Error on
// bad input (main prints it as one line and exits non-zero).
#pragma once

#include <CLI/CLI.hpp>

namespace tfm::internal::cli {

void register_commands(CLI::App& app);

void register_info(CLI::App& app);
void register_vocab(CLI::App& app);
void register_corpus(CLI::App& app);
void register_average(CLI::App& app);
void register_train(CLI::App& app);
void register_translate(CLI::App& app);
void register_bleu(CLI::App& app);
void register_evalb(CLI::App& app);
void register_linearise(CLI::App& app);
void register_parse(CLI::App& app);
void register_attention(CLI::App& app);
void register_serve(CLI::App& app);
void register_sweep(CLI::App& app);
void register_convert(CLI::App& app);

}  // namespace tfm::internal::cli
