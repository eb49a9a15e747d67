// Recurrent encoder-decoders (Sutskever et al. 2014; Bahdanau et al. 2015; Luong et al. 2015;
// Xu et al. 2015), batch-first. Letters: B batch, S source length, T target length, E
// embedding width, H hidden width, V vocabulary, L layers.
//
//   models::Seq2SeqOptions o{.src_vocab = 40, .tgt_vocab = 14, .cell = "lstm",
//                            .attention = "bahdanau"};
//   models::Seq2Seq model(o);
//   data::Seq2SeqBatch b = data::make_seq2seq_batch(src_ids, tgt_ids);
//   Tensor loss = model.loss(b).loss;                     // teacher forcing
//   auto hyps = model.translate(src_ids, {.beam = 5, .max_len = 20});
//
// Encoder: Embedding(src) -> RNN/LSTM/GRU (L layers, optionally bidirectional with H/2 per
// direction, so its outputs and final states are H wide) -> memory [B, S, H] and the final
// state of each layer, which initialises the decoder (the same cell type, L stacked cells).
// Decoder step t, with y_{t-1} the previous token and e = Embedding(y_{t-1}) [B, E]:
//   none         h_t = cell(e, h_{t-1});  logits = W_out h_t          (context = final state)
//   bahdanau,    c_t = attend(h_{t-1}, memory); h_t = cell([e; c_t], h_{t-1});
//   hard         h~_t = tanh(W_c [c_t; h_t]); logits = W_out h~_t
//   dot, general, concat, local-m, local-p (Luong):
//                h_t = cell([e; h~_{t-1}], h_{t-1}) (input feeding; [e] without it);
//                c_t = attend(h_t, memory); h~_t = tanh(W_c [c_t; h_t]); logits = W_out h~_t
// Attention query is the top layer's state; the source padding mask goes to every attention.
// Training (loss()): teacher forcing, where each step's input token is, with probability
// sampling_ratio, the model's own arg-max prediction of the previous step instead (scheduled
// sampling); the loss is the mean cross-entropy over target tokens (<eos> included, <pad>
// excluded). Hard attention adds REINFORCE (reward = the sentence's log-likelihood, a moving-
// average baseline, an entropy bonus); doubly_stochastic > 0 adds lambda sum_i (1 - sum_t a_ti)^2.
// Parameter names: src_embed.weight, encoder.weight_ih_l0, decoder.0.weight_ih,
// attention.*, combine.weight, out.weight, ...
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batching.h"
#include "models/decoding.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/rnn.h"
#include "nn/rnn_attention.h"
#include "ops/random.h"

namespace graft::models {

struct Seq2SeqOptions {
  int64_t src_vocab = 0, tgt_vocab = 0;  // including the 4 specials
  int64_t embed = 64;
  int64_t hidden = 128;
  int64_t layers = 1;
  std::string cell = "lstm";       // rnn, lstm, gru
  bool bidirectional = false;      // encoder only; needs an even hidden
  std::string attention = "none";  // none or nn::attention_names()
  int64_t attn_dim = 0;            // 0 = hidden
  int64_t window = 5;              // local-m / local-p: D
  bool input_feeding = true;       // Luong kinds only
  double dropout = 0.0;            // embeddings, between decoder layers and before W_out
  double doubly_stochastic = 0.0;  // lambda of the doubly-stochastic penalty (0 = off)
  double entropy_weight = 0.01;    // hard attention: REINFORCE entropy bonus
  double baseline_decay = 0.9;     // hard attention: moving-average baseline
  uint64_t seed = 1234;            // hard attention's sampler

