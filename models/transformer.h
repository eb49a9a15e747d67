// The encoder-decoder Transformer of "Attention is all you need" (Vaswani et al. 2017) for
// sequence-to-sequence tasks, batch first. Letters: B batch, S source length, T target length,
// C d_model, V vocabulary.
//
//   models::TransformerOptions o{.src_vocab = 40, .tgt_vocab = 14, .d_model = 64, .nhead = 4};
//   models::Transformer model(o);
//   data::Seq2SeqBatch b = data::make_seq2seq_batch(src_ids, tgt_ids);
//   Tensor loss = model.loss(b, /*label_smoothing=*/0.1).loss;      // teacher forcing
//   auto hyps = model.translate(src_ids, {.beam = 4, .max_len = 20}); // KV-cached decoding
//
// embed(x) = Embedding(x) sqrt(C) + PE (sinusoidal, or learned), then dropout; encoder and
// decoder stacks of nn::TransformerEncoderLayer / DecoderLayer (post-norm as in the paper, or
// pre-norm); logits = h W^T with W the target embedding (tied, the paper's choice) or a
// separate Linear "generator". share_embeddings makes source and target use one table (a joint
// vocabulary: src_vocab == tgt_vocab). Embeddings start ~ N(0, C^-1/2) so that the scaled
// inputs have unit variance. Parameter names: src_embed.weight (tgt_embed.weight unless
// shared), encoder.layers.0.self_attn.in_proj_weight, decoder.layers.0.multihead_attn...,
// generator.weight (untied only).
//
// Decoding (greedy or beam, models/decoding.h) runs the decoder one token at a time: with the
// KV cache (default) each step attends to cached keys/values, so its cost grows linearly with
// the prefix length; without it every step recomputes the whole prefix (quadratic per step).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batching.h"
#include "models/decoding.h"
#include "nn/layers.h"
#include "nn/transformer.h"

namespace graft::models {

struct TransformerOptions {
  int64_t src_vocab = 0, tgt_vocab = 0;  // including the 4 specials
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";
  bool norm_first = false;
  bool share_embeddings = false;  // one table for source and target (src_vocab == tgt_vocab)
  bool tie_output = true;         // logits use the target embedding matrix
  bool learned_positions = false;
  int64_t max_len = 512;
  // "layers": each layer's own reset (Linear: Kaiming uniform; attention in-projections: Xavier),
  // as torch.nn.TransformerEncoderLayer alone; "xavier": Xavier uniform on every matrix of both
  // stacks, as torch.nn.Transformer resets them.
  std::string init = "layers";
  std::string to_json() const;
  // graft::Error for bad JSON, unknown keys or wrong types.
  static TransformerOptions from_json(const std::string& text);
};

struct TransformerLoss {
  Tensor loss;         // label-smoothed cross-entropy (mean over target tokens)
  double nll = 0;      // plain cross-entropy per target token (no smoothing); NaN when traced
  int64_t tokens = 0;  // target tokens counted
};

class Transformer : public nn::Module {
 public:
  explicit Transformer(TransformerOptions options);  // graft::Error for bad options
  std::string repr() const override;

  // src int64 [B, S]; src_key_padding_mask bool [B, S] (true = padding) -> memory [B, S, C].
  Tensor encode(const Tensor& src, const Tensor& src_key_padding_mask = {});
  // tgt int64 [B, T] (positions start at cache->length with a cache) -> logits [B, T, V].
  Tensor decode(const Tensor& tgt, const Tensor& memory, const Tensor& memory_key_padding_mask = {},
                nn::DecoderCache* cache = nullptr);
  // Teacher-forced logits [B, T, V] of batch.tgt_in.
  Tensor forward_logits(const data::Seq2SeqBatch& batch);
  TransformerLoss loss(const data::Seq2SeqBatch& batch, double label_smoothing = 0.1);

  // A decoder over B rows of these sources for greedy_decode / beam_search. With the cache,
  // each decoder layer preallocates max_steps positions (0: options.max_len) of keys/values.
  std::unique_ptr<IncrementalDecoder> decoder(const Tensor& src, const Tensor& src_lengths,
                                              bool use_cache = true, int64_t max_steps = 0);
  // Decodes in eval mode without grad (restores the previous mode); beam 1 = greedy search.
  std::vector<Hypothesis> translate(const std::vector<std::vector<int64_t>>& src,
                                    const DecodeOptions& opt, int64_t batch_size = 64,
                                    bool use_cache = true);
  // Cross-attention weights [T, S] of decoder layer `layer`, head `head` (-1: mean over heads),
  // from a teacher-forced pass over (src, <bos> output): row t produced output token t.
  Tensor cross_attention(const std::vector<int64_t>& src, const std::vector<int64_t>& output,
                         int64_t layer = -1, int64_t head = -1);

  const TransformerOptions options;
  std::shared_ptr<nn::Embedding> src_embed, tgt_embed;  // tgt_embed == src_embed when shared
  std::shared_ptr<nn::Module> pos;                      // PositionalEncoding or learned
  std::shared_ptr<nn::TransformerEncoder> encoder;
  std::shared_ptr<nn::TransformerDecoder> decoder_stack;  // registered as "decoder"
  std::shared_ptr<nn::Linear> generator;                  // null when tied

 private:
  Tensor embed(const std::shared_ptr<nn::Embedding>& table, const Tensor& ids, int64_t offset);
};

}  // namespace graft::models
