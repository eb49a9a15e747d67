#include "models/seq2seq.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/ops_rnn.h"
#include "data/tokenizer.h"
#include "models/options_json.h"
#include "ops/error.h"

namespace graft::models {

// ---------------------------------------------------------------- options
namespace {
// The JSON keys and, for reading back, the ranges of graft train seq2seq's flags (and of the
// model's own checks).
const std::vector<OptionField<Seq2SeqOptions>>& option_fields() {
  using O = Seq2SeqOptions;
  static const std::vector<OptionField<O>> f = {
      {"src_vocab", &O::src_vocab, 5, kMaxJsonVocab},
      {"tgt_vocab", &O::tgt_vocab, 5, kMaxJsonVocab},
      {"embed", &O::embed, 1, kMaxJsonWidth},
      {"hidden", &O::hidden, 1, kMaxJsonWidth},
      {"layers", &O::layers, 1, 16},
      {"cell", &O::cell},
      {"bidirectional", &O::bidirectional},
      {"attention", &O::attention},
      {"attn_dim", &O::attn_dim, 0, kMaxJsonWidth},
      {"window", &O::window, 0, kMaxJsonPositions},
      {"input_feeding", &O::input_feeding},
      {"dropout", &O::dropout, 0.0, 0.95},
      {"doubly_stochastic", &O::doubly_stochastic, 0.0, 1e9},
      {"entropy_weight", &O::entropy_weight, -1e9, 1e9},
      {"baseline_decay", &O::baseline_decay, 0.0, 1.0},
      {"seed", &O::seed, 0, INT64_MAX},
  };
  return f;
}
}  // namespace

std::string Seq2SeqOptions::to_json() const { return options_to_json(*this, option_fields()); }

Seq2SeqOptions Seq2SeqOptions::from_json(const std::string& text) {
  return options_from_json(text, "Seq2SeqOptions.from_json", option_fields());
}

namespace {

void check_options(const Seq2SeqOptions& o) {
  GRAFT_CHECK(o.src_vocab > 4 && o.tgt_vocab > 4, "Seq2Seq: src_vocab and tgt_vocab must be > 4 "
              "(the specials <pad> <bos> <eos> <unk> plus tokens), got {} and {}", o.src_vocab,
              o.tgt_vocab);
  GRAFT_CHECK(o.embed >= 1 && o.hidden >= 1 && o.layers >= 1, "Seq2Seq: embed, hidden and layers "
              "must be >= 1, got {}, {}, {}", o.embed, o.hidden, o.layers);
  GRAFT_CHECK(o.cell == "rnn" || o.cell == "lstm" || o.cell == "gru", "Seq2Seq: unknown cell "
              "'{}'; expected rnn, lstm or gru", o.cell);
  GRAFT_CHECK(!o.bidirectional || o.hidden % 2 == 0, "Seq2Seq: a bidirectional encoder needs an "
              "even hidden size (H/2 per direction), got {}", o.hidden);
  const auto& names = nn::attention_names();
  GRAFT_CHECK(o.attention == "none" || std::find(names.begin(), names.end(), o.attention) != names.end(),
              "Seq2Seq: unknown attention '{}'; expected none, {}", o.attention, fmt::join(names, ", "));
  GRAFT_CHECK(o.attn_dim >= 0 && o.window >= 0, "Seq2Seq: attn_dim and window must be >= 0");
  GRAFT_CHECK(o.dropout >= 0 && o.dropout < 1, "Seq2Seq: dropout must be in [0, 1), got {}", o.dropout);
  GRAFT_CHECK(o.doubly_stochastic >= 0 && std::isfinite(o.doubly_stochastic),
              "Seq2Seq: doubly_stochastic must be a finite number >= 0, got {}", o.doubly_stochastic);
}

std::shared_ptr<nn::RNNCellBase> make_cell(const std::string& cell, int64_t in, int64_t h) {
  if (cell == "lstm") return std::make_shared<nn::LSTMCell>(in, h);
  if (cell == "gru") return std::make_shared<nn::GRUCell>(in, h);
  return std::make_shared<nn::RNNCell>(in, h);
}

// The decoder's input width: the embedding plus the attention context (Bahdanau, hard) or
// the previous attentional state (Luong with input feeding).
int64_t decoder_input(const Seq2SeqOptions& o, bool luong) {
  if (o.attention == "none") return o.embed;
  if (luong) return o.embed + (o.input_feeding ? o.hidden : 0);
  return o.embed + o.hidden;
}

}  // namespace

// ---------------------------------------------------------------- model
Seq2Seq::Seq2Seq(Seq2SeqOptions o) : options((check_options(o), std::move(o))) {
  const Seq2SeqOptions& op = options;
  {  // weights, at least: G gates of H x (in + H/2) per layer (a bidirectional encoder has two
     // directions of H/2), in encoder and decoder; tables V E; W_out H V
    const double G = op.cell == "lstm" ? 4 : op.cell == "gru" ? 3 : 1, H = double(op.hidden);
    const double E = double(op.embed), L = double(op.layers);
    check_model_fits("Seq2Seq", 2 * G * H * ((E + H / 2) + 1.5 * H * (L - 1)) +
                                    double(op.src_vocab + op.tgt_vocab) * E + H * double(op.tgt_vocab));
  }
  const int64_t H = op.hidden, He = op.bidirectional ? H / 2 : H;
  src_embed = register_module("src_embed", std::make_shared<nn::Embedding>(op.src_vocab, op.embed, data::kPad));
  tgt_embed = register_module("tgt_embed", std::make_shared<nn::Embedding>(op.tgt_vocab, op.embed, data::kPad));
  const double inter = op.layers > 1 ? op.dropout : 0.0;
  if (op.cell == "lstm")
    encoder = std::make_shared<nn::LSTM>(op.embed, He, op.layers, op.bidirectional, inter);
  else if (op.cell == "gru")
    encoder = std::make_shared<nn::GRU>(op.embed, He, op.layers, op.bidirectional, inter);
  else
    encoder = std::make_shared<nn::RNN>(op.embed, He, op.layers, op.bidirectional, inter);
  register_module("encoder", encoder);
  auto stack = std::make_shared<nn::Module>();
  for (int64_t l = 0; l < op.layers; ++l) {
    decoder_cells.push_back(make_cell(op.cell, l == 0 ? decoder_input(op, luong()) : H, H));
    stack->register_module(std::to_string(l), decoder_cells.back());
  }
  register_module("decoder", stack);
  if (op.attention != "none") {
    attention = register_module("attention", nn::make_attention(op.attention, H, H,
                                                                op.attn_dim ? op.attn_dim : H, op.window));
    if (auto* h = dynamic_cast<nn::HardAttention*>(attention.get())) h->gen = Generator(op.seed);
    combine = register_module("combine", std::make_shared<nn::Linear>(2 * H, H, false));
  }
  out = register_module("out", std::make_shared<nn::Linear>(H, op.tgt_vocab));
  if (hard()) reinforce_ = std::make_unique<nn::Reinforce>(op.baseline_decay, op.entropy_weight);
}

std::string Seq2Seq::repr() const {
  return fmt::format("Seq2Seq(cell={}, attention={}, layers={}, hidden={}, embed={}{})", options.cell,
                     options.attention, options.layers, options.hidden, options.embed,
                     options.bidirectional ? ", bidirectional" : "");
}

bool Seq2Seq::luong() const {
  const std::string& a = options.attention;
  return a == "dot" || a == "general" || a == "concat" || a == "local-m" || a == "local-p";
}

Tensor Seq2Seq::drop(const Tensor& x) {
  return options.dropout > 0 ? dropout(x, options.dropout, is_training()) : x;
}

Memory Seq2Seq::encode(const Tensor& src, const Tensor& lengths) {
  check_defined(src, "Seq2Seq.encode");
  check_defined(lengths, "Seq2Seq.encode");
  GRAFT_CHECK(src.dtype() == DType::i64 && src.dim() == 2, "Seq2Seq.encode: src must be int64 "
              "[B, S], got {} {}", src.dtype(), src.shape().str());
  GRAFT_CHECK(lengths.dtype() == DType::i64 && lengths.dim() == 1 && lengths.size(0) == src.size(0),
              "Seq2Seq.encode: lengths must be int64 [B={}], got {} {}", src.size(0),
              lengths.dtype(), lengths.shape().str());
  const int64_t S = src.size(1);
  for (int64_t v : lengths.to_vector<int64_t>())
    GRAFT_CHECK(v >= 1 && v <= S, "Seq2Seq.encode: a length is {}, expected 1..S={}", v, S);
  for (int64_t v : src.to_vector<int64_t>())
    GRAFT_CHECK(v >= 0 && v < options.src_vocab, "Seq2Seq.encode: source token id {} is outside "
                "[0, src_vocab={}); hint: encode with the run's vocabulary", v, options.src_vocab);
  Memory m;
  nn::RnnOutput r = encoder->forward(drop(src_embed->forward(src)), lengths);  // [B, S, H]
  m.keys = r.output;
  if (attention && fast_paths) m.keys_proj = attention->project_keys(m.keys);  // U h etc.: once, not per step
  m.lengths = lengths;
  m.key_padding_mask = data::padding_mask(lengths, S).to(src.device());
  // the decoder starts from the encoder's final state, layer by layer
  const int64_t D = options.bidirectional ? 2 : 1;
  std::vector<nn::RnnState> init;
  for (int64_t l = 0; l < options.layers; ++l) {
    auto pick = [&](const Tensor& s) -> Tensor {
      if (!s.defined()) return {};
      if (D == 1) return s.select(0, l);
      return cat({s.select(0, l * 2), s.select(0, l * 2 + 1)}, 1);  // [B, H/2] x 2 -> [B, H]
    };
    init.push_back({pick(r.state.h), pick(r.state.c)});
  }
  m.final_state = std::move(init);
  return m;
}

DecoderState Seq2Seq::initial_state(const Memory& mem) {
  DecoderState st;
  st.layers = mem.final_state;
  st.feed = zeros({mem.keys.size(0), options.hidden}, mem.keys.options());
  return st;
}

namespace {
// Lends the batch's key projection to the attention module for one step (cleared afterwards,
// so that the module keeps no reference to a batch's graph).
struct PrecomputedKeys {
  PrecomputedKeys(nn::Attention* a, const Memory& mem) : attn(a) {
    if (attn) attn->use_precomputed(mem.keys, mem.keys_proj);
  }
  ~PrecomputedKeys() {
    if (attn) attn->clear_precomputed();
  }
  PrecomputedKeys(const PrecomputedKeys&) = delete;
  PrecomputedKeys& operator=(const PrecomputedKeys&) = delete;
  nn::Attention* attn;
};
}  // namespace

StepOutput Seq2Seq::step_core(Tensor x, DecoderState& st, const Memory& mem) {
  PrecomputedKeys pk(attention.get(), mem);
  nn::AttentionOutput a;
  const bool has_attn = attention != nullptr;
  if (has_attn && !luong()) {  // Bahdanau / hard: attend with the previous top state
    a = attention->attend(st.layers.back().h, mem.keys, mem.key_padding_mask, st.t);
    x = cat({x, a.context}, 1);
  } else if (has_attn && options.input_feeding) {
    x = cat({x, st.feed}, 1);
  }
  for (size_t l = 0; l < decoder_cells.size(); ++l) {
    st.layers[l] = decoder_cells[l]->forward(l == 0 ? x : drop(x), st.layers[l]);
    x = st.layers[l].h;  // [B, H]
  }
  if (has_attn && luong()) a = attention->attend(x, mem.keys, mem.key_padding_mask, st.t);  // Luong: the new state
  if (hard() && is_training()) {
    const nn::HardSample& s = static_cast<nn::HardAttention*>(attention.get())->last_sample();
    hard_log_probs_.push_back(s.log_prob);
    hard_entropies_.push_back(s.entropy);
  }
  ++st.t;
  return {Tensor(), a.weights, a.context, x};
}

StepOutput Seq2Seq::step(const Tensor& prev, DecoderState& st, const Memory& mem) {
  GRAFT_CHECK(prev.dtype() == DType::i64 && prev.dim() == 1 && prev.size(0) == mem.keys.size(0),
              "Seq2Seq.step: prev must be int64 [B={}], got {} {}", mem.keys.size(0), prev.dtype(),
              prev.shape().str());
  StepOutput o = step_core(drop(tgt_embed->forward(prev)), st, mem);  // embedding [B, E]
  // h~ = tanh(W_c [c; h]), or h_t without attention
  o.hidden = attention ? tanh(combine->forward(cat({o.context, o.state}, 1))) : o.state;
  st.feed = o.hidden;
  return o;
}

Tensor Seq2Seq::forward_logits(const data::Seq2SeqBatch& b, double sampling_ratio, Generator* gen,
                               std::vector<Tensor>* weights) {
  GRAFT_CHECK(b.tgt_in.defined() && b.tgt_out.defined(), "Seq2Seq.forward_logits: the batch has "
              "no targets; hint: make_seq2seq_batch(src, tgt)");
  GRAFT_CHECK(sampling_ratio >= 0 && sampling_ratio <= 1, "Seq2Seq.forward_logits: sampling_ratio "
              "must be in [0, 1], got {}", sampling_ratio);
  for (int64_t v : b.tgt_in.to_vector<int64_t>())
    GRAFT_CHECK(v >= 0 && v < options.tgt_vocab, "Seq2Seq: target token id {} is outside [0, "
                "tgt_vocab={})", v, options.tgt_vocab);
  hard_log_probs_.clear();
  hard_entropies_.clear();
  const Memory mem = encode(b.src, b.src_lengths);
  DecoderState st = initial_state(mem);
  const int64_t B = b.size(), T = b.tgt_in.size(1);
  const bool sample = sampling_ratio > 0 && is_training();
  Generator& g = gen ? *gen : default_generator();
  if (sample || !fast_paths) {  // step by step (scheduled sampling: inputs may be the previous arg-max)
    const std::vector<int64_t> gold = b.tgt_in.to_vector<int64_t>();
    std::vector<int64_t> pred;  // the previous step's arg-max
    std::vector<Tensor> step_logits, hs;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int64_t> in(static_cast<size_t>(B));
      for (int64_t i = 0; i < B; ++i) {
        in[size_t(i)] = gold[size_t(i * T + t)];
        if (sample && t > 0 && philox_uniform(g.seed, g.advance(1)) < sampling_ratio)
          in[size_t(i)] = pred[size_t(i)];
      }
      StepOutput o = step(from_vector(in, {B}).to(mem.keys.device()), st, mem);
      if (weights) weights->push_back(o.weights);
      if (!sample) {
        hs.push_back(o.hidden);
        continue;
      }
      Tensor lg = project(drop(o.hidden));  // [B, V]
      step_logits.push_back(lg);
      NoGradGuard ng;
      pred = argmax(lg, 1).to_vector<int64_t>();
    }
    return sample ? stack(step_logits, 1) : project(drop(stack(hs, 1)));  // [B, T, V]
  }
  // Teacher forcing: one embedding lookup for all steps; when h~_t does not feed step t + 1
  // (Bahdanau, hard, Luong without input feeding, none), W_c and W_out run once over all T
  // steps after the loop instead of T times on [B, H] (the same products, batched).
  std::vector<Tensor> emb = unstack(tgt_embed->forward(b.tgt_in.to(mem.keys.device())), 1);  // T x [B, E]
  const bool feeding = attention && luong() && options.input_feeding;
  std::vector<Tensor> hs, cs;  // per step: h~_t (feeding) or h_t, and c_t
  for (int64_t t = 0; t < T; ++t) {
    StepOutput o = step_core(drop(emb[size_t(t)]), st, mem);
    if (feeding) {
      st.feed = tanh(combine->forward(cat({o.context, o.state}, 1)));  // h~ = tanh(W_c [c; h])
      hs.push_back(st.feed);
    } else {
      hs.push_back(o.state);
      if (attention) cs.push_back(o.context);
    }
    if (weights) weights->push_back(o.weights);
  }
  Tensor hidden = stack(hs, 1);  // [B, T, H]
  if (!feeding && attention)     // h~ = tanh(W_c [c; h]) for all steps at once
    hidden = tanh(combine->forward(cat({stack(cs, 1), hidden}, 2)));
  return project(drop(hidden));  // [B, T, H] -> [B, T, V]
}

