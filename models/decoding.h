// Greedy and beam-search decoding over any step-wise decoder, batched over sentences.
//
// An IncrementalDecoder holds N rows of decoder state (one per sentence, or per sentence and
// beam); step() feeds each row its previous token and returns log-probabilities of the next;
// reorder() keeps / duplicates rows (beam search calls it with the surviving hypotheses'
// parents). models::Seq2Seq::decoder() returns one; tests use tiny hand-made ones.
//
//   auto dec = model.decoder(src, src_lengths);                 // N = B rows
//   auto greedy = models::greedy_decode(*dec, B, {.max_len = 40});
//   auto beam = models::beam_search(*dec2, B, {.beam = 5, .max_len = 40, .length_penalty = 1});
//   beam[b].tokens   // best hypothesis of sentence b, without <bos>/<eos>
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace graft::nn {
class Module;
}

namespace graft::models {

// Loads the weights of a safetensors file into m for decoding or prediction (graft translate),
// as nn::load_into, but first refuses a file holding a NaN or an infinity with a graft::Error
// naming the file and the tensor (such a model decodes to empty or garbage output). m is
// unchanged on any error.
void load_for_inference(nn::Module& m, const std::string& path);

class IncrementalDecoder {
 public:
  virtual ~IncrementalDecoder() = default;
  // prev int64 [N] -> log-probabilities [N, V] (float32 or float64) of the next token.
  virtual Tensor step(const Tensor& prev) = 0;
  // New rows: row i becomes old row index[i] (int64 [N']).
  virtual void reorder(const Tensor& index) = 0;
  // Beam search's per-step reorder: the same N rows, each index[i] inside row i's sentence
  // (rows b*K .. b*K+K-1), so state that is one copy per sentence (the encoder memory, the
  // cross-attention keys) may stay where it is. The default reorders everything.
  virtual void reorder_beams(const Tensor& index) { reorder(index); }
};

// The longest decode max_len may ask for (graft::Error beyond): a model that never emits
// <eos> stops there instead of running for days.
inline constexpr int64_t kMaxDecodeLen = int64_t(1) << 20;

struct DecodeOptions {
  int64_t beam = 1;             // beam width (1 = greedy search through beam_search)
  int64_t max_len = 100;        // most tokens generated per sentence, <eos> not counted
  double length_penalty = 1.0;  // rank finished hypotheses by logp / len^length_penalty (0 = raw)
  int64_t bos = 1, eos = 2;
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // without <bos> and <eos>
  double logp = 0;              // sum of token log-probabilities (<eos> included if finished)
  double score = 0;             // logp / len^length_penalty, len = tokens + 1 if finished
  bool finished = false;        // ended with <eos> (false: stopped at max_len)
};

// The arg-max token at every step until <eos> or max_len. Stops early once every row has
// finished.
std::vector<Hypothesis> greedy_decode(IncrementalDecoder& dec, int64_t batch,
                                      const DecodeOptions& opt);

// Beam search: rows are expanded to batch * beam; at each step every live hypothesis is
// extended by its top tokens and the best `beam` per sentence survive; one ending in <eos> is
// moved to the sentence's finished list. A sentence is done when it has `beam` finished
// hypotheses or max_len is reached (live ones then count as unfinished candidates). Returns
// the best by score per sentence. With beam = 1 it returns exactly greedy_decode's tokens.
// Both searches drop the rows of finished sentences from the decoder (reorder with fewer rows)
// once a quarter of the rows are no longer needed.
std::vector<Hypothesis> beam_search(IncrementalDecoder& dec, int64_t batch,
                                    const DecodeOptions& opt);

// Length-normalised score: logp / len^alpha.
double normalized_score(double logp, int64_t len, double alpha);

}  // namespace graft::models
