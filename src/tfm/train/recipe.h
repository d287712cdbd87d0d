// A training recipe: every option of `tfm train`, read from a YAML file whose sections are `model`,
// `data`, `optimizer`, `training`, `checkpoints`, `validation`, then overridden by command-line
// `--set section.key=value`. docs/TRAINING.md documents every key. Unknown or repeated keys, wrong
// types, values over several lines (an unterminated quote), non-finite numbers and invalid values
// are one-line errors naming the file, the line and the key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tfm/model/config.h"
#include "tfm/train/batch_size.h"

namespace tfm::internal {

struct TrainRecipe {
  // model: a preset, then any ModelConfig key (vocab_size comes from the vocabulary).
  std::string preset = "base";
  std::map<std::string, std::string> model_overrides;  // key -> YAML scalar text

  // data
  std::string train_source, train_target;  // plain or .gz, one sentence a line, aligned
  std::string valid_source, valid_target;  // optional
  std::string vocab;                       // a SentencePiece .model; empty: learned into the run
  int64_t vocab_size = 8000;
  std::string vocab_type = "bpe";  // or "unigram", or "word" (at most vocab_size whole words)
  // Sentences sampled from the training text to learn the vocabulary (SentencePiece's
  // input_sentence_size); 0: all of them.
  int64_t vocab_sample = 0;
  int64_t max_length = 128;   // subword tokens; longer pairs are skipped and counted
  int64_t max_tokens = 4096;  // batch budget: padded source + padded target tokens; or kAutoBatch
                              // (`auto`: from the device's memory, train/batch_size.h)
  int64_t accumulate = 1;     // batches per update and rank (imitates larger batches); or
                              // kAutoBatch (`auto`: from update_tokens)
  // Padded source + target tokens an update should hold over every rank (the paper: 25000 + 25000);
  // 0: off (an update is max_tokens x accumulate x ranks).
  int64_t update_tokens = 0;
  // With max_tokens auto: the share of the device's free memory the estimate may fill.
  double memory_fraction = kMemorySafetyFraction;
  int64_t shuffle_window = 100;  // batches' worth of pairs sorted by length together
  // BPE-dropout: each batch's pairs segmented anew with each merge skipped with this probability
  // (data/subword_dropout.h); 0: off. Needs a BPE vocabulary.
  double bpe_dropout = 0.0;
  std::string bpe_dropout_sides = "both";  // or "source": the targets keep the plain segmentation
  // Word dropout: each training token replaced by <unk> with this probability
  // (data/word_dropout.h); 0: off.
  double word_dropout = 0.0;
  std::string word_dropout_sides = "source";  // or "both": the decoder inputs too
  bool skip_empty_lines = false;
  // Skip (and count) pairs with invalid UTF-8 or a line over 64 KiB instead of failing.
  bool skip_invalid_lines = false;

  // optimizer (section 5.3)
  double lr_scale = 1.0;  // multiplies d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
  int64_t warmup = 4000;
  // > 0: the warmup is at most this fraction of the run's updates, for runs too short for `warmup`
  // (the number of updates comes from training.max_steps, or is estimated from
  // training.max_minutes and the speed of the first updates).
  double warmup_fraction = 0.0;
  // After the warmup: "noam" (equation 3's inverse square root), or "linear" / "cosine" decay from
  // the same peak to zero at the run's end: training.max_steps, or the updates training.max_minutes
  // allows (estimated as for warmup_fraction). For runs of a fixed budget.
  std::string schedule = "noam";
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-9;
  double clip_norm = 0.0;  // global gradient-norm clipping; 0: off
  // AdamW's decoupled weight decay (train/adam.h) of every parameter; 0: off, plain Adam.
  double weight_decay = 0.0;

  // training
  int64_t max_steps = 0;     // 0: no limit
  int64_t max_epochs = 0;    // 0: no limit
  double max_minutes = 0.0;  // wall-clock training budget; 0: no limit
  uint64_t seed = 1;
  int threads = 0;  // 0: OMP_NUM_THREADS or all cores
  // > 0: keep an exponential moving average of the weights with at most this decay (the warm-up
  // form of train/session.h), saved in every checkpoint as ema/ and validated beside the weights.
  double ema_decay = 0.0;
  // > 0: R-Drop (Liang et al. 2021): each batch goes through the model twice with its own dropout,
  // and the loss adds this weight times the two passes' symmetric KL divergence per target token
  // (nn::Transformer::loss). Each update then costs about two. CPU only so far.
  double rdrop_alpha = 0.0;
  // Matrix products: "f32", "bf16" (f32 master weights and statistics), or "auto" (bf16 where the
  // CPU multiplies bf16 natively, else f32).
  std::string precision = "f32";
  // Where the step runs: "cpu" or "cuda" (a build with the CUDA backend and a GPU).
  std::string device = "cpu";
  // Several ranks (docs/DISTRIBUTED.md): gradients are summed across ranks in buckets of about
  // this size, each as soon as the backward has completed it.
  double allreduce_bucket_mb = 4.0;
  int64_t log_every = 50;
  std::string run_dir = "runs/default";  // checkpoints, metrics.jsonl, the vocabulary, the cache

  // checkpoints
  int64_t checkpoint_every_steps = 0;      // 0: only by time
  double checkpoint_every_minutes = 10.0;  // the paper's interval; 0: only by steps
  int64_t keep_checkpoints = 5;
  // > 0: a checkpoint at least every this fraction of the budget (max_minutes, or max_steps), so
  // that averaging the last `keep` covers the same share of a short run as of a long one.
  double checkpoint_every_fraction = 0.0;

  // validation
  int64_t validate_every_steps = 0;  // 0: at the end of every epoch
  bool validate_bleu = true;         // greedy-decoded BLEU on the validation set
  int64_t valid_max_sentences = 0;   // 0: all

  // Where each key given was set ("section.key" -> "recipe.yaml:12" or "--set section.key=v"):
  // validate() names it in its errors.
  std::map<std::string, std::string> origins;

  // The model configuration: preset + overrides, with the given vocabulary size; validated (the
  // one check of it: config.h). With model.dropout auto its dropout is 0 until the run chooses
  // it (dropout_for_epochs).
  ModelConfig model_config(int64_t vocab_size) const;
  // model.dropout is `auto`: chosen from the epochs the budget allows (train/run_cadence.h).
  bool dropout_auto() const;
};

// Reads a YAML recipe (missing keys keep their defaults). `${VAR}` in strings is replaced by the
// environment variable VAR (an error if unset).
TrainRecipe load_recipe(const std::filesystem::path& path);

// Applies "section.key=value" (as given to --set); errors name the key.
void apply_override(TrainRecipe& recipe, const std::string& assignment);

// Every recognised "section.key", for documentation and error messages.
std::vector<std::string> recipe_keys();

// Checks values and combinations (paths given, positive budgets...); an error names where the
// key was set (recipe.yaml:LINE, --set) and the value.
void validate(const TrainRecipe& recipe);

}  // namespace tfm::internal