LossOutput Seq2Seq::loss(const data::Seq2SeqBatch& b, double sampling_ratio, Generator* gen) {
  std::vector<Tensor> weights;
  const bool need_w = options.doubly_stochastic > 0 && attention;
  Tensor logits = forward_logits(b, sampling_ratio, gen, need_w ? &weights : nullptr);
  const int64_t B = b.size(), T = b.tgt_out.size(1), V = options.tgt_vocab;
  LossOutput r;
  r.tokens = b.target_tokens();
  CrossEntropyOptions ce;
  ce.ignore_index = data::kPad;
  ce.reduction = Reduction::none;
  Tensor rows = cross_entropy(logits.reshape({B * T, V}), b.tgt_out.reshape({B * T}), ce);  // [B*T]
  Tensor nll_sum = sum(rows);
  r.loss = nll_sum / double(std::max<int64_t>(r.tokens, 1));
  r.nll = r.loss.item();
  if (hard() && is_training() && !hard_log_probs_.empty()) {
    // REINFORCE: reward = log p(y | sampled locations) per sentence; only real target steps
    Tensor tmask = ne(b.tgt_out, zeros({1}, DType::i64)).to(logits.dtype());  // [B, T]
    Tensor logp = stack(hard_log_probs_, 1), ent = stack(hard_entropies_, 1);  // [B, T]
    Tensor reward = neg(sum(rows.reshape({B, T}), {1})).detach();              // [B]
    r.loss = r.loss + reinforce_->loss(reward, sum(logp * tmask, {1}), sum(ent * tmask, {1})) /
                          double(T);
  }
  if (need_w) r.loss = r.loss + nn::doubly_stochastic_penalty(weights, options.doubly_stochastic,
                                                                b.src_key_padding_mask);
  return r;
}

