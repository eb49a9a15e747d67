// `graft predict RUN_DIR`: labels (and, with --probs, their probabilities) for input text, one
// example per line, from the run directory of a trained classifier: `graft train bert-finetune`
// (wordnet-lexname: one text per line, a line with a tab is refused; wordnet-gloss-match: a
// sentence and a gloss per line, A<TAB>B) or `graft train abcnn` (a sentence pair per line,
// A<TAB>B). Pair labels: 1 = match, 0 = not.
//
//   graft train bert-finetune --init out/bert-pre --run-dir out/bert-ft
//   echo "a small domesticated carnivore" | graft predict out/bert-ft --probs
//   graft predict runs/abcnn3 --input pairs.tsv
//
// The run directory must hold the model.safetensors its command writes when training stops:
// "graft.run" in its metadata names the kind of run, the model's sizes are there too, and the
// vocabulary is RUN_DIR/vocab.txt. Output: one line per input line, in order: the label, then
// (--probs) a tab and its probability with 4 decimals. Every input line is one example (an
// empty line too), so the output lines match the input's.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/pairs.h"
#include "data/wordnet_lexnames.h"
#include "data/wordpiece.h"
#include "models/abcnn.h"
#include "models/bert_heads.h"
#include "nn/safetensors.h"
#include "ops/error.h"
#include "tools/abcnn_run.h"
#include "tools/bert_run.h"
#include "tools/commands.h"
#include "tools/predict_run.h"

