// Whole models on the OpenCL device (PoCL in CI): the LSTM + Bahdanau seq2seq, the encoder-
// decoder Transformer and BERT-tiny (tiny sizes) each train 20 Adam steps on the device and on
// the CPU from the same initial weights and batches (dropout 0); the two loss curves must agree
// (float32) and the loss must fall. Plus the opt-in CPU fallback for a kernel the device lacks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "autograd/conv.h"
#include "autograd/functions.h"
#include "data/batching.h"
#include "models/bert.h"
#include "models/seq2seq.h"
#include "models/transformer.h"
#include "nn/optim.h"
#include "ops/kernels.h"
#include "ops/opencl/backend_nn.h"
#include "ops/opencl/opencl.h"
#include "tests/models/tiny_seq2seq.h"

using namespace graft;

namespace {

const Device kDev = [] {
  setenv("POCL_MAX_PTHREAD_COUNT", "2", 0);
  const char* e = std::getenv("GRAFT_DEVICE");
  const Device d = e ? Device::parse(e) : Device::opencl(0);
  return d.is_cpu() ? Device::opencl(0) : d;
}();

bool have_device() { return !opencl::devices().empty(); }

Tensor on(const Tensor& t, Device d) { return t.defined() ? t.to(d) : t; }

data::Seq2SeqBatch batch_on(const data::Seq2SeqBatch& b, Device d) {
  data::Seq2SeqBatch o = b;
  o.src = on(b.src, d), o.src_lengths = on(b.src_lengths, d), o.src_key_padding_mask = on(b.src_key_padding_mask, d);
  o.tgt_in = on(b.tgt_in, d), o.tgt_out = on(b.tgt_out, d), o.tgt_lengths = on(b.tgt_lengths, d);
  return o;
}

// A batch of n source/target id sequences (ids >= 4: 0..3 are the specials), target = the
// reversed source.
data::Seq2SeqBatch reverse_batch(int64_t n, uint64_t seed) {
  std::vector<std::vector<int64_t>> src, tgt;
  Generator g(seed);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = 2 + int64_t(philox_uniform(g.seed, g.advance(1)) * 4);
    std::vector<int64_t> s;
    for (int64_t k = 0; k < len; ++k) s.push_back(4 + int64_t(philox_uniform(g.seed, g.advance(1)) * 8));
    tgt.emplace_back(s.rbegin(), s.rend());
    src.push_back(std::move(s));
  }
  return data::make_seq2seq_batch(src, tgt);
}

// Trains `steps` Adam steps of a freshly seeded model on `dev`; returns the losses.
using StepFn = std::function<Tensor()>;
std::vector<double> train(nn::Module& m, Device dev, const StepFn& loss_fn, double lr,
                          int steps = 20) {
  m.to(dev);
  optim::Adam opt(m.parameters(), {.lr = lr});
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss = loss_fn();
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

void check_curves(const char* what, const std::vector<double>& cpu, const std::vector<double>& dev,
                  double tol) {
  MESSAGE(fmt::format("{} losses cpu    {:.5f}", what, fmt::join(cpu, " ")));
  MESSAGE(fmt::format("{} losses opencl {:.5f}", what, fmt::join(dev, " ")));
  REQUIRE(cpu.size() == dev.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO(what << " step " << i);
    CHECK(std::isfinite(dev[i]));
    CHECK(std::abs(dev[i] - cpu[i]) <= tol * (1 + std::abs(cpu[i])));
  }
  CHECK(dev.back() < 0.9 * dev.front());  // it learns
}

}  // namespace

TEST_CASE("opencl model: LSTM + Bahdanau seq2seq trains 20 steps along the CPU loss curve") {
  REQUIRE_MESSAGE(have_device(), "no OpenCL device found; install pocl-opencl-icd");
  const data::Seq2SeqBatch b = reverse_batch(8, 5);
  auto run = [&](Device dev) {
    manual_seed(3);
    models::Seq2Seq m(testing::tiny_seq2seq(16, "lstm", "bahdanau"));
    const data::Seq2SeqBatch bd = batch_on(b, dev);
    return train(m, dev, [&] { return m.loss(bd).loss; }, 0.02);
  };
  const auto cpu = run(Device::cpu());
  const auto dev = run(kDev);
  check_curves("seq2seq", cpu, dev, 2e-3);
}

TEST_CASE("opencl model: encoder-decoder Transformer trains 20 steps along the CPU loss curve") {
  REQUIRE_MESSAGE(have_device(), "no OpenCL device found; install pocl-opencl-icd");
  const data::Seq2SeqBatch b = reverse_batch(8, 6);
  auto run = [&](Device dev) {
    manual_seed(4);
    models::TransformerOptions o;
    o.src_vocab = o.tgt_vocab = 12;
    o.d_model = 16;
    o.nhead = 2;
    o.num_encoder_layers = o.num_decoder_layers = 1;
    o.dim_feedforward = 32;
    o.dropout = 0.0;
    o.max_len = 16;
    models::Transformer m(o);
    const data::Seq2SeqBatch bd = batch_on(b, dev);
    return train(m, dev, [&] { return m.loss(bd, 0.1).loss; }, 0.01);
  };
  const auto cpu = run(Device::cpu());
  const auto dev = run(kDev);
  check_curves("transformer", cpu, dev, 2e-3);
}