// ---------------------------------------------------------------- decoding
namespace {
class Seq2SeqDecoder : public IncrementalDecoder {
 public:
  Seq2SeqDecoder(Seq2Seq& m, Memory mem) : model_(m), mem_(std::move(mem)), st_(m.initial_state(mem_)) {}
  Tensor step(const Tensor& prev) override {
    NoGradGuard ng;
    StepOutput o = model_.step(prev, st_, mem_);
    return log_softmax(model_.project(o.hidden), 1);  // [N, V]
  }
  void reorder(const Tensor& index) override {
    NoGradGuard ng;
    auto sel = [&](Tensor& t) {
      if (t.defined()) t = index_select(t, 0, index);
    };
    sel(mem_.keys);
    sel(mem_.keys_proj);
    const std::vector<int64_t> lens = mem_.lengths.to_vector<int64_t>(), idx = index.to_vector<int64_t>();
    std::vector<int64_t> nl(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) nl[i] = lens[size_t(idx[i])];
    mem_.lengths = from_vector(nl, {int64_t(nl.size())});
    mem_.key_padding_mask = data::padding_mask(mem_.lengths, mem_.keys.size(1)).to(mem_.keys.device());
    reorder_beams(index);
  }
  // the memory (keys, their projection, lengths) is the same in all rows of a sentence
  void reorder_beams(const Tensor& index) override {
    NoGradGuard ng;
    auto sel = [&](Tensor& t) {
      if (t.defined()) t = index_select(t, 0, index);
    };
    for (auto& s : st_.layers) {
      sel(s.h);
      sel(s.c);
    }
    sel(st_.feed);
  }

