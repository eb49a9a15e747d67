// graft train bert-pretrain --export (tools/bert_export.h).
#include "tools/bert_export.h"

#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "models/bert_hf.h"
#include "ops/error.h"
#include "ops/file_io.h"

namespace graft::tools {

namespace {
namespace fs = std::filesystem;

// One example as a JSON line; the labels as [position, original id] pairs of the masked ones.
std::string example_line(const data::BertExample& e) {
  nlohmann::json j;
  j["input_ids"] = e.input_ids;
  j["token_type_ids"] = e.token_type_ids;
  nlohmann::json masked = nlohmann::json::array();
  for (size_t t = 0; t < e.labels.size(); ++t)
    if (e.labels[t] != data::kIgnoreIndex) masked.push_back({int64_t(t), e.labels[t]});
  j["masked"] = std::move(masked);
  j["next_sentence_label"] = e.next_sentence_label;
  return j.dump() + "\n";
}

void write_lines(const std::string& path, size_t n, const std::function<std::string(size_t)>& line) {
  atomic_write(path, [&](std::FILE* f) {
    for (size_t i = 0; i < n; ++i) {
      const std::string s = line(i);
      std::fwrite(s.data(), 1, s.size(), f);
    }
  }, "bert-pretrain --export");
}
}  // namespace

void export_pretraining(const std::string& dir, const std::vector<data::BertExample>& train,
                        const std::vector<data::BertExample>& eval,
                        const std::vector<std::vector<int64_t>>& epochs,
                        const data::WordPieceTokenizer& tok, const models::BertForPreTraining& init,
                        const nlohmann::ordered_json& settings) {
  std::error_code ec;
  GRAFT_CHECK(!fs::exists(dir, ec) || (fs::is_directory(dir, ec) && fs::is_empty(dir, ec)),
              "train bert-pretrain: --export {} exists and is not an empty directory; hint: "
              "choose a new directory (nothing is overwritten)", dir);
  fs::create_directories(dir, ec);
  GRAFT_CHECK(fs::is_directory(dir), "train bert-pretrain: cannot create --export {}: {}", dir,
              ec.message());
  const fs::path d(dir);
  write_lines((d / "train.jsonl").string(), train.size(), [&](size_t i) { return example_line(train[i]); });
  write_lines((d / "eval.jsonl").string(), eval.size(), [&](size_t i) { return example_line(eval[i]); });
  write_lines((d / "epochs.jsonl").string(), epochs.size(),
              [&](size_t i) { return nlohmann::json(epochs[i]).dump() + "\n"; });
  tok.save((d / "vocab.txt").string());
  models::save_hf_bert(init, (d / "init").string());
  tok.save((d / "init" / "vocab.txt").string());  // a complete HF directory (--init-hf takes it)
  atomic_write((d / "settings.json").string(), settings.dump(2) + "\n", "bert-pretrain --export");
}

}  // namespace graft::tools
