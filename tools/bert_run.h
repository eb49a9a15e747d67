// The BERT config as the metadata of a run's model.safetensors ("bert.hidden_size" = "128", ...):
// `graft train bert-pretrain` and `bert-finetune` write it (tools/cmd_bert.cpp), bert-finetune
// and `graft predict` (tools/cmd_predict.cpp) read it back.
#pragma once
#include <map>
#include <string>

#include <fmt/format.h>

#include "models/bert.h"
#include "ops/error.h"

namespace graft::tools {

inline std::map<std::string, std::string> config_metadata(const models::BertConfig& c) {
  return {{"bert.vocab_size", std::to_string(c.vocab_size)},
          {"bert.hidden_size", std::to_string(c.hidden_size)},
          {"bert.num_layers", std::to_string(c.num_layers)},
          {"bert.num_heads", std::to_string(c.num_heads)},
          {"bert.intermediate_size", std::to_string(c.intermediate_size)},
          {"bert.max_position_embeddings", std::to_string(c.max_position_embeddings)},
          {"bert.type_vocab_size", std::to_string(c.type_vocab_size)},
          {"bert.pad_token_id", std::to_string(c.pad_token_id)},
          {"bert.layer_norm_eps", fmt::format("{:.17g}", c.layer_norm_eps)}};
}

// One integer of the metadata; graft::Error naming `path` when it is missing or not a number.
inline int64_t metadata_int(const std::map<std::string, std::string>& m, const std::string& key,
                            const std::string& path) {
  auto it = m.find(key);
  GRAFT_CHECK(it != m.end(), "bert: {} has no '{}' metadata; hint: use the model.safetensors "
              "of 'graft train bert-pretrain' or 'bert-finetune'", path, key);
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  GRAFT_CHECK(used > 0 && used == it->second.size(), "bert: {}: bad metadata {} = '{}'", path,
              key, it->second);
  return v;
}

// The config back from config_metadata's keys (pad_token_id and layer_norm_eps, which older
// runs did not write, default to BertConfig's). Sizes are checked by the model's constructor.
inline models::BertConfig config_from_metadata(const std::map<std::string, std::string>& m,
                                               const std::string& path) {
  models::BertConfig c;
  auto get = [&](const char* k) { return metadata_int(m, std::string("bert.") + k, path); };
  c.vocab_size = get("vocab_size"), c.hidden_size = get("hidden_size");
  c.num_layers = get("num_layers"), c.num_heads = get("num_heads");
  c.intermediate_size = get("intermediate_size");
  c.max_position_embeddings = get("max_position_embeddings");
  c.type_vocab_size = get("type_vocab_size");
  if (m.count("bert.pad_token_id")) c.pad_token_id = get("pad_token_id");
  if (auto it = m.find("bert.layer_norm_eps"); it != m.end()) {
    try {
      c.layer_norm_eps = std::stod(it->second);
    } catch (const std::exception&) {
      throw Error(fmt::format("bert: {}: bad metadata bert.layer_norm_eps = '{}'", path, it->second));
    }
  }
  return c;
}

}  // namespace graft::tools