TEST_CASE("opencl model: BERT-tiny (MLM + NSP) trains 20 steps along the CPU loss curve") {
  REQUIRE_MESSAGE(have_device(), "no OpenCL device found; install pocl-opencl-icd");
  // 4 sequences of 10 tokens: [CLS]=2 ... [SEP]=3, the last one padded (id 0) from position 7.
  const int64_t B = 4, T = 10, V = 40;
  Generator g(8);
  std::vector<int64_t> ids(B * T), types(B * T, 0), labels(B * T, -100), nsp{0, 1, 0, 1};
  for (int64_t i = 0; i < B; ++i)
    for (int64_t t = 0; t < T; ++t) {
      int64_t id = 5 + int64_t(philox_uniform(g.seed, g.advance(1)) * double(V - 5));
      if (t == 0) id = 2;
      if (t == T - 1 || (i == B - 1 && t == 6)) id = 3;
      if (i == B - 1 && t > 6) id = 0;
      ids[size_t(i * T + t)] = id;
      types[size_t(i * T + t)] = t >= 5 && id != 0 ? 1 : 0;
      if (id > 4 && (t % 3) == 1) labels[size_t(i * T + t)] = (id * 7) % (V - 5) + 5;  // to predict
    }
  const Shape s{B, T};
  const Tensor tid = from_vector(ids, s), tty = from_vector(types, s), tlab = from_vector(labels, s);
  const Tensor tnsp = from_vector(nsp, {B});
  auto run = [&](Device dev) {
    manual_seed(5);
    models::BertConfig c;
    c.vocab_size = V;
    c.hidden_size = 16;
    c.num_layers = 2;
    c.num_heads = 2;
    c.intermediate_size = 32;
    c.max_position_embeddings = 16;
    c.dropout = 0.0;
    models::BertForPreTraining m(c);
    const Tensor i = tid.to(dev), ty = tty.to(dev), l = tlab.to(dev), n = tnsp.to(dev);
    return train(m, dev, [&] { return m.loss(i, ty, l, n).loss; }, 0.01);
  };
  const auto cpu = run(Device::cpu());
  const auto dev = run(kDev);
  check_curves("bert-tiny", cpu, dev, 2e-3);
}

TEST_CASE("opencl: the opt-in CPU fallback runs an op whose kernel is missing, warning once") {
  REQUIRE_MESSAGE(have_device(), "no OpenCL device found; install pocl-opencl-icd");
  const Backend* real = backend_for(kDev);
  REQUIRE(real != nullptr);
  REQUIRE(bool(real->conv1d));
  // Hide the conv1d forward kernel (a test hook: the table is re-registered, then restored).
  Backend hidden = *real;
  hidden.conv1d = nullptr;
  const Backend with_fb = ocl::with_cpu_fallback(hidden);
  CHECK(bool(with_fb.conv1d));
  CHECK(bool(with_fb.matmul == real->matmul));  // entries that exist keep the device kernel
  Generator g(21);
  Tensor x = uniform({2, 3, 9}, -1, 1, DType::f32, &g), w = uniform({4, 3, 3}, -1, 1, DType::f32, &g);
  Tensor bias = uniform({4}, -1, 1, DType::f32, &g);
  const std::vector<float> want = conv1d(x, w, bias, 2, 1).to_vector<float>();
  Tensor xd = x.to(kDev).transpose(1, 2).contiguous().transpose(1, 2);  // strided on the device
  register_backend(Device::Kind::opencl, &hidden);
  CHECK_THROWS_WITH_AS(conv1d(xd, w.to(kDev), bias.to(kDev), 2, 1),
                       doctest::Contains("no kernel for device opencl"), Error);
  register_backend(Device::Kind::opencl, &with_fb);
  const uint64_t before = opencl::fallback_calls();
  std::vector<float> got;
  try {
    for (int rep = 0; rep < 2; ++rep) {  // the warning is printed on the first call only
      Tensor wd = w.to(kDev).requires_grad_(true);
      Tensor y = conv1d(xd, wd, bias.to(kDev), 2, 1);
      CHECK(y.device() == kDev);
      got = y.to_vector<float>();
      sum(y).backward();  // the backward kernels are the device's own
      CHECK(wd.grad().device() == kDev);
    }
  } catch (...) {
    register_backend(Device::Kind::opencl, real);
    throw;
  }
  register_backend(Device::Kind::opencl, real);
  CHECK(opencl::fallback_calls() == before + 2);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
  // The switch: on, the table with fallbacks is registered; off, the plain one again.
  const bool was = opencl::cpu_fallback();
  opencl::set_cpu_fallback(true);
  CHECK(opencl::cpu_fallback());
  const Backend* on_table = backend_for(kDev);
  opencl::set_cpu_fallback(false);
  CHECK(!opencl::cpu_fallback());
  CHECK(backend_for(kDev) != on_table);
  CHECK(bool(backend_for(kDev)->conv1d == real->conv1d));  // a real kernel is never replaced
  opencl::set_cpu_fallback(was);
}
