// Recurrent layers and attention: gradcheck (float64) of every cell and of multi-layer
// bidirectional layers with lengths; the fused and composite gate paths agree to 1e-12; padded
// steps do not leak; PyTorch's parameter names; every attention kind's weights are a
// distribution over the real (not padded) positions; local windows; hard-attention sampling frequencies;
// the Show-Attend-Tell helpers; graft::Error for bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/fuse_multi.h"
#include "autograd/op_table.h"
#include "autograd/ops_rnn.h"
#include "nn/rnn.h"
#include "nn/rnn_attention.h"
#include "tests/error_of.h"

using namespace graft;
using namespace graft::test;
using namespace graft::nn;

namespace {

Tensor randn64(const Shape& s, uint64_t seed, bool grad = true) {
  Generator g(seed);
  return randn(s, TensorOptions(DType::f64).requires_grad(grad), &g);
}
Tensor i64(std::vector<int64_t> v) { return from_vector(v, {int64_t(v.size())}); }
Tensor bools(const std::vector<double>& v, const Shape& s) {
  return ne(from_vector(v, s, DType::f64), zeros({}, DType::f64));
}


double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// Inputs for gradcheck: the given tensors followed by every parameter of m.
std::vector<Tensor> with_params(std::vector<Tensor> in, Module& m) {
  for (const Tensor& p : m.parameters()) in.push_back(p);
  return in;
}

// output and final state flattened into one tensor (so gradcheck covers all of them)
Tensor flat(const RnnOutput& r) {
  std::vector<Tensor> parts{r.output.flatten(), r.state.h.flatten()};
  if (r.state.c.defined()) parts.push_back(r.state.c.flatten());
  return cat(parts, 0);
}

}  // namespace

// ================================================================== cells
TEST_CASE("rnn cells: gradcheck in float64 (inputs, states, parameters; fused and composite)") {
  for (std::string kind : {"rnn_tanh", "rnn_relu", "lstm", "gru"}) {
    for (bool fused : {true, false}) {
      std::shared_ptr<RNNCellBase> cell;
      if (kind == "rnn_tanh") cell = std::make_shared<RNNCell>(3, 4);
      else if (kind == "rnn_relu") cell = std::make_shared<RNNCell>(3, 4, true, "relu");
      else if (kind == "lstm") cell = std::make_shared<LSTMCell>(3, 4);
      else cell = std::make_shared<GRUCell>(3, 4);
      cell->to(DType::f64);
      cell->use_fused = fused;
      INFO(kind << " fused=" << fused);
      Tensor x = randn64({2, 3}, 1), h = randn64({2, 4}, 2), c = randn64({2, 4}, 3);
      bool lstm = kind == "lstm";
      auto r = gradcheck(
          [&](const std::vector<Tensor>& in) {
            RnnState s = cell->forward(in[0], {in[1], lstm ? in[2] : Tensor()});
            return lstm ? cat({s.h, s.c}, 1) : s.h;
          },
          with_params({x, h, c}, *cell));
      CHECK_MESSAGE(r.ok, r.message);
    }
  }
}

TEST_CASE("rnn cells: PyTorch math on hand-set weights, zero default state, no-bias cells") {
  // LSTM cell, H = 1, C = 1: gates = W_ih x + W_hh h + b, i f g o blocks
  LSTMCell cell(1, 1, false);
  cell.to(DType::f64);
  {
    NoGradGuard ng;
    cell.weight_ih.copy_(from_vector({0.5, -1.0, 2.0, 0.25}, {4, 1}, DType::f64));
    cell.weight_hh.copy_(from_vector({0.1, 0.2, 0.3, 0.4}, {4, 1}, DType::f64));
  }
  CHECK(cell.named_parameters().size() == 2);
  Tensor x = from_vector({0.7}, {1, 1}, DType::f64);
  Tensor h0 = from_vector({-0.3}, {1, 1}, DType::f64), c0 = from_vector({0.9}, {1, 1}, DType::f64);
  auto sg = [](double v) { return 1 / (1 + std::exp(-v)); };
  double gi = 0.5 * 0.7 + 0.1 * -0.3, gf = -0.7 + 0.2 * -0.3, gg = 1.4 + 0.3 * -0.3, go = 0.175 + 0.4 * -0.3;
  double c1 = sg(gf) * 0.9 + sg(gi) * std::tanh(gg), h1 = sg(go) * std::tanh(c1);
  for (bool fused : {true, false}) {
    cell.use_fused = fused;
    RnnState s = cell.forward(x, {h0, c0});
    CHECK(s.c.item() == doctest::Approx(c1).epsilon(1e-14));
    CHECK(s.h.item() == doctest::Approx(h1).epsilon(1e-14));
  }
  // GRU cell: n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h
  GRUCell gru(1, 1);
  gru.to(DType::f64);
  {
    NoGradGuard ng;
    gru.weight_ih.copy_(from_vector({0.5, -1.0, 2.0}, {3, 1}, DType::f64));
    gru.weight_hh.copy_(from_vector({0.1, 0.2, 0.3}, {3, 1}, DType::f64));
    gru.bias_ih.copy_(from_vector({0.01, 0.02, 0.03}, {3}, DType::f64));
    gru.bias_hh.copy_(from_vector({-0.1, -0.2, -0.3}, {3}, DType::f64));
  }
  double r = sg(0.35 + 0.01 + -0.03 - 0.1), z = sg(-0.7 + 0.02 - 0.06 - 0.2);
  double n = std::tanh(1.4 + 0.03 + r * (-0.09 - 0.3)), hg = (1 - z) * n + z * -0.3;
  for (bool fused : {true, false}) {
    gru.use_fused = fused;
    CHECK(gru.forward(x, {h0, Tensor()}).h.item() == doctest::Approx(hg).epsilon(1e-14));
  }
  // default state: zeros
  RNNCell rc(2, 3);
  Tensor xz = randn({4, 2});
  RnnState a = rc.forward(xz), b = rc.forward(xz, {zeros({4, 3}), Tensor()});
  CHECK(max_abs_diff(a.h, b.h) == 0);
  CHECK(!a.c.defined());
}

