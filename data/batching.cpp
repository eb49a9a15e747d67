#include "data/batching.h"

#include <algorithm>
#include <numeric>

#include "data/tokenizer.h"
#include "ops/error.h"

namespace graft::data {

Tensor pad_sequences(const std::vector<std::vector<int64_t>>& seqs, int64_t pad, Tensor* lengths,
                     int64_t min_len) {
  const int64_t B = int64_t(seqs.size());
  int64_t S = min_len;
  for (const auto& s : seqs) S = std::max(S, int64_t(s.size()));
  std::vector<int64_t> flat(static_cast<size_t>(B * S), pad), lens(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    std::copy(seqs[size_t(b)].begin(), seqs[size_t(b)].end(), flat.begin() + b * S);
    lens[size_t(b)] = int64_t(seqs[size_t(b)].size());
  }
  if (lengths) *lengths = from_vector(lens, {B});
  return from_vector(flat, {B, S});
}

Tensor padding_mask(const Tensor& lengths, int64_t max_len) {
  GRAFT_CHECK(lengths.defined() && lengths.dim() == 1 && lengths.dtype() == DType::i64,
              "padding_mask: lengths must be int64 [B]");
  const std::vector<int64_t> lens = lengths.to_vector<int64_t>();
  const int64_t B = int64_t(lens.size());
  Tensor m = ones({B, max_len}, DType::b8);
  bool* p = m.data<bool>();
  for (int64_t b = 0; b < B; ++b) {
    GRAFT_CHECK(lens[size_t(b)] >= 0 && lens[size_t(b)] <= max_len,
                "padding_mask: lengths[{}] = {} is outside [0, {}]", b, lens[size_t(b)], max_len);
    for (int64_t s = 0; s < lens[size_t(b)]; ++s) p[b * max_len + s] = false;  // a real token
  }
  return m;
}

int64_t Seq2SeqBatch::target_tokens() const {
  if (!tgt_lengths.defined()) return 0;
  int64_t n = 0;
  for (int64_t v : tgt_lengths.to_vector<int64_t>()) n += v;
  return n;
}

Seq2SeqBatch make_seq2seq_batch(const std::vector<std::vector<int64_t>>& src,
                                const std::vector<std::vector<int64_t>>& tgt) {
  GRAFT_CHECK(!src.empty(), "make_seq2seq_batch: the batch is empty");
  GRAFT_CHECK(tgt.empty() || tgt.size() == src.size(), "make_seq2seq_batch: {} sources but {} "
              "targets; expected the same number", src.size(), tgt.size());
  for (size_t i = 0; i < src.size(); ++i)
    GRAFT_CHECK(!src[i].empty(), "make_seq2seq_batch: source {} is empty; hint: every source "
                "needs at least one token", i);
  Seq2SeqBatch b;
  b.src = pad_sequences(src, kPad, &b.src_lengths);
  b.src_key_padding_mask = padding_mask(b.src_lengths, b.src.size(1));
  if (tgt.empty()) return b;
  std::vector<std::vector<int64_t>> in(tgt.size()), out(tgt.size());
  for (size_t i = 0; i < tgt.size(); ++i) {
    in[i].push_back(kBos);
    in[i].insert(in[i].end(), tgt[i].begin(), tgt[i].end());
    out[i] = tgt[i];
    out[i].push_back(kEos);
  }
  b.tgt_in = pad_sequences(in, kPad);
  b.tgt_out = pad_sequences(out, kPad, &b.tgt_lengths);
  return b;
}

std::vector<int64_t> random_permutation(int64_t n, Generator& gen) {
  std::vector<int64_t> p(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    const double u = philox_uniform(gen.seed, gen.advance(1));
    const int64_t j = std::min(i, int64_t(u * double(i + 1)));
    std::swap(p[size_t(i)], p[size_t(j)]);
  }
  return p;
}

std::vector<std::vector<int64_t>> bucket_batches(const std::vector<int64_t>& lengths,
                                                 int64_t batch_size, Generator& gen,
                                                 int64_t pool) {
  GRAFT_CHECK(batch_size >= 1, "bucket_batches: batch_size must be >= 1, got {}", batch_size);
  GRAFT_CHECK(pool >= 1, "bucket_batches: pool must be >= 1, got {}", pool);
  const int64_t n = int64_t(lengths.size());
  std::vector<int64_t> order = random_permutation(n, gen);
  const int64_t chunk = batch_size * pool;
  for (int64_t c = 0; c < n; c += chunk) {
    auto first = order.begin() + c, last = order.begin() + std::min(n, c + chunk);
    std::stable_sort(first, last, [&](int64_t a, int64_t b) {
      return lengths[size_t(a)] < lengths[size_t(b)];
    });
  }
  std::vector<std::vector<int64_t>> batches;
  for (int64_t i = 0; i < n; i += batch_size)
    batches.emplace_back(order.begin() + i, order.begin() + std::min(n, i + batch_size));
  const std::vector<int64_t> perm = random_permutation(int64_t(batches.size()), gen);
  std::vector<std::vector<int64_t>> out;
  out.reserve(batches.size());
  for (int64_t p : perm) out.push_back(std::move(batches[size_t(p)]));
  return out;
}

std::vector<std::vector<int64_t>> token_batches(const std::vector<int64_t>& cost, int64_t max_tokens,
                                                Generator& gen, int64_t pool) {
  GRAFT_CHECK(max_tokens >= 1, "token_batches: max_tokens must be >= 1, got {}", max_tokens);
  GRAFT_CHECK(pool >= 1, "token_batches: pool must be >= 1, got {}", pool);
  const int64_t n = int64_t(cost.size());
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    GRAFT_CHECK(cost[size_t(i)] <= max_tokens,
                "example {} is {} tokens long (max of source and target + 1), more than "
                "--max-tokens {}: raise --max-tokens or drop such long examples",
                i, cost[size_t(i)], max_tokens);
    total += std::max<int64_t>(cost[size_t(i)], 1);
  }
  if (n == 0) return {};
  // Pools of about `pool` batches: examples per batch ~ max_tokens / mean cost.
  const int64_t per_batch = std::max<int64_t>(1, max_tokens * n / total);
  const int64_t chunk = std::min(n, per_batch * pool);
  std::vector<int64_t> order = random_permutation(n, gen);
  for (int64_t c = 0; c < n; c += chunk) {
    auto first = order.begin() + c, last = order.begin() + std::min(n, c + chunk);
    std::stable_sort(first, last, [&](int64_t a, int64_t b) { return cost[size_t(a)] < cost[size_t(b)]; });
  }
  std::vector<std::vector<int64_t>> batches(1);
  int64_t widest = 0;  // the largest cost in the open batch
  for (int64_t i : order) {
    const int64_t w = std::max(widest, cost[size_t(i)]);
    if (!batches.back().empty() && int64_t(batches.back().size() + 1) * w > max_tokens) {
      batches.emplace_back();
      widest = cost[size_t(i)];
    } else {
      widest = w;
    }
    batches.back().push_back(i);
  }
  const std::vector<int64_t> perm = random_permutation(int64_t(batches.size()), gen);
  std::vector<std::vector<int64_t>> out;
  out.reserve(batches.size());
  for (int64_t p : perm) out.push_back(std::move(batches[size_t(p)]));
  return out;
}

}  // namespace graft::data
