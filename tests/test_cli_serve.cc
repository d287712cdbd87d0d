// `tfm serve` as a process: its answers equal `tfm translate`'s on the same model, sentences and
// options (alignments too); SIGTERM while requests are in flight answers them and exits 0; bad
// flags and files are one-line errors with a non-zero exit.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "build_paths.h"
#include "copy_model_test_util.h"
#include "data_test_util.h"
#include "serve_test_util.h"
#include "text_model_test_util.h"

namespace tfm::internal::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// A `tfm serve` child process on a free port (--port 0 --port-file), its stderr in a file.
class ServeProcess {
 public:
  ServeProcess(const TempDir& dir, std::vector<std::string> arguments) : dir_(dir) {
    const std::string port_file = (dir.path() / "port").string();
    std::filesystem::remove(port_file);
    arguments.insert(arguments.begin(), {std::string(tfm_binary_dir()) + "/tfm", "serve", "--port",
                                         "0", "--port-file", port_file});
    pid_ = fork();
    if (pid_ == 0) {
      const std::string err = (dir.path() / "serve.err").string();
      FILE* file = std::freopen(err.c_str(), "w", stderr);
      (void)file;
      std::vector<char*> argv;
      for (std::string& a : arguments) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 3000 && port_ == 0; ++i) {
      std::ifstream in(port_file);
      if (!(in >> port_)) port_ = 0;
      if (port_ == 0) std::this_thread::sleep_for(5ms);
      if (exited()) break;
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && status_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60);
    return c;
  }
  bool wait_ready() {
    auto c = client();
    for (int i = 0; i < 3000; ++i) {
      auto health = c.Get("/health");
      if (health && health->status == 200) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
  // Sends `signal` and returns the exit status (-1 if killed by a signal).
  int stop(int signal = SIGTERM) {
    kill(pid_, signal);
    return wait();
  }
  int wait() {
    int raw = 0;
    waitpid(pid_, &raw, 0);
    status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    return status_;
  }
  bool exited() {
    int raw = 0;
    if (waitpid(pid_, &raw, WNOHANG) != pid_) return false;
    status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    return true;
  }
  int status() const { return status_; }
  std::string err() const { return read_text(dir_.path() / "serve.err"); }

 private:
  const TempDir& dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  int status_ = -1;
};

TEST(CliServe, AnswersEqualTfmTranslateOnTheSameInputs) {
  TempDir dir;
  const auto model = write_tiny_text_model(dir);
  const std::vector<std::string> sentences = generated_sentences(10, false, 31);
  write_text(dir / "in.txt", joined_lines(sentences));
  const std::string options = "--max-length-offset 8 -b 3";
  const CommandResult translated = run_tfm_command(
      fmt::format("translate -m {} -i {} {}", quoted(model), quoted(dir / "in.txt"), options), dir);
  ASSERT_EQ(translated.status, 0) << translated.err;
  const CommandResult aligned =
      run_tfm_command(fmt::format("translate -m {} -i {} {} --alignment", quoted(model),
                                  quoted(dir / "in.txt"), options),
                      dir);
  ASSERT_EQ(aligned.status, 0) << aligned.err;
  const std::vector<std::string> want = lines_of(translated.out),
                                 want_aligned = lines_of(aligned.out);
  ASSERT_EQ(want.size(), sentences.size());

  ServeProcess server(dir, {"-m", model.string(), "--max-length-offset", "8", "-b", "3"});
  ASSERT_TRUE(server.wait_ready()) << server.err();
  auto client = server.client();
  // All in one request, then one at a time with alignments.
  auto all = client.Post("/translate", json{{"q", sentences}}.dump(), "application/json");
  ASSERT_TRUE(all && all->status == 200) << (all ? all->body : "no answer");
  EXPECT_EQ(json::parse(all->body)["translatedText"], json(want));
  for (size_t i = 0; i < sentences.size(); ++i) {
    auto one = client.Post("/translate", json{{"q", sentences[i]}, {"alignment", true}}.dump(),
                           "application/json");
    ASSERT_TRUE(one && one->status == 200);
    const json out = json::parse(one->body);
    EXPECT_EQ(
        out["translatedText"].get<std::string>() + " ||| " + out["alignment"].get<std::string>(),
        want_aligned[i]);
  }
  EXPECT_EQ(server.stop(), 0) << server.err();
  EXPECT_NE(server.err().find("tfm serve: listening on http://127.0.0.1:"), std::string::npos);
  EXPECT_NE(server.err().find("tfm serve: stopped"), std::string::npos) << server.err();
}

// "mbr": true answers what tfm translate --mbr writes, over a model whose n-best lists share words
// (copy_model_test_util.h), so that for some sentences the choice is not the search's best.
TEST(CliServe, MbrAnswersEqualTfmTranslateMbr) {
  TempDir dir;
  const auto model = train_copying_model(dir);
  const std::vector<std::string> sentences = generated_sentences(12, false, 21);
  write_text(dir / "in.txt", joined_lines(sentences));
  const auto translate = [&](const std::string& options) {
    const CommandResult run =
        run_tfm_command(fmt::format("translate -m {} -i {} --max-length-offset 8 -b 6 {}",
                                    quoted(model), quoted(dir / "in.txt"), options),
                        dir);
    EXPECT_EQ(run.status, 0) << run.err;
    return lines_of(run.out);
  };
  const std::vector<std::string> mbr = translate("--n-best 6 --mbr"), best = translate("");
  ASSERT_EQ(mbr.size(), sentences.size());
  ASSERT_NE(mbr, best) << "MBR chose the search's best for every sentence: the test shows nothing";

  ServeProcess server(dir, {"-m", model.string(), "--max-length-offset", "8"});
  ASSERT_TRUE(server.wait_ready()) << server.err();
  auto client = server.client();
  auto all = client.Post(
      "/translate", json{{"q", sentences}, {"beam_size", 6}, {"n_best", 6}, {"mbr", true}}.dump(),
      "application/json");
  ASSERT_TRUE(all && all->status == 200) << (all ? all->body : "no answer");
  EXPECT_EQ(json::parse(all->body)["translatedText"], json(mbr));
  EXPECT_EQ(server.stop(), 0) << server.err();
}

TEST(CliServe, SigtermAnswersTheRequestsInFlightAndExitsZero) {
  TempDir dir;
  const auto model = write_tiny_text_model(dir);
  ServeProcess server(dir, {"-m", "tiny=" + model.string(), "--max-length-offset", "8",
                            "--batch-delay-ms", "500", "--batch-tokens", "100000"});
  ASSERT_TRUE(server.wait_ready()) << server.err();
  const std::vector<std::string> sentences = generated_sentences(6, false, 7);
  std::vector<int> statuses(sentences.size(), 0);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < sentences.size(); ++i)
    clients.emplace_back([&, i] {
      auto client = server.client();
      auto result = client.Post("/translate", json{{"q", sentences[i]}, {"model", "tiny"}}.dump(),
                                "application/json");
      statuses[i] = result ? result->status : -1;
    });
  std::this_thread::sleep_for(200ms);  // the requests wait in the queue (500 ms delay)
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.err();
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < sentences.size(); ++i) EXPECT_EQ(statuses[i], 200) << i;
  EXPECT_NE(server.err().find("SIGTERM: finishing the requests in flight"), std::string::npos)
      << server.err();
}