// ================================================================== fused vs composite
TEST_CASE("rnn ops in the op table: gradcheck and gradgradcheck of their cases") {
  // (tests/autograd/test_op_table.cpp runs these for the whole table; here they run alone)
  for (const char* name : {"lstm_cell_fused", "gru_cell_fused", "additive_attention_score", "unstack"}) {
    const OpInfo* op = find_op(name);
    REQUIRE_MESSAGE(op != nullptr, name);
    Generator g(7);
    auto cs = op->cases(g);
    CHECK(!cs.empty());
    for (const OpCase& c : cs) {
      INFO(name << " [" << c.label << "]");
      GradcheckResult r = gradcheck(c.fn, c.inputs, c.eps, c.atol);
      CHECK_MESSAGE(r.ok, r.message);
      GradcheckResult r2 = gradgradcheck(c.fn, c.inputs, c.eps, c.atol);
      CHECK_MESSAGE(r2.ok, r2.message);
    }
  }
}

TEST_CASE("fuse_multi: chained outputs, column blocks, and the ct::Tape backward sweep") {
  // y0 = sin(x0) x1 (kept in registers), y1 = exp(y0) + x0: column blocks of one [3, 2*5] input
  ct::Var<0> a;
  ct::Var<1> b;
  ct::Var<2> y0;
  auto es = std::make_tuple(sin(a) * b, exp(y0) + a);
  const int64_t R = 3, C = 5;  // C = 5: a SIMD group and a scalar tail for doubles
  Tensor x = randn64({R, 2 * C}, 90, false), dy = randn64({R, C}, 91, false);
  Tensor out = empty({R, C}, DType::f64), gx = empty({R, 2 * C}, DType::f64);
  const double* xp = x.data<double>();
  double* gp = gx.data<double>();
  using fuse_multi::Block;
  using fuse_multi::CBlock;
  fuse_multi::forward<double, 2, 2>(es, {CBlock<double>{xp, 2 * C}, CBlock<double>{xp + C, 2 * C}},
                                    {Block<double>{}, Block<double>{out.data<double>(), C}}, R, C);
  fuse_multi::backward<double, 2, 2>(es, {CBlock<double>{xp, 2 * C}, CBlock<double>{xp + C, 2 * C}},
                                     {CBlock<double>{}, CBlock<double>{dy.data<double>(), C}},
                                     {Block<double>{gp, 2 * C}, Block<double>{gp + C, 2 * C}}, R, C);
  Tensor xl = x.clone().requires_grad_(true);
  Tensor x0 = xl.narrow(1, 0, C), x1 = xl.narrow(1, C, C);
  Tensor want = exp(sin(x0) * x1) + x0;
  CHECK(max_abs_diff(out, want) < 1e-14);
  CHECK(max_abs_diff(gx, grad({want}, {xl}, {dy})[0]) < 1e-13);
}