  std::string to_json() const;
  // graft::Error for bad JSON, unknown keys or wrong types.
  static Seq2SeqOptions from_json(const std::string& text);
};

// The source side, encoded once per batch.
struct Memory {
  Tensor keys;     // [B, S, H] encoder outputs
  Tensor key_padding_mask;  // bool [B, S], true = padding (PyTorch's convention)
  Tensor lengths;  // int64 [B]
  Tensor keys_proj;  // attention->project_keys(keys), once per batch (undefined: no such kind)
  std::vector<nn::RnnState> final_state;  // the encoder's, per layer: h [B, H] (c for LSTM)
};

struct DecoderState {
  std::vector<nn::RnnState> layers;  // per decoder layer: h [B, H] (c [B, H] for LSTM)
  Tensor feed;                       // h~_{t-1} [B, H] (input feeding), zeros at t = 0
  int64_t t = 0;                     // decoder step
};

struct StepOutput {
  Tensor hidden;   // h~_t [B, H] (h_t without attention): what W_out reads
  Tensor weights;  // [B, S] attention weights (undefined without attention)
  Tensor context;  // c_t [B, H] (undefined without attention)
  Tensor state;    // h_t [B, H], the top decoder layer
};

struct LossOutput {
  Tensor loss;         // what to backpropagate: cross-entropy (+ REINFORCE, + penalty)
  double nll = 0;      // the mean cross-entropy per target token
  int64_t tokens = 0;  // target tokens counted
};

class Seq2Seq : public nn::Module {
 public:
  explicit Seq2Seq(Seq2SeqOptions options);  // graft::Error for bad options
  std::string repr() const override;

  // src int64 [B, S] (ids < src_vocab), lengths int64 [B] in [1, S].
  Memory encode(const Tensor& src, const Tensor& lengths);
  DecoderState initial_state(const Memory& mem);
  // One decoder step from the previous tokens prev int64 [B]; updates st.
  StepOutput step(const Tensor& prev, DecoderState& st, const Memory& mem);
  Tensor project(const Tensor& hidden) { return out->forward(hidden); }  // [..., H] -> [..., V]

  // Teacher-forced logits [B, T, V] for tgt_in [B, T]; with sampling_ratio > 0 (training),
  // scheduled sampling draws from gen. weights (optional out): per step [B, S].
  Tensor forward_logits(const data::Seq2SeqBatch& batch, double sampling_ratio = 0.0,
                        Generator* gen = nullptr, std::vector<Tensor>* weights = nullptr);
  LossOutput loss(const data::Seq2SeqBatch& batch, double sampling_ratio = 0.0,
                  Generator* gen = nullptr);

  // A decoder over B rows of this batch's sources for greedy_decode / beam_search.
  std::unique_ptr<IncrementalDecoder> decoder(const Tensor& src, const Tensor& lengths);
  // Decodes in eval mode without grad (restores the previous mode); beam 1 = greedy search.
  std::vector<Hypothesis> translate(const std::vector<std::vector<int64_t>>& src,
                                    const DecodeOptions& opt, int64_t batch_size = 64);
  // The attention weights [T, S] of a teacher-forced pass over (src, output tokens + <eos>):
  // row t is the distribution the decoder used to emit output token t (or <eos>).
  Tensor attention_matrix(const std::vector<int64_t>& src, const std::vector<int64_t>& output);

  const Seq2SeqOptions options;
  std::shared_ptr<nn::Embedding> src_embed, tgt_embed;
  std::shared_ptr<nn::RNNBase> encoder;
  std::vector<std::shared_ptr<nn::RNNCellBase>> decoder_cells;  // "decoder.<l>"
  std::shared_ptr<nn::Attention> attention;                      // null for "none"
  std::shared_ptr<nn::Linear> combine;                           // W_c: 2H -> H (attention only)
  std::shared_ptr<nn::Linear> out;                               // W_out: H -> V
  // Speed-ups with the same math (results equal up to rounding; the tests compare both):
  // encode() precomputes the attention's key projection (U h, W_h h, h W) once per batch, and
  // teacher-forced passes embed all target tokens at once and, when h~_t does not feed the next
  // step, run W_c and W_out once over all steps. false = the plain step-by-step path.
  bool fast_paths = true;

 private:
  bool luong() const;
  bool hard() const { return options.attention == "hard"; }
  Tensor drop(const Tensor& x);
  // step() up to h_t and c_t, without h~_t = tanh(W_c [c_t; h_t]); x = the embedded input [B, E].
  StepOutput step_core(Tensor x, DecoderState& st, const Memory& mem);
  std::unique_ptr<nn::Reinforce> reinforce_;
  std::vector<Tensor> hard_log_probs_, hard_entropies_;  // per step of the last pass (hard)
};

// Exact-match / token accuracy of decoded outputs against references.
struct Accuracy {
  double exact = 0;  // fraction of outputs equal to their reference
  double token = 0;  // fraction of reference positions predicted right (position by position)
  int64_t count = 0;
};
Accuracy sequence_accuracy(const std::vector<std::vector<int64_t>>& outputs,
                           const std::vector<std::vector<int64_t>>& references);

}  // namespace graft::models
