// tfm serve: translation over HTTP (src/tfm/serve; docs/SERVING.md). The main thread serves; a
// signal thread turns SIGTERM or SIGINT into a stop that lets the requests in flight finish (a
// second signal ends the process at once).
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/io/atomic_file.h"
#include "tfm/serve/http_server.h"
#include "tfm/translation/model_loading.h"

namespace tfm::internal::cli {

namespace {

struct ServeCommandOptions {
  std::vector<std::string> models;  // [NAME=]DIR
  serve::ServerOptions server;
  std::string port_file;
  std::string api_key_file;
  serve::QueueOptions queue;
  double batch_delay_ms = 5.0;
  serve::RequestLimits limits;
  double request_timeout = 30.0;
  int io_timeout = 10;
  int keep_alive = 5;
  decode::TranslateOptions search;
  int threads = 0;  // per worker
  std::string precision = "f32";
  std::string device = "cpu";
};

struct ModelSpec {
  std::string name;
  std::filesystem::path dir;
};

// "NAME=DIR", or "DIR" named after its last component.
ModelSpec model_spec(const std::string& text) {
  const size_t equals = text.find('=');
  if (equals != std::string::npos && equals > 0)
    return {text.substr(0, equals), text.substr(equals + 1)};
  std::filesystem::path dir = std::filesystem::path(text).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "runs/model/"
  std::string name = dir.filename().string();
  if (name.empty() || name == "." || name == "..")
    name = std::filesystem::absolute(dir).lexically_normal().filename().string();
  return {name, text};
}

std::string read_api_key(const std::string& path) {
  std::ifstream in(path);
  TFM_CHECK(in.is_open(), "{}: cannot open the API key file", path);
  std::stringstream text;
  text << in.rdbuf();
  std::string key = text.str();
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!key.empty() && space(key.back())) key.pop_back();
  while (!key.empty() && space(key.front())) key.erase(key.begin());
  TFM_CHECK(!key.empty(), "{}: the API key file is empty", path);
  TFM_CHECK(key.find_first_of(" \t\r\n") == std::string::npos,
            "{}: the API key must be one word (no spaces or line breaks inside)", path);
  return key;
}

std::unique_ptr<serve::TranslationService> load_models(const ServeCommandOptions& options,
                                                       const std::vector<ModelSpec>& specs,
                                                       serve::Metrics& metrics) {
  const ThreadCountScope threads(options.threads);  // the checksums run in parallel
  std::vector<serve::ServedModel> served;
  for (const ModelSpec& spec : specs) {
    const auto start = std::chrono::steady_clock::now();
    auto model = decode::load_inference_model(
        spec.dir, translation::inference_options(options.precision, options.device));
    const ModelConfig& config = model->config();
    TFM_CHECK(config.task == "translation",
              "{}: a {} model (config.json task \"{}\"); tfm serve "
              "translates",
              spec.dir.string(), config.task, config.task);
    auto vocab = std::make_shared<const data::Vocabulary>(translation::model_vocabulary(
        spec.dir, config, "a served model needs its SentencePiece vocabulary"));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "tfm serve: loaded '%s' from %s (%s, %.1f s)\n", spec.name.c_str(),
                 spec.dir.c_str(), options.precision.c_str(), seconds);
    served.push_back({spec.name, spec.dir, std::move(model), std::move(vocab)});
  }
  serve::QueueOptions queue = options.queue;
  queue.threads_per_worker = options.threads;
  queue.max_delay = std::chrono::microseconds(static_cast<int64_t>(options.batch_delay_ms * 1000));
  return std::make_unique<serve::TranslationService>(std::move(served), options.search, queue,
                                                     options.limits, &metrics);
}

