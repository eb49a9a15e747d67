// `graft average`: checkpoint averaging (nn/checkpoint_average.h). The mean of a run's newest
// checkpoints, written as a model file that `graft translate --model` (or any loader of the
// run's model.safetensors) takes; the run directory itself is left as it is.
//
//   graft average --run-dir runs/bible --last 5          # -> runs/bible/model_avg5.safetensors
//   graft average a.safetensors b.safetensors --out ab.safetensors
//
// The output keeps the metadata of the run's model.safetensors (a Transformer's options and
// tokenizer kind, which translate needs) or, without a run, of the first file. An existing
// output file is refused unless --overwrite; an output that is one of the inputs always is.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nn/checkpoint_average.h"
#include "nn/safetensors.h"
#include "ops/error.h"
#include "tools/commands.h"

namespace graft::tools {

namespace {

namespace fs = std::filesystem;

struct AverageArgs {
  std::string run_dir, out;
  std::vector<std::string> files;
  int64_t last = 5;
  bool overwrite = false;
};

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

int run_average(const AverageArgs& a) {
  GRAFT_CHECK(a.run_dir.empty() != a.files.empty(),
              "average: give either --run-dir (its newest --last checkpoints) or checkpoint files, not both");
  const std::vector<std::string> inputs = a.files.empty() ? nn::run_checkpoint_models(a.run_dir, a.last) : a.files;
  std::string out = a.out;
  if (out.empty()) {
    GRAFT_CHECK(!a.run_dir.empty(), "average: --out is needed when checkpoint files are given");
    out = fmt::format("{}/model_avg{}.safetensors", a.run_dir, inputs.size());
  }
  for (const std::string& in : inputs)
    GRAFT_CHECK(!same_file(in, out), "average: --out {} is one of the inputs", out);
  std::error_code ec;
  GRAFT_CHECK(a.overwrite || !fs::exists(out, ec), "average: {} exists; hint: --overwrite replaces it", out);
  const std::string meta_from = !a.run_dir.empty() && fs::exists(a.run_dir + "/model.safetensors", ec)
                                    ? a.run_dir + "/model.safetensors"
                                    : inputs.front();
  const auto metadata = nn::load_safetensors(meta_from).metadata;
  nn::save_safetensors(out, nn::average_checkpoints(inputs), metadata);  // atomic
  nlohmann::ordered_json j;
  j["out"] = out;
  j["checkpoints"] = inputs;
  j["metadata_from"] = meta_from;
  fmt::print("{}\n", j.dump());
  return 0;
}

}  // namespace

void register_average_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
  (void)train;
  auto a = std::make_shared<AverageArgs>();
  CLI::App* c = app.add_subcommand(
      "average", "Average checkpoints' weights (a run's newest --last, or the files given) into one "
                 "model file for translate --model; one JSON line out");
  c->add_option("files", a->files, "Checkpoint files (model.safetensors of one model) instead of --run-dir");
  c->add_option("--run-dir", a->run_dir, "A training run: average its newest --last checkpoints "
                "(checkpoint/step-*/; train with --keep-checkpoints N to have N)");
  c->add_option("--last", a->last, "With --run-dir: how many of the newest checkpoints")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1000000)));
  c->add_option("--out", a->out, "Output file (default: RUN_DIR/model_avgN.safetensors)");
  c->add_flag("--overwrite", a->overwrite, "Replace an existing output file");
  cmds.push_back({c, [a] { return run_average(*a); }});
}

}  // namespace graft::tools
