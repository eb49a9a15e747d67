// graft::compile on model steps: attention dropout draws a fresh mask on every replay and its
// backward reads the same mask, like eager; a Transformer training step (every dropout on,
// tokens in, loss and parameter gradients out) replays bit for bit like the eager step from
// the same generator state.
#include <doctest/doctest.h>

#include <vector>

#include "autograd/compile.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tensor.h"
#include "data/batching.h"
#include "models/transformer.h"
#include "ops/random.h"

using namespace graft;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// Loss and every state gradient after one call of `step` (gradients cleared first).
std::vector<std::vector<float>> outcome(const StepFunction& step, const std::vector<Tensor>& in,
                                        std::vector<Tensor>& state) {
  for (Tensor& t : state) t.set_grad({});
  std::vector<std::vector<float>> r = {values(step(in)[0])};
  for (Tensor& t : state)
    if (t.requires_grad()) r.push_back(values(t.grad()));
  return r;
}

}  // namespace

TEST_CASE("compile: attention dropout replays a fresh mask, and its backward the same one") {
  Generator g(3);
  Tensor wq = randn({8, 8}, {}, &g).requires_grad_(), wv = randn({8, 8}, {}, &g).requires_grad_();
  std::vector<Tensor> state{wq, wv};
  StepFunction fn = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor q = matmul(in[0], wq).unsqueeze(1), v = matmul(in[0], wv).unsqueeze(1);  // [B, 1, T, 8]
    Tensor loss = mean(tanh(scaled_dot_product_attention(q, q, v, {}, 0.4)));
    loss.backward();
    return {loss};
  };
  CompiledFunction step = compile(fn, state, {.onednn = true});
  const Tensor x = randn({3, 6, 8}, {}, &g);
  step({x});  // trace
  for (int it = 0; it < 3; ++it) {
    manual_seed(100 + it);
    const auto expected = outcome(fn, {x}, state);
    manual_seed(100 + it);
    const auto replayed = outcome([&](const std::vector<Tensor>& in) { return step(in); }, {x}, state);
    INFO("call " << it);
    CHECK(replayed == expected);
  }
  manual_seed(5);
  const float a = step({x})[0].item<float>(), b = step({x})[0].item<float>();
  CHECK(a != b);  // a new mask on every replay
  CHECK(step.replays() >= 3);
}

TEST_CASE("compile: a Transformer training step with dropout replays like eager") {
  manual_seed(11);
  models::Transformer model({.src_vocab = 23, .tgt_vocab = 19, .d_model = 16, .nhead = 2,
                             .num_encoder_layers = 1, .num_decoder_layers = 1,
                             .dim_feedforward = 32, .dropout = 0.2, .max_len = 16});
  model.train();
  data::Seq2SeqBatch batch = data::make_seq2seq_batch({{5, 6, 7, 8}, {9, 10, 4}, {11, 12, 13, 14}},
                                                      {{6, 7}, {8, 9, 10, 11}, {12, 4, 5}});
  std::vector<Tensor> state = model.parameters();
  for (auto& [name, t] : model.named_buffers()) state.push_back(t);
  StepFunction fn = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    data::Seq2SeqBatch b{in[0], in[1], in[2], in[3], in[4], in[5]};
    models::TransformerLoss l = model.loss(b, 0.1);  // label smoothing: the one-pass loss
    l.loss.backward();
    return {l.loss};
  };
  const std::vector<Tensor> in{batch.src, batch.src_lengths, batch.src_key_padding_mask,
                               batch.tgt_in, batch.tgt_out, batch.tgt_lengths};
  CompiledFunction step = compile(fn, state, {.onednn = true});
  step(in);  // trace (every parameter gets its .grad)
  for (int it = 0; it < 3; ++it) {
    manual_seed(40 + it);
    const auto expected = outcome(fn, in, state);
    manual_seed(40 + it);
    const auto replayed = outcome([&](const std::vector<Tensor>& v) { return step(v); }, in, state);
    INFO("call " << it);
    REQUIRE(replayed.size() == expected.size());
    CHECK(replayed == expected);
  }
  // with the model's dropout off the step is deterministic: one more replay gives the same loss
  model.eval();
  CompiledFunction eval_step = compile(fn, state, {.onednn = true});
  const float l1 = eval_step(in)[0].item<float>(), l2 = eval_step(in)[0].item<float>();
  CHECK(l1 == l2);
  CHECK(l1 == fn(in)[0].item<float>());
}

TEST_CASE("compile: an unused attention with dropout still advances the generator, like eager") {
  StepFunction fn = [](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor q = in[0].unsqueeze(1);
    (void)scaled_dot_product_attention(q, q, q, {}, 0.5);  // dead: only its draw matters
    return {dropout(in[0], 0.5)};
  };
  CompiledFunction c = compile(fn);
  const Tensor x = ones({2, 5, 4});
  c({x});  // trace
  manual_seed(9);
  const std::vector<float> eager = values(fn({x})[0]);
  manual_seed(9);
  CHECK(values(c({x})[0]) == eager);
}