void run_serve(ServeCommandOptions options) {
  std::vector<ModelSpec> specs;
  for (const std::string& text : options.models) {
    specs.push_back(model_spec(text));
    for (size_t i = 0; i + 1 < specs.size(); ++i)
      TFM_CHECK(specs[i].name != specs.back().name,
                "-m: two models are named '{}'; name them with -m NAME=DIR", specs.back().name);
    TFM_CHECK(std::filesystem::is_directory(specs.back().dir), "{}: no such model directory",
              specs.back().dir.string());
  }
  if (!options.api_key_file.empty()) options.server.api_key = read_api_key(options.api_key_file);
  if (options.threads <= 0)
    options.threads = std::max(1, num_threads() / std::max(1, options.queue.workers));
  options.limits.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options.request_timeout * 1000));
  options.server.io_timeout = std::chrono::seconds(options.io_timeout);
  options.server.keep_alive = std::chrono::seconds(options.keep_alive);

  // SIGTERM and SIGINT go to the signal thread alone: blocked here, before any thread starts, so
  // that every thread (HTTP, decoding, OpenMP) inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  serve::HttpServer server(options.server, [&](serve::Metrics& metrics) {
    return load_models(options, specs, metrics);
  });
  const int port = server.bind();
  if (!options.port_file.empty())
    write_file_atomically(options.port_file, std::to_string(port) + "\n");
  if (options.server.api_key.empty() && options.server.host != "127.0.0.1" &&
      options.server.host != "localhost" && options.server.host != "::1")
    std::fprintf(stderr,
                 "tfm serve: warning: listening on %s without an API key "
                 "(--api-key-file)\n",
                 options.server.host.c_str());
  std::fprintf(stderr,
               "tfm serve: listening on http://%s:%d (%d decoding worker(s) of %d "
               "thread(s)); loading %zu model(s)\n",
               options.server.host.c_str(), port, options.queue.workers, options.threads,
               specs.size());

  std::atomic<bool> finished{false};
  std::thread signals([&] {
    int received = 0;
    const timespec tick{0, 200'000'000};
    while (!finished) {
      const int signal = sigtimedwait(&stop_signals, nullptr, &tick);
      if (signal < 0) continue;
      if (++received == 1) {
        std::fprintf(stderr, "tfm serve: %s: finishing the requests in flight, then stopping\n",
                     signal == SIGTERM ? "SIGTERM" : "SIGINT");
        server.stop();
      } else {
        std::fprintf(stderr, "tfm serve: second signal: stopping at once\n");
        std::_Exit(1);
      }
    }
  });
  try {
    server.run();
  } catch (...) {
    finished = true;
    signals.join();
    throw;
  }
  finished = true;
  signals.join();
  std::fprintf(stderr, "tfm serve: stopped\n");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Translate over HTTP (LibreTranslate's and OpenNMT-py's JSON), batching requests");
  cmd->add_option("-m,--model", o->models,
                  "model directory, or NAME=DIR; repeat it to serve several (requests choose one "
                  "with \"model\": NAME; the first is the default)")
      ->required();
  cmd->add_option("--host", o->server.host,
                  "address to listen on (default 127.0.0.1: this machine "
                  "only)");
  cmd->add_option("--port", o->server.port, "port (default 8080; 0: any free port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--port-file", o->port_file, "write the port listened on to this file");
  cmd->add_option("--api-key-file", o->api_key_file,
                  "file holding an API key that translation requests must carry (\"api_key\", or "
                  "an Authorization: Bearer header); 401 without it");
  cmd->add_option("--workers", o->queue.workers, "decoding workers (default 1)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--threads", o->threads,
                  "OpenMP threads per decoding worker (default 0: the cores shared among them)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--batch-tokens", o->queue.batch_tokens,
                  "padded source tokens per decoded batch (default 4096)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--batch-delay-ms", o->batch_delay_ms,
                  "the longest a sentence waits for others to batch with (default 5)")
      ->check(CLI::Range(0.0, 10000.0));
  cmd->add_option("--max-queue", o->queue.max_queued_sentences,
                  "sentences waiting at most; beyond: 503 with Retry-After (default 1024)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("-b,--beam-size", o->search.beam_size, "default beam size (default 4)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--max-beam-size", o->limits.max_beam_size,
                  "largest beam_size a request may ask for (default 16)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--alpha", o->search.alpha, "length penalty ((5+len)/6)^alpha (default 0.6)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--no-repeat-ngram-size", o->search.no_repeat_ngram,
                  "no output repeats an n-gram of this many subword tokens (default 0: off)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  cmd->add_option("--max-length-offset", o->search.max_length_offset,
                  "maximum output length = source length + this (default 50)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->add_option("--max-input-length", o->search.max_input_length,
                  "longest sentence in subword tokens; longer: 400 (default 0: max_positions)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--max-body-bytes", o->server.max_body_bytes,
                  "largest request body; larger: 413 (default 1048576)")
      ->check(CLI::Range(size_t{64}, size_t{1} << 30));
  cmd->add_option("--max-sentences", o->limits.max_sentences,
                  "sentences per request at most (default 128)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--max-sentence-chars", o->limits.max_sentence_chars,
                  "bytes per sentence at most (default 4000)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--request-timeout", o->request_timeout,
                  "seconds a request may wait for its translations; then 504 (default 30)")
      ->check(CLI::Range(0.001, 86400.0));
  cmd->add_option("--io-timeout", o->io_timeout,
                  "seconds a whole request may take to arrive, from its first byte (then 408), "
                  "and to write an answer (default 10)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--keep-alive", o->keep_alive,
                  "seconds an idle connection stays open (default 5)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--http-threads", o->server.http_threads,
                  "requests answered at once; slow or idle connections hold none (default 128)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--precision", o->precision,
                  "operands of the matrix products: f32, bf16, auto, int8 or int8-bf16 (default "
                  "f32)");
  cmd->add_option("--device", o->device, "cpu or cuda (default cpu)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace tfm::internal::cli