 private:
  Seq2Seq& model_;
  Memory mem_;
  DecoderState st_;
};
}  // namespace

std::unique_ptr<IncrementalDecoder> Seq2Seq::decoder(const Tensor& src, const Tensor& lengths) {
  NoGradGuard ng;
  return std::make_unique<Seq2SeqDecoder>(*this, encode(src, lengths));
}

std::vector<Hypothesis> Seq2Seq::translate(const std::vector<std::vector<int64_t>>& src,
                                           const DecodeOptions& opt, int64_t batch_size) {
  GRAFT_CHECK(batch_size >= 1, "Seq2Seq.translate: batch_size must be >= 1, got {}", batch_size);
  // before encoding anything (minutes for a huge input whose decode would then be refused)
  GRAFT_CHECK(opt.max_len >= 0 && opt.max_len <= kMaxDecodeLen, "Seq2Seq.translate: max_len must "
              "be in [0, {}], got {}; hint: shorter inputs, or pass the output length", kMaxDecodeLen,
              opt.max_len);
  const bool was_training = is_training();
  eval();
  std::vector<Hypothesis> out;
  try {
    for (size_t i = 0; i < src.size(); i += size_t(batch_size)) {
      std::vector<std::vector<int64_t>> part(src.begin() + long(i),
                                             src.begin() + long(std::min(src.size(), i + size_t(batch_size))));
      data::Seq2SeqBatch b = data::make_seq2seq_batch(part);
      auto dec = decoder(b.src, b.src_lengths);
      auto h = opt.beam == 1 ? greedy_decode(*dec, b.size(), opt) : beam_search(*dec, b.size(), opt);
      out.insert(out.end(), h.begin(), h.end());
    }
  } catch (...) {
    train(was_training);
    throw;
  }
  train(was_training);
  return out;
}

