// What `graft train bert-pretrain` (tools/cmd_bert.cpp) and `graft train bert-finetune`
// (tools/cmd_bert_finetune.cpp) share: the architecture flags, the run-directory check made
// before any data is prepared, and counting correct argmax predictions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "autograd/tensor.h"
#include "models/bert.h"
#include "nn/trainer.h"

namespace graft::tools::bert {

// Architecture options shared by both commands: a named size, optionally overridden.
struct ArchArgs {
  std::string size = "tiny";
  int64_t hidden = 0, layers = 0, heads = 0, ffn = 0;  // 0 = the named config's
  double dropout = 0.1;
};

// The named config with the overrides applied; position embeddings for max(max_len, 128).
models::BertConfig make_config(const ArchArgs& a, int64_t vocab, int64_t max_len);
// --size, --hidden, --layers, --heads, --ffn, --dropout.
void add_arch_options(CLI::App* c, ArchArgs& a);
// The architecture flags by long name, for config.json.
void add_arch_config(nlohmann::ordered_json& j, const ArchArgs& a);

// Whether run_dir holds a checkpoint: the pointer, or a step directory with a train state that
// resume could fall back on.
bool has_checkpoint(const std::string& run_dir);

// What nn::Trainer refuses when fit() starts, checked before the command writes anything in
// the run directory (vocab.txt) or spends minutes preparing data: a run directory that holds a
// checkpoint, without --resume or --overwrite; and a resume whose configuration (to.config_json)
// differs from the run's config.json in a key that to.resume_may_change does not list. A
// refused run leaves the run directory exactly as it was, so it can still be resumed.
void check_run_dir(const nn::TrainerOptions& to, const std::string& cmd);

// How many rows of logits [N, K] have their argmax equal to target[row].
int64_t count_equal(const Tensor& logits, const std::vector<int64_t>& target);

}  // namespace graft::tools::bert
