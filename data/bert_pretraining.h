// BERT pretraining examples (Devlin et al. 2019): documents -> sentences -> sentence pairs
// [CLS] A [SEP] B [SEP] with next-sentence labels, then masked-LM corruption.
//
//   auto docs = data::split_documents(text);                 // blank lines separate documents
//   std::vector<data::TokenizedDocument> tdocs = data::tokenize_documents(docs, tok);
//   data::BertPretrainingOptions o{.max_seq_len = 128, .seed = 1};
//   std::vector<data::BertExample> ex = data::create_pretraining_examples(tdocs, tok, o);
//   // ex[i].input_ids / token_type_ids / labels (-100 = not predicted) / next_sentence_label
//
// Pairs follow Google's create_pretraining_data.py: sentences of a document are gathered into
// a chunk of up to target_len tokens (max_seq_len - 3, or with short_seq_prob a random shorter
// length); A is its first 1..n-1 sentences; B is the rest (the actual next sentences, label 0)
// or, with probability 0.5, sentences from a random other document (label 1; the unused
// sentences are put back). The pair is cut to max_seq_len - 3 tokens by removing tokens from
// the longer side, at its front or back at random. Masking picks max(1, round(mask_prob * n))
// of the n non-special positions uniformly (at most max_predictions): 80% -> [MASK], 10% -> a
// uniformly random non-special token, 10% unchanged. Everything is deterministic given seed
// (std::mt19937_64, whose output is fixed by the standard, with our own range reductions).
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "data/wordpiece.h"

namespace graft::data {

inline constexpr int64_t kIgnoreIndex = -100;  // nn/loss.h's default ignore_index

using TokenizedDocument = std::vector<std::vector<int64_t>>;  // sentences of token ids

// Documents separated by blank lines (a line holding only whitespace counts as blank).
std::vector<std::string> split_documents(const std::string& text);
// Sentences end at '.', '!' or '?' (with closing quotes/brackets) followed by whitespace, and at
// line breaks; empty sentences are dropped.
std::vector<std::string> split_sentences(const std::string& document);
// split_sentences + tokenizer.encode per sentence; sentences with no tokens are dropped and
// documents left empty are dropped.
std::vector<TokenizedDocument> tokenize_documents(const std::vector<std::string>& documents,
                                                  const WordPieceTokenizer& tokenizer);

struct BertPretrainingOptions {
  int64_t max_seq_len = 128;
  double short_seq_prob = 0.1;
  double next_sentence_prob = 0.5;  // probability of the actual next sentence
  double mask_prob = 0.15;
  double mask_token_prob = 0.8;     // of the selected: -> [MASK]
  double random_token_prob = 0.1;   // of the selected: -> random token (rest unchanged)
  int64_t max_predictions = 20;     // per sequence; 0 = no limit
  int64_t dupe_factor = 1;          // passes over the corpus, each with fresh randomness
  uint64_t seed = 12345;
};

struct BertExample {
  std::vector<int64_t> input_ids;       // [T] after masking
  std::vector<int64_t> token_type_ids;  // [T] 0 for [CLS] A [SEP], 1 for B [SEP]
  std::vector<int64_t> labels;          // [T] original id at predicted positions, else -100
  int64_t next_sentence_label = 0;      // 0 = B follows A, 1 = B is random (as HF)
};

// Cuts A and B to max_tokens together, as Google's truncate_seq_pair: while too long, one token
// goes from the longer side (B on ties), from its front or its back with probability 1/2 each
// (one uniform draw from rng per token removed). O(|A| + |B|).
void truncate_pair(std::vector<int64_t>& a, std::vector<int64_t>& b, size_t max_tokens,
                   std::mt19937_64& rng);

// The masked-LM corruption of one sequence, in place: returns the labels (original ids where
// selected, kIgnoreIndex elsewhere). Positions holding [CLS]/[SEP]/[PAD] are never selected.
std::vector<int64_t> mask_tokens(std::vector<int64_t>& ids, const WordPieceTokenizer& tokenizer,
                                 const BertPretrainingOptions& options, std::mt19937_64& rng);

std::vector<BertExample> create_pretraining_examples(const std::vector<TokenizedDocument>& docs,
                                                     const WordPieceTokenizer& tokenizer,
                                                     const BertPretrainingOptions& options);

}  // namespace graft::data