Tensor Seq2Seq::attention_matrix(const std::vector<int64_t>& src, const std::vector<int64_t>& output) {
  GRAFT_CHECK(attention != nullptr, "Seq2Seq.attention_matrix: this model has no attention "
              "(attention = none)");
  const bool was_training = is_training();
  eval();
  NoGradGuard ng;
  std::vector<Tensor> w;
  try {
    forward_logits(data::make_seq2seq_batch({src}, {output}), 0.0, nullptr, &w);
  } catch (...) {
    train(was_training);
    throw;
  }
  train(was_training);
  std::vector<Tensor> rows;
  for (const Tensor& t : w) rows.push_back(t.select(0, 0));
  return stack(rows, 0);  // [T, S]
}

Accuracy sequence_accuracy(const std::vector<std::vector<int64_t>>& outputs,
                           const std::vector<std::vector<int64_t>>& references) {
  GRAFT_CHECK(outputs.size() == references.size(), "sequence_accuracy: {} outputs but {} "
              "references", outputs.size(), references.size());
  Accuracy a;
  a.count = int64_t(outputs.size());
  int64_t exact = 0, right = 0, total = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    exact += outputs[i] == references[i];
    for (size_t k = 0; k < references[i].size(); ++k) right += k < outputs[i].size() && outputs[i][k] == references[i][k];
    total += int64_t(references[i].size());
  }
  a.exact = a.count ? double(exact) / double(a.count) : 0.0;
  a.token = total ? double(right) / double(total) : 0.0;
  return a;
}

}  // namespace graft::models
