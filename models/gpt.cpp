// GPT-style causal LM (models/gpt.h): embeddings, pre-norm causal blocks, tied head, sampling.
#include "models/gpt.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/grad_mode.h"
#include "models/options_json.h"
#include "nn/init.h"
#include "ops/error.h"

namespace graft::models {

GPT::GPT(GPTOptions o) : options(std::move(o)) {
  const GPTOptions& op = options;
  GRAFT_CHECK(op.vocab > 0, "GPT: vocab must be positive, got {}", op.vocab);
  GRAFT_CHECK(op.num_layers > 0, "GPT: num_layers must be positive, got {}", op.num_layers);
  {  // weights: 4 C^2 + 2 C F per block, token and position tables
    const double C = double(op.d_model), F = op.dim_feedforward > 0 ? double(op.dim_feedforward) : 4 * C;
    check_model_fits("GPT", double(op.num_layers) * (4 * C * C + 2 * C * F) +
                                double(op.vocab + op.max_len) * C);
  }
  wte = register_module("wte", std::make_shared<nn::Embedding>(op.vocab, op.d_model));
  nn::init::normal_(wte->weight, 0.0, 0.02);  // GPT-2's init
  wpe = register_module("wpe", std::make_shared<nn::LearnedPositionalEmbedding>(op.max_len, op.d_model, op.dropout));
  nn::TransformerLayerOptions lo;
  lo.d_model = op.d_model;
  lo.nhead = op.nhead;
  lo.dim_feedforward = op.dim_feedforward > 0 ? op.dim_feedforward : 4 * op.d_model;
  lo.dropout = op.dropout;
  lo.activation = op.activation;
  lo.norm_first = true;
  auto list = register_module("blocks", std::make_shared<nn::Module>());
  for (int64_t i = 0; i < op.num_layers; ++i)
    blocks.push_back(list->register_module(std::to_string(i), std::make_shared<nn::TransformerEncoderLayer>(lo)));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(op.d_model));
}

std::string GPT::repr() const {
  return fmt::format("GPT(vocab={}, d_model={}, nhead={}, layers={}, max_len={})", options.vocab,
                     options.d_model, options.nhead, options.num_layers, options.max_len);
}

Tensor GPT::forward_ids(const Tensor& ids, GPTCache* cache) {
  check_defined(ids, "GPT");
  GRAFT_CHECK(ids.dtype() == DType::i64 && ids.dim() == 2,
              "GPT: ids must be int64 [B, T], got {} {}", ids.dtype(), ids.shape());
  if (cache && cache->layers.empty()) cache->layers.resize(blocks.size());
  const int64_t offset = cache ? cache->length : 0;
  Tensor x = wpe->forward(wte->forward(ids), offset);  // [B, T, C]
  for (size_t i = 0; i < blocks.size(); ++i) {
    nn::EncoderForward f;
    f.is_causal = true;
    f.cache = cache ? &cache->layers[i] : nullptr;
    x = blocks[i]->forward(x, f);
  }
  if (cache) cache->length += ids.size(1);
  return linear(ln_f->forward(x), wte->weight);  // tied head: [B, T, V]
}

Tensor GPT::loss(const Tensor& ids) {
  check_defined(ids, "GPT::loss");
  GRAFT_CHECK(ids.dim() == 2 && ids.size(1) >= 2,
              "GPT::loss: ids must be [B, T+1] with T >= 1, got {}", ids.shape());
  const int64_t T = ids.size(1) - 1;
  Tensor logits = forward_ids(ids.narrow(1, 0, T));
  Tensor target = ids.narrow(1, 1, T).contiguous();
  return cross_entropy(logits.reshape({-1, options.vocab}), target.reshape({-1}));
}

