// One mask convention across graft's attention modules, PyTorch's: a key_padding_mask is bool
// [B, S] with true = padding (masked out, zero attention weight). The same mask, made by
// data::padding_mask / make_seq2seq_batch, goes unchanged to every recurrent attention kind, to
// nn::MultiheadAttention and through models::Seq2Seq; padded keys get exactly zero weight.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/batching.h"
#include "data/tokenizer.h"
#include "models/seq2seq.h"
#include "nn/attention.h"
#include "nn/rnn_attention.h"
#include "ops/error.h"
#include "tests/models/tiny_seq2seq.h"

using namespace graft;

namespace {

Tensor randn64(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, DType::f64, &g);
}

// weights [B, S] (or [B, T, S] rows): exactly 0 where pad is true, rows sum to 1 over the rest
// (to tol: float32 models need 1e-5).
void check_zero_at_padding(const Tensor& weights, const Tensor& pad, double tol = 1e-12) {
  const int64_t S = pad.size(1);
  const int64_t rows_per_b = weights.numel() / pad.numel();
  std::vector<double> w = weights.to(DType::f64).to_vector<double>();
  std::vector<double> p = pad.to(DType::f64).to_vector<double>();
  for (int64_t r = 0; r < int64_t(w.size()) / S; ++r) {
    const int64_t b = r / rows_per_b;
    double real_total = 0;
    for (int64_t s = 0; s < S; ++s) {
      INFO("row " << r << " position " << s);
      const double v = w[size_t(r * S + s)];
      if (p[size_t(b * S + s)] != 0) CHECK(v == 0.0);  // padding: masked out
      else real_total += v;
    }
    CHECK(real_total == doctest::Approx(1.0).epsilon(tol));
  }
}

}  // namespace

TEST_CASE("key_padding_mask (true = padding): padded keys get zero weight in every recurrent attention kind and in MultiheadAttention") {
  // lengths 5 and 2 over S = 5: row 1's positions 2..4 are padding
  const Tensor pad = data::padding_mask(from_vector(std::vector<int64_t>{5, 2}, {2}), 5);
  REQUIRE(pad.dtype() == DType::b8);
  CHECK(pad.to(DType::i64).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 1, 1, 1});
  const Tensor keys = randn64({2, 5, 4}, 1);
  for (const std::string& kind : nn::attention_names()) {
    INFO(kind);
    auto a = nn::make_attention(kind, 4, 4, 3, /*window=*/2);
    a->to(DType::f64);
    a->eval();  // hard: the expectation
    nn::AttentionOutput o = a->attend(randn64({2, 4}, 2), keys, pad, 1);
    check_zero_at_padding(o.weights, pad);
    // the padded keys' values do not reach the context
    Tensor keys2 = keys.clone();
    {
      NoGradGuard ng;
      keys2.select(0, 1).narrow(0, 2, 3).fill_(1e6);
    }
    a->clear_precomputed();
    nn::AttentionOutput o2 = a->attend(randn64({2, 4}, 2), keys2, pad, 1);
    CHECK(amax(abs(o2.context - o.context)).item() < 1e-12);
  }
  // the same tensor means the same thing to MultiheadAttention
  nn::MultiheadAttention mha(4, 2);
  mha.to(DType::f64);
  nn::AttentionResult r = mha.forward(randn64({2, 3, 4}, 3), keys, keys,
                                      {.key_padding_mask = pad, .need_weights = true});
  REQUIRE(r.weights.shape() == Shape({2, 3, 5}));
  check_zero_at_padding(r.weights, pad);
}

TEST_CASE("key_padding_mask: a row that is all padding (true everywhere) is refused with the convention in the message") {
  auto a = nn::make_attention("bahdanau", 4, 4, 3);
  const Tensor all_pad = data::padding_mask(from_vector(std::vector<int64_t>{3, 0}, {2}), 3);
  std::string msg;
  try {
    a->attend(randn({2, 4}), randn({2, 3, 4}), all_pad, 0);
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("row 1 is all padding") != std::string::npos);
  CHECK(msg.find("true = padding") != std::string::npos);
}

TEST_CASE("Seq2Seq: the batch's src_key_padding_mask reaches attention; padded source tokens get zero weight; no mask in the checkpoint") {
  for (const std::string kind : {"bahdanau", "general", "local-p"}) {
    INFO(kind);
    manual_seed(3);
    models::Seq2Seq m(testing::tiny_seq2seq(8, "gru", kind));
    m.eval();
    NoGradGuard ng;
    const data::Seq2SeqBatch b = data::make_seq2seq_batch({{4, 5, 6, 7, 8}, {9, 10}});
    CHECK(b.src_key_padding_mask.to(DType::i64).to_vector<int64_t>() ==
          std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 1, 1, 1});
    models::Memory mem = m.encode(b.src, b.src_lengths);
    CHECK(mem.key_padding_mask.to(DType::i64).to_vector<int64_t>() ==
          b.src_key_padding_mask.to(DType::i64).to_vector<int64_t>());
    models::DecoderState st = m.initial_state(mem);
    Tensor prev = full({2}, double(data::kBos), DType::i64);
    for (int t = 0; t < 3; ++t) {
      models::StepOutput s = m.step(prev, st, mem);
      check_zero_at_padding(s.weights, b.src_key_padding_mask, 1e-5);
      prev = argmax(m.project(s.hidden), 1);
    }
    for (const auto& [name, tensor] : m.state_dict()) CHECK(name.find("mask") == std::string::npos);
  }
}