namespace graft::tools {

namespace {

namespace fs = std::filesystem;

struct PredictArgs {
  std::string run_dir, input = "-";
  bool probs = false;
  int64_t batch = 64;
};

// The input's lines ("-": stdin), without their line ends ("\r\n" too).
std::vector<std::string> read_input(const std::string& input) {
  std::ifstream file;
  if (input != "-") {
    file.open(input, std::ios::binary);
    GRAFT_CHECK(file.good(), "predict: cannot read --input {}", input);
  }
  std::istream& in = input == "-" ? std::cin : file;
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(std::move(l));
  }
  GRAFT_CHECK(!in.bad(), "predict: reading {} failed", input == "-" ? "stdin" : input);
  return lines;
}

// Prints row b of probs [B, K]: the arg-max label and, with `with_prob`, its probability.
void print_row(const std::vector<float>& probs, int64_t K, int64_t b, bool with_prob,
               const std::function<std::string(int64_t)>& label) {
  int64_t best = 0;
  for (int64_t k = 1; k < K; ++k)
    if (probs[size_t(b * K + k)] > probs[size_t(b * K + best)]) best = k;
  if (with_prob)
    fmt::print("{}\t{:.4f}\n", label(best), probs[size_t(b * K + best)]);
  else
    fmt::print("{}\n", label(best));
}

int predict_bert(const PredictArgs& a, const RunModel& run, const std::vector<std::string>& lines) {
  const auto& md = run.file.metadata;
  const models::BertConfig cfg = config_from_metadata(md, run.path);
  const int64_t K = metadata_int(md, "num_labels", run.path);
  const int64_t max_len = metadata_int(md, "max_seq_len", run.path);
  GRAFT_CHECK(K >= 1 && K <= 1 << 20 && max_len >= 3 && max_len <= cfg.max_position_embeddings,
              "predict: {}: num_labels {} or max_seq_len {} out of range", run.path, K, max_len);
  const std::string task = md.count("task") ? md.at("task") : "";
  const data::WordPieceTokenizer tok = data::WordPieceTokenizer::load(a.run_dir + "/vocab.txt");
  GRAFT_CHECK(tok.size() == cfg.vocab_size, "predict: {}/vocab.txt has {} tokens but the model "
              "{}", a.run_dir, tok.size(), cfg.vocab_size);
  models::BertForSequenceClassification model(cfg, K);
  load_run_weights(model, run);
  model.eval();
  NoGradGuard ng;
  auto label = [&](int64_t k) { return task == "wordnet-lexname" ? data::lexname(k) : std::to_string(k); };
  const bool pairs = task == "wordnet-gloss-match";  // [CLS] sentence [SEP] gloss [SEP]
  for (size_t i = 0; i < lines.size(); i += size_t(a.batch)) {
    const size_t n = std::min(lines.size() - i, size_t(a.batch));
    std::vector<data::PairEncoding> rows;
    size_t T = 1;
    for (size_t r = i; r < i + n; ++r) {
      const size_t tab = lines[r].find('\t');
      data::PairEncoding e;
      if (pairs) {
        GRAFT_CHECK(tab != std::string::npos && lines[r].find('\t', tab + 1) == std::string::npos,
                    "predict: input line {} needs exactly one tab: {} classifies pairs ({}), one "
                    "'sentence<TAB>gloss' per line", r + 1, a.run_dir, task);
        e = tok.encode_pair(std::string_view(lines[r]).substr(0, tab),
                            std::string_view(lines[r]).substr(tab + 1), max_len);
      } else {
        GRAFT_CHECK(tab == std::string::npos, "predict: input line {} holds a tab, but {} "
                    "classifies single texts ({}), one per line", r + 1, a.run_dir, task);
        e.input_ids = tok.encode(lines[r], true);  // [CLS] ... [SEP]
        if (int64_t(e.input_ids.size()) > max_len)
          e.input_ids.resize(size_t(max_len)), e.input_ids.back() = tok.sep_id();
        e.token_type_ids.assign(e.input_ids.size(), 0);
      }
      T = std::max(T, e.input_ids.size());
      rows.push_back(std::move(e));
    }
    std::vector<int64_t> flat(n * T, tok.pad_id()), types(n * T, 0);
    for (size_t b = 0; b < n; ++b) {
      std::copy(rows[b].input_ids.begin(), rows[b].input_ids.end(), flat.begin() + long(b * T));
      std::copy(rows[b].token_type_ids.begin(), rows[b].token_type_ids.end(), types.begin() + long(b * T));
    }
    const Shape s{int64_t(n), int64_t(T)};
    const Tensor logits = model.forward(from_vector(flat, s), from_vector(types, s));  // [B, K]
    const std::vector<float> p = softmax(logits, -1).to(DType::f32).contiguous().to_vector<float>();
    for (size_t b = 0; b < n; ++b) print_row(p, K, int64_t(b), a.probs, label);
  }
  return 0;
}

int predict_abcnn(const PredictArgs& a, const RunModel& run, const std::vector<std::string>& lines) {
  const models::AbcnnConfig cfg = abcnn_config_from_metadata(run.file.metadata, run.path);
  const data::PairVocab vocab = load_pair_vocab(a.run_dir + "/vocab.txt");
  GRAFT_CHECK(vocab.size() == cfg.vocab_size, "predict: {}/vocab.txt has {} words but the model "
              "{}", a.run_dir, vocab.size(), cfg.vocab_size);
  models::Abcnn model(cfg);
  load_run_weights(model, run);
  model.eval();
  NoGradGuard ng;
  std::vector<data::SentencePair> pairs;
  for (size_t r = 0; r < lines.size(); ++r) {
    const size_t tab = lines[r].find('\t');
    GRAFT_CHECK(tab != std::string::npos && lines[r].find('\t', tab + 1) == std::string::npos,
                "predict: input line {} must be a sentence pair, A<TAB>B (one tab), for the "
                "ABCNN run {}", r + 1, a.run_dir);
    pairs.push_back({data::tokenize_words(lines[r].substr(0, tab)),
                     data::tokenize_words(lines[r].substr(tab + 1)), 0});
  }
  auto label = [](int64_t k) { return std::to_string(k); };  // 1: a match, 0: not
  for (size_t i = 0; i < pairs.size(); i += size_t(a.batch)) {
    std::vector<int64_t> idx(std::min(pairs.size() - i, size_t(a.batch)));
    for (size_t b = 0; b < idx.size(); ++b) idx[b] = int64_t(i + b);
    const data::PairBatch pb = data::make_pair_batch(pairs, idx, vocab, cfg.max_len);
    const Tensor logits = model.forward_pair(pb.a, pb.b).logits;  // [B] or [B, 2]
    // P(no match), P(match) [B, 2]: a logistic output's logit z gives sigmoid(-z), sigmoid(z)
    const Tensor p = cfg.output == "softmax" ? softmax(logits, 1)
                                             : stack({sigmoid(neg(logits)), sigmoid(logits)}, 1);
    const std::vector<float> pv = p.to(DType::f32).contiguous().to_vector<float>();
    for (size_t b = 0; b < idx.size(); ++b) print_row(pv, 2, int64_t(b), a.probs, label);
  }
  return 0;
}

int run_predict(const PredictArgs& a) {
  const RunModel run = load_run_model(a.run_dir, "predict");
  const std::string kind = run_kind(run);
  GRAFT_CHECK(kind == "bert-finetune" || kind == "abcnn", "predict: {} is not a run of graft "
              "train bert-finetune or abcnn (its model: {}){}", a.run_dir, kind,
              kind == "gpt" ? "; sample from it: graft sample " + a.run_dir : std::string());
  const std::vector<std::string> lines = read_input(a.input);
  return kind == "abcnn" ? predict_abcnn(a, run, lines) : predict_bert(a, run, lines);
}

}  // namespace

void register_predict_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
  (void)train;
  auto a = std::make_shared<PredictArgs>();
  CLI::App* c = app.add_subcommand(
      "predict", "Classify text with a trained bert-finetune or abcnn run: one example per line "
                 "in (abcnn: A<TAB>B), one label (--probs: label<TAB>probability) per line out");
  c->add_option("run_dir", a->run_dir, "The run directory (graft train bert-finetune / abcnn --run-dir)")->required();
  c->add_option("--input", a->input, "Input file, one example per line ('-' = stdin)")->capture_default_str();
  c->add_flag("--probs", a->probs, "Also print each label's probability (label<TAB>p)");
  c->add_option("--batch", a->batch, "Examples per forward pass")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(65536)));
  cmds.push_back({c, [a] { return run_predict(*a); }});
}

}  // namespace graft::tools
