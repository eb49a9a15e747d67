// The ABCNN model of a `graft train abcnn` run directory: RUN_DIR/model.safetensors (metadata
// "graft.run": "abcnn" and the AbcnnConfig as "abcnn.*" strings) and RUN_DIR/vocab.txt (the
// PairVocab, one word per line, line i = id i). tools/cmd_abcnn.cpp writes them when training
// stops, `graft predict` (tools/cmd_predict.cpp) reads them.
#pragma once
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "data/pairs.h"
#include "models/abcnn.h"
#include "ops/error.h"
#include "tools/bert_run.h"  // metadata_int

namespace graft::tools {

inline std::map<std::string, std::string> abcnn_metadata(const models::AbcnnConfig& c) {
  return {{"graft.run", "abcnn"},
          {"abcnn.vocab_size", std::to_string(c.vocab_size)},
          {"abcnn.embed_dim", std::to_string(c.embed_dim)},
          {"abcnn.max_len", std::to_string(c.max_len)},
          {"abcnn.width", std::to_string(c.width)},
          {"abcnn.channels", std::to_string(c.channels)},
          {"abcnn.blocks", std::to_string(c.blocks)},
          {"abcnn.variant", std::to_string(int(c.variant))},
          {"abcnn.output", c.output}};
}

// graft::Error naming `path` for a missing key or a value outside what `train abcnn` accepts.
inline models::AbcnnConfig abcnn_config_from_metadata(const std::map<std::string, std::string>& m,
                                                      const std::string& path) {
  auto get = [&](const char* k, int64_t lo, int64_t hi) {
    const int64_t v = metadata_int(m, std::string("abcnn.") + k, path);
    GRAFT_CHECK(v >= lo && v <= hi, "abcnn: {}: metadata abcnn.{} = {} outside [{}, {}]", path, k,
                v, lo, hi);
    return v;
  };
  models::AbcnnConfig c;
  c.vocab_size = get("vocab_size", 2, int64_t(1) << 24);
  c.embed_dim = get("embed_dim", 1, 4096), c.max_len = get("max_len", 1, 1024);
  c.width = get("width", 1, 32), c.channels = get("channels", 1, 4096);
  c.blocks = get("blocks", 1, 2), c.variant = models::AbcnnVariant(get("variant", 0, 3));
  auto out = m.find("abcnn.output");
  GRAFT_CHECK(out != m.end() && (out->second == "logistic" || out->second == "softmax"),
              "abcnn: {}: metadata abcnn.output must be logistic or softmax", path);
  c.output = out->second;
  return c;
}

inline void save_pair_vocab(const data::PairVocab& v, const std::string& path) {
  std::string text;
  for (int64_t i = 0; i < v.size(); ++i) text += v.word(i) + "\n";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    GRAFT_CHECK(out.good(), "abcnn: cannot write {}", tmp);
  }
  GRAFT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "abcnn: cannot rename {} over {}", tmp, path);
}

inline data::PairVocab load_pair_vocab(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GRAFT_CHECK(in.good(), "abcnn: cannot read {}", path);
  std::vector<std::string> words;
  for (std::string w; std::getline(in, w);) words.push_back(w);
  try {
    return data::PairVocab::from_words(std::move(words));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace graft::tools