TEST_CASE("rnn fused gate ops: agree with the composite path to 1e-12 in float64 (values and grads)") {
  Tensor gates = randn64({5, 4 * 7}, 10), c = randn64({5, 7}, 11);
  Tensor dh = randn64({5, 7}, 12, false), dc = randn64({5, 7}, 13, false);
  auto [h1, c1] = lstm_cell_fused(gates, c);
  auto g1 = grad({h1, c1}, {gates, c}, {dh, dc});
  auto p = chunk(gates, 4, 1);
  Tensor c2 = sigmoid(p[1]) * c + sigmoid(p[0]) * tanh(p[2]), h2 = sigmoid(p[3]) * tanh(c2);
  auto g2 = grad({h2, c2}, {gates, c}, {dh, dc});
  CHECK(max_abs_diff(h1, h2) < 1e-12);
  CHECK(max_abs_diff(c1, c2) < 1e-12);
  CHECK(max_abs_diff(g1[0], g2[0]) < 1e-12);
  CHECK(max_abs_diff(g1[1], g2[1]) < 1e-12);

  Tensor gi = randn64({5, 3 * 7}, 14), gh = randn64({5, 3 * 7}, 15), hp = randn64({5, 7}, 16);
  Tensor y1 = gru_cell_fused(gi, gh, hp);
  auto k1 = grad({y1}, {gi, gh, hp}, {dh});
  auto a = chunk(gi, 3, 1), b = chunk(gh, 3, 1);
  Tensor r = sigmoid(a[0] + b[0]), z = sigmoid(a[1] + b[1]), n = tanh(a[2] + r * b[2]);
  Tensor y2 = (1.0 - z) * n + z * hp;
  auto k2 = grad({y2}, {gi, gh, hp}, {dh});
  CHECK(max_abs_diff(y1, y2) < 1e-12);
  for (int i = 0; i < 3; ++i) CHECK(max_abs_diff(k1[size_t(i)], k2[size_t(i)]) < 1e-12);

  // float32 works too (same math, looser tolerance)
  auto [hf, cf] = lstm_cell_fused(gates.detach().to(DType::f32), c.detach().to(DType::f32));
  CHECK(max_abs_diff(hf, h2) < 1e-5);
  CHECK(max_abs_diff(cf, c2) < 1e-5);
}

TEST_CASE("rnn layers: fused and composite paths agree to 1e-12 (LSTM, GRU; 2 layers, bidirectional, lengths)") {
  for (bool lstm : {true, false}) {
    std::shared_ptr<RNNBase> m;
    if (lstm) m = std::make_shared<LSTM>(3, 5, 2, true);
    else m = std::make_shared<GRU>(3, 5, 2, true);
    m->to(DType::f64);
    Tensor x = randn64({3, 6, 3}, 20);
    Tensor len = i64({6, 2, 4});
    std::vector<std::vector<double>> outs, grads;
    for (bool fused : {true, false}) {
      m->use_fused = fused;
      m->zero_grad();
      RnnOutput r = m->forward(x, len);
      Tensor loss = sum(flat(r) * randn64({flat(r).numel()}, 21, false));
      auto g = grad({loss}, m->parameters());
      std::vector<double> all;
      for (const Tensor& t : g)
        for (double v : t.to_vector<double>()) all.push_back(v);
      outs.push_back(flat(r).to_vector<double>());
      grads.push_back(all);
    }
    INFO((lstm ? "LSTM" : "GRU"));
    REQUIRE(outs[0].size() == outs[1].size());
    double mo = 0, mg = 0;
    for (size_t i = 0; i < outs[0].size(); ++i) mo = std::max(mo, std::abs(outs[0][i] - outs[1][i]));
    for (size_t i = 0; i < grads[0].size(); ++i) mg = std::max(mg, std::abs(grads[0][i] - grads[1][i]));
    CHECK(mo < 1e-12);
    CHECK(mg < 1e-12);
  }
}