int64_t sample_token(const std::vector<double>& logits, const SampleOptions& opt, double u) {
  GRAFT_CHECK(!logits.empty(), "sample_token: empty logits");
  GRAFT_CHECK(opt.temperature >= 0, "sample_token: temperature must be >= 0, got {}", opt.temperature);
  GRAFT_CHECK(opt.top_k >= 0, "sample_token: top_k must be >= 0, got {}", opt.top_k);
  GRAFT_CHECK(opt.top_p > 0 && opt.top_p <= 1, "sample_token: top_p must be in (0, 1], got {}", opt.top_p);
  // A NaN breaks the ordering the sort below relies on (undefined behaviour), and comes from
  // non-finite weights; -inf (a masked token) is fine.
  GRAFT_CHECK(std::none_of(logits.begin(), logits.end(), [](double x) { return std::isnan(x); }),
              "sample_token: the logits hold NaN; hint: the model's weights are not finite "
              "(its training diverged)");
  const int64_t V = int64_t(logits.size());
  if (opt.temperature == 0)
    return int64_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // candidates by decreasing logit (ties: lower id first)
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  int64_t keep = opt.top_k > 0 ? std::min(opt.top_k, V) : V;
  // p_i = softmax(logits / temperature) over the kept candidates
  std::vector<double> p(static_cast<size_t>(keep));
  const double m = logits[size_t(order[0])];
  double z = 0;
  for (int64_t i = 0; i < keep; ++i) z += p[size_t(i)] = std::exp((logits[size_t(order[size_t(i)])] - m) / opt.temperature);
  for (double& x : p) x /= z;
  if (opt.top_p < 1) {  // nucleus: the shortest prefix whose mass reaches top_p
    double c = 0;
    int64_t n = 0;
    while (n < keep && c < opt.top_p) c += p[size_t(n++)];
    keep = std::max<int64_t>(n, 1);
    z = 0;
    for (int64_t i = 0; i < keep; ++i) z += p[size_t(i)];
    for (int64_t i = 0; i < keep; ++i) p[size_t(i)] /= z;
  }
  double c = 0;  // inverse CDF
  for (int64_t i = 0; i < keep; ++i) {
    c += p[size_t(i)];
    if (u < c) return order[size_t(i)];
  }
  return order[size_t(keep - 1)];
}

std::vector<int64_t> GPT::generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens,
                                   const SampleOptions& opt, bool use_cache) {
  GRAFT_CHECK(!prompt.empty(), "GPT::generate: the prompt must hold at least one token");
  GRAFT_CHECK(max_new_tokens >= 0, "GPT::generate: max_new_tokens must be >= 0, got {}", max_new_tokens);
  GRAFT_CHECK(max_new_tokens <= options.max_len - int64_t(prompt.size()),  // no overflow
              "GPT::generate: prompt ({}) + new tokens ({}) exceed max_len {}", prompt.size(),
              max_new_tokens, options.max_len);
  const bool was_training = is_training();
  eval();
  NoGradGuard ng;
  std::vector<int64_t> context = prompt, out;
  GPTCache cache;
  cache.layers.resize(blocks.size());
  for (nn::KVCache& c : cache.layers) c.capacity = int64_t(prompt.size()) + max_new_tokens;  // preallocated
  Tensor next = from_vector(prompt, {1, int64_t(prompt.size())});
  try {
    for (int64_t t = 0; t < max_new_tokens; ++t) {
      Tensor logits = use_cache ? forward_ids(next, &cache)
                                : forward_ids(from_vector(context, {1, int64_t(context.size())}));
      Tensor last = logits.select(0, 0).select(0, logits.size(1) - 1);  // [V]
      const int64_t tok = sample_token(last.to_vector<double>(), opt, philox_uniform(opt.seed, uint64_t(t)));
      out.push_back(tok);
      context.push_back(tok);
      if (tok == opt.eos) break;
      next = from_vector(std::vector<int64_t>{tok}, {1, 1});
    }
  } catch (...) {
    train(was_training);
    throw;
  }
  train(was_training);
  return out;
}

}  // namespace graft::models
