// The trained model of a run directory, as `graft predict` and `graft sample` read it
// (tools/cmd_predict.cpp, tools/cmd_sample.cpp): RUN_DIR/model.safetensors, written when
// training stops by `graft train bert-finetune` (metadata "graft.run": "bert-finetune"),
// `graft train abcnn` ("graft.run": "abcnn") and `graft train gpt` (metadata "gpt": its options).
#pragma once
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "nn/module.h"
#include "nn/safetensors.h"
#include "ops/error.h"

namespace graft::tools {

struct RunModel {
  std::string path;  // RUN_DIR/model.safetensors
  nn::SafetensorsFile file;
};

// graft::Error (prefixed with `cmd`) when run_dir is not a directory or holds no model.
inline RunModel load_run_model(const std::string& run_dir, const char* cmd) {
  namespace fs = std::filesystem;
  std::error_code ec;
  GRAFT_CHECK(fs::is_directory(run_dir, ec), "{}: no run directory {}; hint: pass the --run-dir "
              "of a finished graft train run", cmd, run_dir);
  RunModel r{(fs::path(run_dir) / "model.safetensors").string(), {}};
  GRAFT_CHECK(fs::exists(r.path, ec), "{}: {} holds no model.safetensors; hint: the train "
              "command writes it when training stops (was the run interrupted before, or is this "
              "another kind of run?)", cmd, run_dir);
  r.file = nn::load_safetensors(r.path);
  return r;
}

// "bert-finetune", "gpt", ... from the model's metadata; "unknown" for a file without them.
inline std::string run_kind(const RunModel& r) {
  const auto& md = r.file.metadata;
  if (auto it = md.find("graft.run"); it != md.end()) return it->second;
  if (md.count("gpt")) return "gpt";
  if (md.count("bert.hidden_size")) return "bert-pretrain";
  if (md.count("seq2seq") || md.count("transformer")) return "translation";
  return "unknown";
}

// Copies the run's tensors into m (validated first: m is unchanged on error).
inline void load_run_weights(nn::Module& m, const RunModel& r) {
  try {
    m.load_state_dict(r.file.tensors);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", r.path, e.what()));
  }
}

}  // namespace graft::tools
