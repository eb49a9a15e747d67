// What `graft train seq2seq` and `graft train transformer` (and their `graft translate`)
// share: the tokenizers, fitted on the training sentences, saved as src_vocab.txt /
// tgt_vocab.txt in the run directory and loaded back for translation; the encoding of data
// sets and input lines; decoding in batches; the attention heatmap of a translation.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "autograd/tensor.h"
#include "data/seq2seq_tasks.h"
#include "data/tokenizer.h"
#include "models/decoding.h"
#include "tools/heatmap.h"
#include "tools/plot.h"
#include "tools/train_flags.h"

namespace graft::tools {

using Ids = std::vector<std::vector<int64_t>>;

// A "word" (lowercased, punctuation split) or "char" tokenizer fitted on `texts`, keeping the
// most frequent tokens up to `max_size` in all, the four specials included (0: no limit).
inline std::unique_ptr<data::Tokenizer> fit_tokenizer(const std::string& kind,
                                                      const std::vector<std::string>& texts,
                                                      int64_t max_size) {
  if (kind == "word")
    return std::make_unique<data::WordTokenizer>(data::WordTokenizer::fit(texts, true, true, 1, max_size));
  return std::make_unique<data::CharTokenizer>(data::CharTokenizer::fit(texts, 1, max_size));
}

// The tokenizer of kind `kind` over the vocabulary file `path` (as fit_tokenizer made it).
inline std::unique_ptr<data::Tokenizer> load_tokenizer(const std::string& kind, const std::string& path) {
  data::Vocab v = data::Vocab::load(path);
  if (kind == "word") return std::make_unique<data::WordTokenizer>(std::move(v), true, true);
  return data::make_tokenizer(kind, std::move(v));
}

// One sentence as ids; a sentence of only spaces becomes one <unk>, so no sequence is empty.
inline std::vector<int64_t> encode_line(const data::Tokenizer& tok, const std::string& text) {
  std::vector<int64_t> ids = tok.encode(text);
  if (ids.empty()) ids.push_back(data::kUnk);
  return ids;
}

// The source (or, with `target`, the target) side of every example.
inline Ids encode_side(const data::Tokenizer& tok, const std::vector<data::Example>& ex, bool target) {
  Ids out;
  out.reserve(ex.size());
  for (const auto& e : ex) out.push_back(encode_line(tok, target ? e.target : e.source));
  return out;
}

// The decoding options of `graft translate`: max_len 0 stands for 2 x the longest input + 10.
inline models::DecodeOptions translate_options(const Ids& src, int64_t beam, int64_t max_len,
                                               double length_penalty) {
  int64_t longest = 0;
  for (const auto& s : src) longest = std::max<int64_t>(longest, int64_t(s.size()));
  return {.beam = beam, .max_len = max_len ? max_len : 2 * longest + 10, .length_penalty = length_penalty};
}

// model.translate over src in batches of `batch` sentences; a Ctrl-C stops between batches.
template <class Model>
std::vector<models::Hypothesis> translate_all(Model& model, const Ids& src,
                                              const models::DecodeOptions& dopt, size_t batch) {
  std::vector<models::Hypothesis> hyps;
  for_each_chunk(src.size(), batch, [&](size_t first, size_t last) {
    const Ids part(src.begin() + long(first), src.begin() + long(last));
    for (auto& h : model.translate(part, dopt, int64_t(batch))) hyps.push_back(std::move(h));
  });
  return hyps;
}

// Writes the attention weights w [T, S] of one translation as a PNG heatmap: rows the output
// tokens and <eos>, columns the source tokens (a space shown as U+2423); says so on stderr.
inline void write_attention_png(const std::string& path, const Tensor& w, std::vector<std::string> rows,
                                std::vector<std::string> cols, const std::string& title) {
  rows.push_back("<eos>");
  for (auto* v : {&rows, &cols})
    for (auto& s : *v)
      if (s == " ") s = "\u2423";  // a visible space
  const Tensor wf = w.to(DType::f32).contiguous();
  try {
    write_heatmap_png(path, wf.to_vector<float>(), w.size(0), w.size(1), rows, cols, title);
  } catch (...) {
    release_plot_caches();
    throw;
  }
  release_plot_caches();
  fmt::print(stderr, "wrote {} ({} output x {} source tokens)\n", path, w.size(0), w.size(1));
}

}  // namespace graft::tools
