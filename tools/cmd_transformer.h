// What tools/cmd_transformer.cpp (graft train transformer, graft translate of a Transformer run)
// shares with tools/cmd_gpt.cpp (graft train gpt) and tools/cmd_seq2seq.cpp (graft translate).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/commands.h"

namespace graft::tools {

// True when a model.safetensors' metadata comes from `graft train transformer`.
inline bool is_transformer_run(const std::map<std::string, std::string>& metadata) {
  return metadata.count("transformer") > 0;
}

struct TransformerTranslateArgs {
  std::string run_dir;
  std::string model;                // weights ("" = run_dir/model.safetensors), e.g. from graft average
  std::vector<std::string> inputs;  // empty: none (the caller reads stdin first)
  int64_t beam = 5, max_len = 0, threads = 1;
  double length_penalty = 1.0;
  std::string heatmap;              // PNG of one cross-attention head for inputs[0]
  int64_t layer = -1, head = 0;     // which decoder layer (-1: last) and head (-1: mean)
};
// Decodes the inputs with the Transformer in run_dir and prints one line each; graft::Error
// for a bad run directory, layer or head.
int translate_transformer(const TransformerTranslateArgs& a);

// --d-model, --heads, --dropout, --warmup and --lr-scale (the Noam schedule): the flags that
// `graft train transformer` and `graft train gpt` share, with their defaults.
struct TransformerFlags {
  int64_t d_model = 128, heads = 4;
  double dropout = 0.1;
  int64_t warmup = 400;
  double lr_scale = 1.0;
};
void add_transformer_flags(CLI::App* t, TransformerFlags& f);
// Their entries in the run's config.json, by long name.
void add_transformer_config(nlohmann::ordered_json& j, const TransformerFlags& f);

// `graft train gpt` (tools/cmd_gpt.cpp), registered by register_transformer_commands.
void register_gpt_command(CLI::App& train, Commands& cmds);

}  // namespace graft::tools
