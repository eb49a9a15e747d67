// tools/train_flags.h: the common trainer flags of every `graft train` command — defaults,
// range checks, --config (a run's config.json read back as it is; bad files are usage errors,
// never a crash) and the mapping to nn::TrainerOptions.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "nn/interrupt.h"
#include "tools/train_flags.h"

using namespace graft;
namespace fs = std::filesystem;

namespace {

// A `train demo` subcommand with the common flags and one of its own (--batch).
struct Cli {
  CLI::App app{"test"};
  CLI::App* sub = nullptr;
  tools::TrainFlags flags;
  int64_t batch = 8;
  explicit Cli(tools::TrainFlagDefaults d = {}) {
    sub = app.add_subcommand("demo", "a train command");
    sub->add_option("--batch", batch, "batch")->capture_default_str();
    tools::add_train_flags(sub, flags, d, [this] { tools::require_divisible(batch, "--batch", flags); });
  }
  void parse(std::vector<std::string> args) {
    args.insert(args.begin(), "demo");
    std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
    app.parse(args);
  }
};

std::string temp_file(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / fmt::format("graft-flags-{}-{}", getpid(), name);
  std::ofstream(p) << text;
  return p.string();
}

// The message of the CLI11 error parse() throws ("" if none).
std::string parse_error(Cli& c, const std::vector<std::string>& args) {
  try {
    c.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("train flags: one default each, per-command defaults only where given") {
  Cli c({.steps = 300, .eval_every = 25, .clip_grad_norm = 5.0, .run_dir = "runs/demo"});
  c.parse({});
  CHECK(c.flags.steps == 300);
  CHECK(c.flags.eval_every == 25);
  CHECK(c.flags.clip_grad_norm == 5.0);
  CHECK(c.flags.run_dir == "runs/demo");
  CHECK(c.flags.checkpoint_every == 500);
  CHECK(c.flags.threads == 1);
  CHECK(c.flags.seed == 1);
  CHECK(c.flags.time_budget == 0.0);
  const nn::TrainerOptions to = tools::to_trainer_options(c.flags);
  CHECK(to.max_steps == 300);
  CHECK(to.checkpoint_every == 500);
  CHECK(to.clip_grad_norm == 5.0);

  Cli none;
  none.parse({"--checkpoint-every", "7", "--time-budget", "2.5", "--patience", "3", "--eval-every", "4"});
  const nn::TrainerOptions t2 = tools::to_trainer_options(none.flags);
  CHECK(t2.checkpoint_every == 0);  // no run directory: nothing to save into
  CHECK(t2.time_budget == 2.5);
  CHECK(t2.early_stopping_patience == 3);
}

TEST_CASE("train flags: ranges are checked, NaN included, and combinations make sense") {
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{"--clip-grad-norm", "nan"}, {"--time-budget", "-1"},
                                             {"--time-budget", "inf"}, {"--steps", "0"},
                                             {"--grad-accumulation", "0"}, {"--threads", "-2"}}) {
    Cli c;
    CHECK_MESSAGE(!parse_error(c, bad).empty(), bad[0], " ", bad[1]);
  }
  Cli p;
  CHECK(parse_error(p, {"--patience", "2"}).find("--eval-every") != std::string::npos);
  Cli r;
  CHECK(parse_error(r, {"--resume"}).find("--run-dir") != std::string::npos);
  Cli ro;
  CHECK(!parse_error(ro, {"--resume", "--overwrite", "--run-dir", "x"}).empty());
  Cli g;
  CHECK(parse_error(g, {"--grad-accumulation", "3"}).find("multiple of --grad-accumulation") != std::string::npos);
  Cli ok;
  CHECK(parse_error(ok, {"--grad-accumulation", "4", "--bf16", "--device", "cpu"}) == "");
  CHECK(ok.flags.bf16);
}

TEST_CASE("train flags: a run's config.json is read back by --config as it is") {
  Cli a({.run_dir = "runs/demo"});
  a.parse({"--steps", "42", "--clip-grad-norm", "0.25", "--bf16", "--seed", "9", "--batch", "16"});
  nlohmann::ordered_json j = tools::train_config("demo", a.flags);
  j["batch"] = a.batch;
  CHECK(j["model"] == "demo");
  CHECK(j["clip-grad-norm"] == 0.25);
  CHECK(!j.contains("run-dir"));  // where and whether to resume are not the run's configuration
  CHECK(!j.contains("resume"));
  const std::string path = temp_file("config.json", j.dump(2));

  Cli b;
  b.parse({"--config", path});
  nlohmann::ordered_json k = tools::train_config("demo", b.flags);
  k["batch"] = b.batch;
  CHECK(k.dump() == j.dump());

  Cli wins;  // the command line wins over the file
  wins.parse({"--config", path, "--steps", "7"});
  CHECK(wins.flags.steps == 7);
  CHECK(wins.flags.seed == 9);

  CLI::App other{"test"};  // another command's config is refused, naming both
  tools::TrainFlags f;
  CLI::App* sub = other.add_subcommand("other", "x");
  tools::add_train_flags(sub, f, {});
  CHECK_THROWS_WITH_AS(other.parse(std::vector<std::string>{path, "--config", "other"}),
                       doctest::Contains("this is 'train other'"), CLI::ParseError);
  fs::remove(path);
}

TEST_CASE("train flags: bad --config files are usage errors that name the problem") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("graft-flags-dir-{}", getpid());
  fs::create_directories(dir);
  std::string huge(size_t(2) << 20, ' ');
  huge[0] = '{';
  huge.back() = '}';
  const std::string deep = "{\"steps\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir.string(), "is a directory"},
      {(dir / "missing.json").string(), "no such file"},
      {temp_file("huge.json", huge), "larger than"},
      {temp_file("deep.json", deep), "a JSON array"},
      {temp_file("list.json", "[1, 2]"), "must hold a JSON object"},
      {temp_file("text.json", "steps = 5"), "not valid JSON"},
      {temp_file("unknown.json", "{\"stepz\": 5}"), "unknown key 'stepz'; known keys:"},
      {temp_file("value.json", "{\"clip-grad-norm\": \"nan\"}"), "key 'clip-grad-norm'"},
      {temp_file("flag.json", "{\"bf16\": 1}"), "expected true or false"},
      {temp_file("null.json", "{\"steps\": null}"), "expected a number or a string"},
  };
  for (const auto& [path, message] : cases) {
    Cli c;
    const std::string e = parse_error(c, {"--config", path});
    CHECK_MESSAGE(e.find(message) != std::string::npos, path, ": ", e);
    if (path.rfind(dir.string(), 0) != 0) fs::remove(path);
  }
  fs::remove_all(dir);
}

TEST_CASE("train flags: for_each_chunk stops at the next chunk on Ctrl-C") {
  nn::InterruptHandler on_ctrl_c;
  std::vector<size_t> firsts;
  tools::for_each_chunk(10, 4, [&](size_t first, size_t last) {
    firsts.push_back(first);
    CHECK(last == std::min<size_t>(10, first + 4));
  });
  CHECK(firsts == std::vector<size_t>{0, 4, 8});
  firsts.clear();
  CHECK_THROWS_AS(tools::for_each_chunk(10, 4,
                                        [&](size_t first, size_t) {
                                          firsts.push_back(first);
                                          nn::set_interrupt_for_testing(2);  // Ctrl-C in chunk 1
                                        }),
                  nn::Interrupted);
  CHECK(firsts == std::vector<size_t>{0});
  nn::set_interrupt_for_testing(0);
}