// Whether `reply` is one whole HTTP answer with the status `a` or `b`: a status line, headers and
// as many body bytes as its Content-Length says.
::testing::AssertionResult whole_answer(const std::string& reply, int a, int b) {
  const size_t end = reply.find("\r\n\r\n");
  if (!reply.starts_with("HTTP/1.1 ") || end == std::string::npos)
    return ::testing::AssertionFailure() << "no HTTP answer: '" << reply << "'";
  const int status = std::stoi(reply.substr(9, 3));
  if (status != a && status != b) return ::testing::AssertionFailure() << reply;
  const size_t length = reply.find("Content-Length: ");
  if (length == std::string::npos || length > end) return ::testing::AssertionFailure() << reply;
  if (reply.size() - end - 4 != std::stoul(reply.substr(length + 16)))
    return ::testing::AssertionFailure() << "a cut body: " << reply;
  return ::testing::AssertionSuccess();
}

TEST(CliServe, SigtermUnderLoadAnswersEveryAcceptedRequest) {
  TempDir dir;
  const auto model = write_tiny_text_model(dir);
  // Fewer HTTP threads than requests: most wait for a thread when the signal comes.
  ServeProcess server(
      dir, {"-m", "tiny=" + model.string(), "--max-length-offset", "8", "--http-threads", "4",
            "--batch-delay-ms", "200", "--batch-tokens", "100000"});
  ASSERT_TRUE(server.wait_ready()) << server.err();
  const std::vector<std::string> sentences = generated_sentences(24, false, 9);
  std::vector<int> socks;
  for (const std::string& sentence : sentences) {
    const int sock = connect_to(server.port());  // accepted by the kernel once this returns
    ASSERT_GE(sock, 0);
    const std::string body = json{{"q", sentence}}.dump();
    const std::string request = fmt::format(
        "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: {}\r\n\r\n{}",
        body.size(), body);
    ASSERT_EQ(::send(sock, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    socks.push_back(sock);
  }
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.err();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  for (size_t i = 0; i < socks.size(); ++i) {
    EXPECT_TRUE(whole_answer(read_until_closed(socks[i], 5s), 200, 503)) << "request " << i;
    ::close(socks[i]);
  }
}

TEST(CliServe, BadFlagsAndFilesAreOneLineErrors) {
  TempDir dir;
  const auto model = write_tiny_text_model(dir);
  auto expect_failure = [&](const std::string& arguments, const std::string& message) {
    const CommandResult r = run_tfm_command("serve --port 0 " + arguments, dir);
    EXPECT_NE(r.status, 0) << arguments;
    EXPECT_NE(r.err.find(message), std::string::npos) << arguments << "\n" << r.err;
    EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
  };
  expect_failure("-m " + quoted(dir / "missing"), "missing: no such model directory");
  expect_failure(fmt::format("-m a={} -m a={}", quoted(model), quoted(model)),
                 "two models are named 'a'");
  expect_failure(fmt::format("-m {} --api-key-file {}", quoted(model), quoted(dir / "nokey")),
                 "nokey: cannot open the API key file");
  write_text(dir / "empty.key", "\n");
  expect_failure(fmt::format("-m {} --api-key-file {}", quoted(model), quoted(dir / "empty.key")),
                 "empty.key: the API key file is empty");
  expect_failure(fmt::format("-m {} --workers 0", quoted(model)), "--workers");
  expect_failure(fmt::format("-m {} --host 203.0.113.7", quoted(model)),
                 "cannot listen on 203.0.113.7 (any port)");
  // A model directory whose weights are corrupt: the server stops with the loader's error.
  const auto broken = dir / "broken";
  std::filesystem::copy(model, broken);
  write_text(broken / "model.safetensors", "not safetensors");
  const CommandResult r = run_tfm_command("serve --port 0 -m " + quoted(broken), dir);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("model.safetensors"), std::string::npos) << r.err;
}

TEST(CliServe, APortInUseIsAnError) {
  TempDir dir;
  const auto model = write_tiny_text_model(dir);
  ServeProcess first(dir, {"-m", model.string()});
  ASSERT_TRUE(first.wait_ready()) << first.err();
  const CommandResult r =
      run_tfm_command(fmt::format("serve --port {} -m {}", first.port(), quoted(model)), dir);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find(fmt::format("cannot listen on 127.0.0.1:{}", first.port())),
            std::string::npos)
      << r.err;
  EXPECT_EQ(first.stop(SIGINT), 0);
}

}  // namespace
}  // namespace tfm::internal::testing