// ================================================================== layers
TEST_CASE("rnn layers: gradcheck of 2-layer bidirectional RNN/LSTM/GRU with lengths and h0") {
  for (std::string kind : {"rnn", "lstm", "gru"}) {
    std::shared_ptr<RNNBase> m;
    if (kind == "rnn") m = std::make_shared<RNN>(2, 2, 2, true);
    else if (kind == "lstm") m = std::make_shared<LSTM>(2, 2, 2, true);
    else m = std::make_shared<GRU>(2, 2, 2, true);
    m->to(DType::f64);
    INFO(kind);
    Tensor x = randn64({3, 4, 2}, 30), h0 = randn64({4, 3, 2}, 31), c0 = randn64({4, 3, 2}, 32);
    Tensor len = i64({4, 1, 3});
    bool lstm = kind == "lstm";
    auto r = gradcheck(
        [&](const std::vector<Tensor>& in) {
          return flat(m->forward(in[0], len, {in[1], lstm ? in[2] : Tensor()}));
        },
        with_params({x, h0, c0}, *m));
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE("rnn layers: padded steps neither update the state nor leak into the outputs") {
  for (std::string kind : {"rnn", "lstm", "gru"}) {
    for (bool bidi : {false, true}) {
      std::shared_ptr<RNNBase> m;
      if (kind == "rnn") m = std::make_shared<RNN>(3, 4, 2, bidi);
      else if (kind == "lstm") m = std::make_shared<LSTM>(3, 4, 2, bidi);
      else m = std::make_shared<GRU>(3, 4, 2, bidi);
      m->to(DType::f64);
      INFO(kind << " bidirectional=" << bidi);
      const int64_t B = 3, T = 5, D = bidi ? 2 : 1;
      std::vector<int64_t> lens{5, 2, 3};
      Tensor x = randn64({B, T, 3}, 40, false);
      RnnOutput r = m->forward(x, i64(lens));
      CHECK(r.output.shape() == Shape({B, T, D * 4}));
      CHECK(r.state.h.shape() == Shape({2 * D, B, 4}));
      // garbage in the padded steps changes nothing
      Tensor x2 = x.clone();
      {
        NoGradGuard ng;
        for (int64_t b = 0; b < B; ++b)
          if (lens[size_t(b)] < T)
            x2.select(0, b).narrow(0, lens[size_t(b)], T - lens[size_t(b)]).fill_(1e3);
      }
      RnnOutput r2 = m->forward(x2, i64(lens));
      CHECK(max_abs_diff(r.output, r2.output) == 0);
      CHECK(max_abs_diff(r.state.h, r2.state.h) == 0);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t L = lens[size_t(b)];
        // outputs are exactly 0 at padded positions
        if (L < T) {
          std::vector<double> pad = r.output.select(0, b).narrow(0, L, T - L).to_vector<double>();
          for (double v : pad) CHECK(v == 0.0);
        }
        // the row alone, unpadded, gives the same outputs and final state
        RnnOutput alone = m->forward(x.narrow(0, b, 1).narrow(1, 0, L));
        CHECK(max_abs_diff(alone.output.select(0, 0), r.output.select(0, b).narrow(0, 0, L)) < 1e-13);
        CHECK(max_abs_diff(alone.state.h.select(1, 0), r.state.h.select(1, b)) < 1e-13);
        if (kind == "lstm") CHECK(max_abs_diff(alone.state.c.select(1, 0), r.state.c.select(1, b)) < 1e-13);
      }
    }
  }
}

TEST_CASE("rnn layers: PyTorch parameter names, shapes, init range; the state of a 1-layer LSTM") {
  LSTM lstm(3, 4, 2, true);
  std::vector<std::string> want{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
                                "bias_hh_l0_reverse", "weight_ih_l1", "weight_hh_l1", "bias_ih_l1",
                                "bias_hh_l1", "weight_ih_l1_reverse", "weight_hh_l1_reverse",
                                "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  auto np = lstm.named_parameters();
  REQUIRE(np.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(np[i].first == want[i]);
  CHECK(lstm.params(0, 0).w_ih.shape() == Shape({16, 3}));
  CHECK(lstm.params(1, 1).w_ih.shape() == Shape({16, 8}));  // layer 1 reads both directions
  CHECK(lstm.params(1, 0).w_hh.shape() == Shape({16, 4}));
  for (auto& [name, p] : np)
    for (double v : p.to_vector<double>()) CHECK(std::abs(v) <= 0.5);  // U(-1/sqrt(4), 1/sqrt(4))
  GRU gru(3, 4, 1, false, 0.0, false);
  CHECK(gru.named_parameters().size() == 2);
  CHECK(gru.params(0, 0).w_ih.shape() == Shape({12, 3}));
  CHECK(contains(lstm.repr(), "LSTM(3, 4, num_layers=2"));

  // a 1-layer unidirectional LSTM: final state = the last output; outputs = cell steps
  LSTM one(2, 3);
  Tensor x = randn({2, 4, 2});
  RnnOutput r = one.forward(x);
  CHECK(max_abs_diff(r.state.h.select(0, 0), r.output.select(1, 3)) == 0);
  LSTMCell cell(2, 3);
  NamedTensors sd;
  for (auto& [n, p] : one.named_parameters()) sd.push_back({n.substr(0, n.size() - 3), p});  // drop _l0
  cell.load_state_dict(sd);
  RnnState s;
  for (int64_t t = 0; t < 4; ++t) {
    s = cell.forward(x.select(1, t), s);
    CHECK(max_abs_diff(s.h, r.output.select(1, t)) < 1e-6);
  }
  CHECK(max_abs_diff(s.c, r.state.c.select(0, 0)) < 1e-6);
}

TEST_CASE("rnn layers: inter-layer dropout in training only; relu RNN; float32 layers") {
  manual_seed(3);
  LSTM m(3, 8, 3, false, 0.5);
  Tensor x = randn({2, 4, 3});
  m.eval();
  CHECK(max_abs_diff(m.forward(x).output, m.forward(x).output) == 0);
  m.train();
  CHECK(max_abs_diff(m.forward(x).output, m.forward(x).output) > 0);  // fresh dropout masks
  LSTM nodrop(3, 8, 1, false, 0.5);  // one layer: dropout never applies
  CHECK(max_abs_diff(nodrop.forward(x).output, nodrop.forward(x).output) == 0);

  RNN relu_rnn(3, 4, 1, false, 0.0, true, "relu");
  for (double v : relu_rnn.forward(x).output.to_vector<double>()) CHECK(v >= 0.0);
  GRU g32(3, 4, 1, true);
  RnnOutput r = g32.forward(x, i64({4, 2}));
  CHECK(r.output.dtype() == DType::f32);
  CHECK(r.output.shape() == Shape({2, 4, 8}));
}

TEST_CASE("rnn: bad input raises graft::Error with the op, the shapes and a hint") {
  LSTM m(3, 4, 1, true);
  CHECK(contains(error_of([&] { m.forward(randn({2, 3})); }), "expected input [B, T, 3]"));
  CHECK(contains(error_of([&] { m.forward(randn({2, 4, 5})); }), "LSTM"));
  CHECK(contains(error_of([&] { m.forward(randn({2, 4, 3}), i64({4})); }), "lengths must be int64 [2]"));
  CHECK(contains(error_of([&] { m.forward(randn({2, 4, 3}), i64({4, 5})); }), "outside [0, T = 4]"));
  CHECK(contains(error_of([&] { m.forward(randn({2, 4, 3}), {}, {zeros({1, 2, 4}), Tensor()}); }),
                 "initial state [2, 2, 4]"));
  CHECK(contains(error_of([] { RNN(3, 4, 1, false, 0.0, true, "sigmoid"); }), "\"tanh\" or \"relu\""));
  CHECK(contains(error_of([] { LSTM(0, 4); }), "positive"));
  CHECK(contains(error_of([] { GRU(3, 4, 0); }), "num_layers"));
  CHECK(contains(error_of([] { GRU(3, 4, 2, false, 1.5); }), "dropout"));
  GRUCell cell(3, 4);
  CHECK(contains(error_of([&] { cell.forward(randn({2, 5})); }), "GRUCell: expected input [B, 3]"));
  CHECK(contains(error_of([&] { cell.forward(randn({2, 3}), {zeros({2, 5}), Tensor()}); }), "expected h [2, 4]"));
  CHECK(contains(error_of([] { lstm_cell_fused(randn({2, 7}), randn({2, 2})); }), "gates must have shape [2, 8]"));
  CHECK(contains(error_of([] { gru_cell_fused(randn({2, 6}), randn({2, 6}), randn({3, 2})); }), "gi must have shape [3, 6]"));
  CHECK(contains(error_of([] { unstack(randn({2, 3}), 2); }), "out of range"));
}

// ================================================================== attention
namespace {
// keys [B=3, S=6, Ck=4], query [3, Cq=5]; row lengths 6, 3, 1; pad: true = padding
struct AttnData {
  Tensor q = randn64({3, 5}, 50), k = randn64({3, 6, 4}, 51);
  Tensor pad = bools({0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1}, {3, 6});
};
std::shared_ptr<Attention> make64(const std::string& name, int64_t qd = 5, int64_t window = 2) {
  auto a = make_attention(name, qd, 4, 3, window);
  a->to(DType::f64);
  return a;
}
// body(name, a, q) for every kind: a fresh float64 module and a query of its width (dot: the
// keys' width 4, drawn from query_seed; the others: d.q); the kind is named in a failure.
template <class F> void for_each_kind(const AttnData& d, uint64_t query_seed, F&& body) {
  for (const std::string& name : attention_names()) {
    INFO(name);
    auto a = make64(name, name == "dot" ? 4 : 5);
    const Tensor q = name == "dot" ? randn64({3, 4}, query_seed) : d.q;
    body(name, a, q);
  }
}
}  // namespace

TEST_CASE("attention: every kind gives weights that sum to 1, are 0 at masked positions, and context = sum w h") {
  AttnData d;
  for_each_kind(d, 52, [&](const std::string& name, const std::shared_ptr<Attention>& a, const Tensor& q) {
    for (bool training : {true, false}) {
      a->train(training);
      for (int64_t t : {0, 2, 7}) {
        AttentionOutput o = a->attend(q, d.k, d.pad, t);
        REQUIRE(o.weights.shape() == Shape({3, 6}));
        REQUIRE(o.context.shape() == Shape({3, 4}));
        std::vector<double> w = o.weights.to_vector<double>(), m = d.pad.to(DType::f64).to_vector<double>();
        for (int64_t b = 0; b < 3; ++b) {
          double total = 0;
          for (int64_t s = 0; s < 6; ++s) {
            double v = w[size_t(b * 6 + s)];
            CHECK(v >= 0.0);
            if (m[size_t(b * 6 + s)] != 0) CHECK(v == 0.0);  // padding: no weight
            total += v;
          }
          CHECK(total == doctest::Approx(1.0).epsilon(1e-12));
        }
        if (name == "hard" && training) continue;  // context is a sampled key (tested below)
        Tensor ctx = sum(o.weights.unsqueeze(2) * d.k, {1});
        CHECK(max_abs_diff(ctx, o.context) < 1e-12);
      }
    }
    // no mask = all positions valid
    AttentionOutput all = a->attend(q, d.k, Tensor(), 1);
    for (double v : sum(all.weights, {1}).to_vector<double>()) CHECK(v == doctest::Approx(1.0));
  });
}

TEST_CASE("attention: gradcheck of every kind over query, keys and parameters (hard: eval expectation and REINFORCE terms)") {
  AttnData d;
  for_each_kind(d, 53, [&](const std::string& name, const std::shared_ptr<Attention>& a, const Tensor& q) {
    if (name == "hard") a->eval();
    auto r = gradcheck(
        [&](const std::vector<Tensor>& in) {
          AttentionOutput o = a->attend(in[0], in[1], d.pad, 2);
          return cat({o.context.flatten(), o.weights.flatten()}, 0);
        },
        with_params({q, d.k}, *a));
    CHECK_MESSAGE(r.ok, r.message);
  });
  // hard attention in training: log-prob and entropy are differentiable in the scores
  auto hard = std::dynamic_pointer_cast<HardAttention>(make64("hard"));
  REQUIRE(hard);
  hard->train();
  auto r = gradcheck(
      [&](const std::vector<Tensor>& in) {
        hard->gen = Generator(5);  // the same sample for every evaluation
        hard->attend(in[0], in[1], d.pad, 0);
        return cat({hard->last_sample().log_prob, hard->last_sample().entropy}, 0);
      },
      with_params({d.q, d.k}, *hard));
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("attention: precompute() gives the same values and gradients, and only for the same keys") {
  AttnData d;
  for_each_kind(d, 54, [&](const std::string&, const std::shared_ptr<Attention>& a, const Tensor& q) {
    a->eval();  // hard: expectation (deterministic)
    auto run = [&] {
      AttentionOutput o = a->attend(q, d.k, d.pad, 1);
      Tensor y = sum(o.context * o.context) + sum(o.weights * o.weights);
      std::vector<Tensor> wrt{q, d.k};
      for (const Tensor& p : a->parameters()) wrt.push_back(p);
      auto g = grad({y}, wrt);
      return cat({o.context.flatten(), g[0].flatten(), g[1].flatten(), g.back().flatten()}, 0);
    };
    Tensor plain = run();
    a->precompute(d.k);
    Tensor memo = run();
    CHECK(max_abs_diff(plain, memo) < 1e-12);
    // other keys (a fresh handle with other values) do not use the memo
    Tensor k2 = randn64({3, 6, 4}, 55);
    AttentionOutput o2 = a->attend(q, k2, d.pad, 1);
    a->clear_precomputed();
    AttentionOutput o3 = a->attend(q, k2, d.pad, 1);
    CHECK(max_abs_diff(o2.context, o3.context) < 1e-12);
  });
}

TEST_CASE("attention: the fused additive score equals the tape-op score to 1e-12 (values and gradients); bad inputs") {
  AttnData d;
  for (const std::string name : {"bahdanau", "concat", "hard"}) {
    INFO(name);
    auto a = make64(name);
    a->eval();  // hard: expectation
    auto run = [&](bool fused) {
      a->use_fused = fused;
      AttentionOutput o = a->attend(d.q, d.k, d.pad, 1);
      Tensor y = sum(o.context * o.context) + sum(o.weights * o.weights);
      std::vector<Tensor> wrt{d.q, d.k};
      for (const Tensor& p : a->parameters()) wrt.push_back(p);
      std::vector<Tensor> parts{o.context.flatten(), o.weights.flatten()};
      for (const Tensor& g : grad({y}, wrt)) parts.push_back(g.flatten());
      return cat(parts, 0);
    };
    Tensor fused = run(true), plain = run(false);
    CHECK(max_abs_diff(fused, plain) < 1e-12);
  }
  // float32 agrees to float32 rounding, with A = 37 (SIMD blocks and a tail)
  Tensor uh = randn64({4, 7, 37}, 70).to(DType::f32), wq = randn64({4, 37}, 71).to(DType::f32),
         v = randn64({37}, 72).to(DType::f32);
  Tensor ref = matmul(tanh(uh + wq.unsqueeze(1)), v);
  CHECK(max_abs_diff(additive_attention_score(uh, wq, v), ref) < 1e-5);
  CHECK(contains(error_of([] { additive_attention_score(randn({2, 3, 4}), randn({2, 5}), randn({4})); }),
                 "expected uh [B, S, A], wq [B, A], v [A]"));
  CHECK(contains(error_of([] { additive_attention_score(randn({2, 3, 4}), randn({2, 4}).to(DType::f64), randn({4})); }),
                 "additive_attention_score"));
  CHECK(contains(error_of([] { additive_attention_score(randn({2, 3, 4}).to(DType::i64), randn({2, 4}), randn({4})); }),
                 "additive_attention_score"));
  auto bahdanau = make64("bahdanau");
  CHECK(contains(error_of([&] { bahdanau->use_precomputed(randn64({3, 6, 4}, 1), randn64({3, 5, 3}, 2)); }),
                 "does not match keys"));
}

TEST_CASE("attention: local-m and local-p windows and Gaussian") {
  Tensor q = randn64({2, 5}, 60), k = randn64({2, 12, 4}, 61);
  Tensor pad = bools(std::vector<double>(24, 0.0), {2, 12});  // true = padding
  {
    NoGradGuard ng;
    for (int64_t s = 9; s < 12; ++s) pad.select(0, 1).select(0, s).fill_(1);  // row 1: length 9
  }
  auto lm = std::dynamic_pointer_cast<LocalAttention>(make64("local-m", 5, 2));
  for (int64_t t : {0, 4, 10}) {
    AttentionOutput o = lm->attend(q, k, pad, t);
    std::vector<double> w = o.weights.to_vector<double>();
    for (int64_t b = 0; b < 2; ++b) {
      double p = std::min<double>(double(t), b == 0 ? 11 : 8);  // p_t = t, clipped to the source
      CHECK(lm->last_position.to_vector<double>()[size_t(b)] == p);
      for (int64_t s = 0; s < 12; ++s) {
        INFO("t=" << t << " b=" << b << " s=" << s);
        bool in = std::abs(double(s) - p) <= 2 && (b == 0 || s < 9);
        if (!in) CHECK(w[size_t(b * 12 + s)] == 0.0);
        else CHECK(w[size_t(b * 12 + s)] > 0.0);
      }
    }
  }
  // the Gaussian: with equal scores (zero W), weights ~ exp(-(s - p)^2 / (2 (D/2)^2)) over the window
  {
    NoGradGuard ng;
    lm->W->weight.zero_();
  }
  std::vector<double> w = lm->attend(q, k, pad, 4).weights.to_vector<double>();
  double z = 0;
  for (int s = 2; s <= 6; ++s) z += std::exp(-(s - 4.0) * (s - 4.0) / 2.0);
  for (int s = 2; s <= 6; ++s) CHECK(w[size_t(s)] == doctest::Approx(std::exp(-(s - 4.0) * (s - 4.0) / 2.0) / z));
  lm->renormalize = false;  // Luong's product form: softmax over the window times the Gaussian
  w = lm->attend(q, k, pad, 4).weights.to_vector<double>();
  CHECK(w[4] == doctest::Approx(0.2));
  CHECK(w[6] == doctest::Approx(0.2 * std::exp(-2.0)));

  // local-p: p_t = len sigmoid(v_p^T tanh(W_p s)) in [0, len], window around it
  auto lp = std::dynamic_pointer_cast<LocalAttention>(make64("local-p", 5, 2));
  AttentionOutput o = lp->attend(q, k, pad, 0);
  std::vector<double> p = lp->last_position.to_vector<double>();
  w = o.weights.to_vector<double>();
  for (int64_t b = 0; b < 2; ++b) {
    double len = b == 0 ? 12 : 9;
    CHECK(p[size_t(b)] > 0);
    CHECK(p[size_t(b)] < len);
    for (int64_t s = 0; s < 12; ++s)
      if (std::abs(double(s) - p[size_t(b)]) > 2 || s >= len) CHECK(w[size_t(b * 12 + s)] == 0.0);
  }
  // p_t moves with v_p: the gradient reaches W_p and v_p
  Tensor loss = sum(o.context);
  auto g = grad({loss}, {lp->v_p, lp->W_p->weight});
  CHECK(max_abs_diff(g[0], zeros_like(g[0])) > 0);
  CHECK(max_abs_diff(g[1], zeros_like(g[1])) > 0);
}

TEST_CASE("attention: hard attention samples positions with the attention distribution's frequencies") {
  const int64_t B = 4000, S = 5;
  auto hard = std::dynamic_pointer_cast<HardAttention>(make_attention("hard", 3, 2, 4));
  REQUIRE(hard);
  hard->to(DType::f64);
  hard->gen = Generator(2024);
  Tensor q = randn64({1, 3}, 70, false).expand({B, 3}).contiguous();
  Tensor k = randn64({1, S, 2}, 71, false).expand({B, S, 2}).contiguous();
  std::vector<double> mv(size_t(B * S), 0.0);
  for (int64_t b = 0; b < B; ++b) mv[size_t(b * S + 4)] = 1;  // position 4 is padding
  Tensor pad = bools(mv, {B, S});
  hard->train();
  AttentionOutput o = hard->attend(q, k, pad, 0);
  std::vector<double> w = o.weights.select(0, 0).to_vector<double>();
  std::vector<int64_t> idx = hard->last_sample().index.to_vector<int64_t>();
  std::vector<double> count(S, 0);
  for (int64_t i : idx) count[size_t(i)] += 1;
  CHECK(count[4] == 0);  // never a padded position
  for (int64_t s = 0; s < S; ++s) {
    double expect = w[size_t(s)] * B, sd = std::sqrt(B * w[size_t(s)] * (1 - w[size_t(s)]));
    INFO("position " << s << ": " << count[size_t(s)] << " draws, expected " << expect);
    CHECK(std::abs(count[size_t(s)] - expect) <= 4 * sd + 1);
  }
  // the context is the sampled key; log_prob is log w at the sample
  std::vector<double> ctx = o.context.to_vector<double>(), kv = k.to_vector<double>();
  std::vector<double> lp = hard->last_sample().log_prob.to_vector<double>();
  for (int64_t b = 0; b < 10; ++b) {
    int64_t s = idx[size_t(b)];
    CHECK(ctx[size_t(b * 2)] == kv[size_t((b * S + s) * 2)]);
    CHECK(lp[size_t(b)] == doctest::Approx(std::log(w[size_t(s)])));
  }
  // eval: expectation by default, argmax on request; no sample recorded
  hard->eval();
  hard->eval_argmax = true;
  AttentionOutput e = hard->attend(q.narrow(0, 0, 2), k.narrow(0, 0, 2), pad.narrow(0, 0, 2), 0);
  int64_t best = 0;
  for (int64_t s = 1; s < S; ++s)
    if (w[size_t(s)] > w[size_t(best)]) best = s;
  CHECK(e.context.to_vector<double>()[0] == kv[size_t(best * 2)]);
  CHECK(!hard->last_sample().index.defined());
}

TEST_CASE("attention: Show-Attend-Tell gate, doubly stochastic penalty, REINFORCE baseline") {
  AttentionGate gate(4);
  gate.to(DType::f64);
  Tensor h = randn64({3, 4}, 80);
  Tensor beta = gate.forward(h);
  CHECK(beta.shape() == Shape({3, 1}));
  for (double v : beta.to_vector<double>()) CHECK((v > 0 && v < 1));
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return gate.forward(in[0]); }, with_params({h}, gate));
  CHECK_MESSAGE(r.ok, r.message);

  // penalty = lambda mean_b sum_i (1 - sum_t alpha_t,i)^2
  Tensor a1 = from_vector({0.5, 0.5, 0.0, 1.0, 0.0, 0.0}, {2, 3}, DType::f64);
  Tensor a2 = from_vector({0.2, 0.3, 0.5, 1.0, 0.0, 0.0}, {2, 3}, DType::f64);
  double row0 = 0.3 * 0.3 + 0.2 * 0.2 + 0.5 * 0.5, row1 = 1.0 + 1.0 + 1.0;
  CHECK(doubly_stochastic_penalty({a1, a2}, 2.0).item() == doctest::Approx(2.0 * (row0 + row1) / 2));
  Tensor m = bools({0, 0, 0, 0, 0, 1}, {2, 3});  // true = padding
  CHECK(doubly_stochastic_penalty({a1, a2}, 1.0, m).item() == doctest::Approx((row0 + 2.0) / 2));
  Tensor ar = randn64({2, 3}, 81);
  auto rp = gradcheck([&](const std::vector<Tensor>& in) { return doubly_stochastic_penalty({in[0], a1}, 0.5); }, {ar});
  CHECK_MESSAGE(rp.ok, rp.message);
  CHECK(contains(error_of([] { doubly_stochastic_penalty({}, 1.0); }), "at least one step"));

  // REINFORCE: loss = -mean((r - b) log p) - w_e mean(H); baseline moving average
  Reinforce rf(0.5, 0.1);
  Tensor logp = from_vector({-1.0, -2.0}, {2}, TensorOptions(DType::f64).requires_grad());
  Tensor ent = from_vector({0.5, 0.7}, {2}, TensorOptions(DType::f64).requires_grad());
  Tensor l1 = rf.loss(from_vector({1.0, 3.0}, {2}, DType::f64), logp, ent);  // b = 2 first
  CHECK(l1.item() == doctest::Approx(-((1 - 2) * -1.0 + (3 - 2) * -2.0) / 2 - 0.1 * 0.6));
  CHECK(rf.baseline() == doctest::Approx(2.0));
  auto g = grad({l1}, {logp});
  CHECK(g[0].to_vector<double>()[0] == doctest::Approx(0.5));   // -(1 - 2) / 2
  CHECK(g[0].to_vector<double>()[1] == doctest::Approx(-0.5));  // -(3 - 2) / 2
  rf.loss(from_vector({4.0, 4.0}, {2}, DType::f64), logp);
  CHECK(rf.baseline() == doctest::Approx(0.5 * 2.0 + 0.5 * 4.0));
}

TEST_CASE("attention: unknown names and bad shapes raise graft::Error") {
  std::string e = error_of([] { make_attention("luong-magic", 4, 4, 4); });
  CHECK(contains(e, "unknown attention 'luong-magic'"));
  for (const std::string& n : attention_names()) CHECK(contains(e, n));
  CHECK(contains(error_of([] { make_attention("dot", 4, 5, 3); }), "query_dim (4) must equal key_dim (5)"));
  CHECK(contains(error_of([] { make_attention("local-p", 4, 5, 3, 0); }), "window"));
  auto a = make_attention("bahdanau", 5, 4, 3);
  CHECK(contains(error_of([&] { a->attend(randn({3, 5}), randn({3, 6}), {}, 0); }), "keys (encoder outputs) [B, S, 4]"));
  CHECK(contains(error_of([&] { a->attend(randn({2, 5}), randn({3, 6, 4}), {}, 0); }), "query (decoder state) [3, 5]"));
  CHECK(contains(error_of([&] { a->attend(randn({3, 5}), randn({3, 6, 4}), randn({3, 6}), 0); }), "key_padding_mask bool [3, 6]"));
  Tensor all_padding = bools(std::vector<double>(18, 1.0), {3, 6});
  CHECK(contains(error_of([&] { a->attend(randn({3, 5}), randn({3, 6, 4}), all_padding, 0); }), "all padding"));
}
