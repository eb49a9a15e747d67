// libFuzzer target for `graft train <model> --config FILE`: tools::apply_json_config on a small
// CLI11 app carrying the common trainer flags (tools::add_train_flags) and a few command flags
// of each kind (number, integer, choice, list, boolean flag). Every bad file must be a
// CLI::ParseError (exit status 2); a crash, a sanitizer report, a hang, graft::Error or any
// other exception (nlohmann's, std::out_of_range, std::bad_alloc) is a bug. A config that is
// accepted must leave every flag inside its documented range, and the run's config.json written
// from the result (tools::train_config) must be accepted back as it is, to the same values.
//
// Input layout: the --config file's bytes. An input starting with '!' means the rest is the
// file and the command line also gives --steps 7 (which must win over the file).
//
//   build/tests/fuzz/fuzz_config_json -dict=tests/fuzz/config_json.dict -max_total_time=60 \
//       /tmp/corpus tests/fuzz/corpus/config_json
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_util.h"
#include "tools/train_flags.h"

using namespace graft;

namespace {

// The values one parse fills in.
struct Parsed {
  tools::TrainFlags train;
  double lr = 0.01;
  int64_t batch = 32, hidden = 16;
  std::string schedule = "cosine";
  std::vector<int64_t> sizes;
  bool verbose = false;
};

// Parses `graft train mlp --config PATH [--steps 7]` into p. Returns false for a CLI::ParseError.
bool parse(const std::string& path, bool steps_on_command_line, Parsed& p) {
  CLI::App app{"graft"};
  app.require_subcommand(1);
  CLI::App* train = app.add_subcommand("train", "train a model");
  train->require_subcommand(1);
  CLI::App* mlp = train->add_subcommand("mlp", "a small MLP");
  mlp->add_option("--lr", p.lr)->check(tools::finite_in(0, 10));
  mlp->add_option("--batch", p.batch)->check(CLI::Range(int64_t(1), int64_t(65536)));
  mlp->add_option("--hidden", p.hidden)->check(CLI::Range(int64_t(1), int64_t(4096)));
  mlp->add_option("--schedule", p.schedule)->check(CLI::IsMember({"constant", "cosine"}));
  mlp->add_option("--sizes", p.sizes);
  mlp->add_flag("--verbose", p.verbose);
  tools::add_train_flags(mlp, p.train, {.steps = 100, .eval_every = 10},
                         [&p] { tools::require_divisible(p.batch, "--batch", p.train); });
  std::vector<std::string> args = {"graft", "train", "mlp", "--config", path};
  if (steps_on_command_line) args.insert(args.end(), {"--steps", "7"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    app.parse(int(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return false;
  }
  return true;
}

void check_ranges(const Parsed& p) {
  const tools::TrainFlags& f = p.train;
  GRAFT_FUZZ_EXPECT(f.steps >= 1 && f.steps <= (int64_t(1) << 40));
  GRAFT_FUZZ_EXPECT(std::isfinite(f.time_budget) && f.time_budget >= 0 && f.time_budget <= 1e9);
  GRAFT_FUZZ_EXPECT(f.checkpoint_every >= 0 && f.eval_every >= 0 && f.log_every >= 0 && f.patience >= 0);
  GRAFT_FUZZ_EXPECT(f.keep_checkpoints >= 1 && f.keep_checkpoints <= 1000000);
  GRAFT_FUZZ_EXPECT(f.grad_accumulation >= 1 && f.grad_accumulation <= 1000000);
  GRAFT_FUZZ_EXPECT(std::isfinite(f.clip_grad_norm) && f.clip_grad_norm >= 0 && f.clip_grad_norm <= 1e12);
  GRAFT_FUZZ_EXPECT(f.seed >= 0 && f.threads >= 0 && f.threads <= 1024);
  GRAFT_FUZZ_EXPECT(f.patience == 0 || f.eval_every > 0);
  GRAFT_FUZZ_EXPECT(!(f.resume && f.overwrite));
  GRAFT_FUZZ_EXPECT(std::isfinite(p.lr) && p.lr >= 0 && p.lr <= 10);
  GRAFT_FUZZ_EXPECT(p.batch >= 1 && p.batch <= 65536 && p.batch % f.grad_accumulation == 0);
  GRAFT_FUZZ_EXPECT(p.hidden >= 1 && p.hidden <= 4096);
  GRAFT_FUZZ_EXPECT(p.schedule == "constant" || p.schedule == "cosine");
}

// config.json as the command would write it: the common flags plus its own by long name.
std::string config_json(const Parsed& p) {
  nlohmann::ordered_json j = tools::train_config("mlp", p.train);
  j["lr"] = p.lr;
  j["batch"] = p.batch;
  j["hidden"] = p.hidden;
  j["schedule"] = p.schedule;
  return j.dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool steps_flag = size > 0 && data[0] == '!';
  const std::string text(reinterpret_cast<const char*>(data) + steps_flag, size - steps_flag);
  Parsed p;
  if (!parse(fuzz::write_scratch("config.json", text), steps_flag, p)) return 0;
  check_ranges(p);
  if (steps_flag) GRAFT_FUZZ_EXPECT(p.train.steps == 7);  // the command line wins
  // A run's own config.json is accepted back as it is (with no command-line flags).
  const std::string saved = config_json(p);
  Parsed back;
  GRAFT_FUZZ_EXPECT(parse(fuzz::write_scratch("run-config.json", saved), false, back));
  GRAFT_FUZZ_EXPECT(config_json(back) == saved);
  return 0;
}
