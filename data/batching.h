// Padding, lengths, masks and length bucketing for seq2seq batches.
//
//   std::vector<std::vector<int64_t>> src = ..., tgt = ...;     // token ids, no specials
//   data::Seq2SeqBatch b = data::make_seq2seq_batch(src, tgt);
//   // b.src [B, S] (padded with <pad>), b.src_lengths [B],
//   // b.src_key_padding_mask [B, S] (true = padding, PyTorch's convention),
//   // b.tgt_in [B, T] = <bos> y, b.tgt_out [B, T] = y <eos> (then <pad>), T = max len + 1
//   auto batches = data::bucket_batches(lengths, 64, gen);      // index lists, similar lengths
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/tensor.h"
#include "ops/random.h"

namespace graft::data {

// seqs -> int64 [B, max(len, min_len)] padded with `pad`; lengths (optional out) int64 [B].
Tensor pad_sequences(const std::vector<std::vector<int64_t>>& seqs, int64_t pad = 0,
                     Tensor* lengths = nullptr, int64_t min_len = 0);
// lengths int64 [B] -> bool [B, max_len]: mask[b, s] = s >= lengths[b], i.e. true = padding
// (PyTorch's key_padding_mask convention, used by every attention module in graft).
Tensor padding_mask(const Tensor& lengths, int64_t max_len);

struct Seq2SeqBatch {
  Tensor src;          // int64 [B, S]
  Tensor src_lengths;  // int64 [B], each >= 1
  Tensor src_key_padding_mask;  // bool [B, S], true = padding (padding_mask(src_lengths, S))
  Tensor tgt_in;       // int64 [B, T]: <bos> y_1 .. y_n <pad>..  (undefined without targets)
  Tensor tgt_out;      // int64 [B, T]: y_1 .. y_n <eos> <pad>..
  Tensor tgt_lengths;  // int64 [B]: n + 1 (the tokens of tgt_out that count, <eos> included)
  int64_t size() const { return src.defined() ? src.size(0) : 0; }
  int64_t target_tokens() const;  // sum of tgt_lengths
};

// graft::Error for an empty batch, an empty source sequence, or src/tgt of different sizes.
// tgt may be empty (decoding only).
Seq2SeqBatch make_seq2seq_batch(const std::vector<std::vector<int64_t>>& src,
                                const std::vector<std::vector<int64_t>>& tgt = {});

// Splits example indices 0..N-1 into batches of at most batch_size whose lengths are close:
// shuffle, sort by length within chunks of batch_size * pool examples, cut into batches,
// shuffle the batches. All draws come from gen. pool = 1 is no bucketing (random batches).
std::vector<std::vector<int64_t>> bucket_batches(const std::vector<int64_t>& lengths,
                                                 int64_t batch_size, Generator& gen,
                                                 int64_t pool = 50);

// Splits example indices 0..N-1 into batches by size in tokens (fairseq's --max-tokens, Marian's
// --mini-batch-words): a batch of examples i costs count * max cost[i] (cost[i] = max(src_len,
// tgt_len + 1), the padded extent of its [B, S] and [B, T] tensors), and it takes examples while
// that stays <= max_tokens. Shuffle, sort by cost within pools of about `pool` batches, fill
// batches in that order, shuffle the batches; all draws come from gen. graft::Error for
// max_tokens < 1 or an example that alone costs more than max_tokens.
std::vector<std::vector<int64_t>> token_batches(const std::vector<int64_t>& cost, int64_t max_tokens,
                                                Generator& gen, int64_t pool = 50);

// A random permutation of 0..n-1 from gen (Fisher-Yates, n - 1 draws).
std::vector<int64_t> random_permutation(int64_t n, Generator& gen);

}  // namespace graft::data
