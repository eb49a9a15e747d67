// Recurrent-layer ops: the fused LSTM and GRU cell updates (one tape node each: the gate math
// is one SIMD loop forward and one backward, both static expression graphs evaluated by
// autograd/fuse_multi.h, in autograd/rnn_loops.cpp), the fused additive attention score v^T tanh(uh + wq) (one node
// instead of add, tanh and a matrix-vector product, each with its own [B, S, A] temporaries) and
// unstack (all time-step slices as one node).
// The forward loop also stores the gate activations; the backward loop is then multiply-adds
// only. (The ct::Tape route, fuse_multi::backward, re-evaluates every sigmoid/tanh: in our
// bench_ct runs it was 1.6x faster than the composite ops, this one 2.4-3.3x.) The tests check
// both cells against the composite tape ops to 1e-12. Op-table entries with float64 gradcheck cases are at the bottom.
#include "autograd/ops_rnn.h"

#include <cmath>

#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/rnn_loops.h"
#include "autograd/node.h"

namespace graft {

namespace {

using rnn_loops::Block;
using rnn_loops::CBlock;

// Rows with unit column stride (what the fused loops read); copies only when needed.
Tensor unit_cols(const Tensor& t) {
  Tensor d = t.detach();
  return d.strides()[1] == 1 && d.strides()[0] >= d.size(1) ? d : d.contiguous();
}
template <class T> CBlock<T> cblock(const Tensor& t, int64_t col0 = 0) {
  return {t.data<T>() + col0, t.strides()[0]};
}
template <class T> Block<T> block(const Tensor& t, int64_t col0 = 0) {
  return {t.data<T>() + col0, t.strides()[0]};
}

void check_cell_input(const Tensor& t, const char* op, const char* what, int64_t rows, int64_t cols) {
  check_defined(t, op);
  GRAFT_CHECK(t.dim() == 2 && t.size(0) == rows && t.size(1) == cols,
              "{}: {} must have shape [{}, {}], got {}; hint: see the shape comment in "
              "autograd/ops_rnn.h", op, what, rows, cols, t.shape());
  detail::check_float(t, op);
}

// ---------------------------------------------------------------- the cells' static graphs
Tensor or_zeros(const Tensor& g, const Tensor& like_t) { return g.defined() ? g : zeros_like(like_t); }

// Double backward: the same derivatives written with tape ops (differentiable again).
std::vector<Tensor> lstm_backward_composite(const Tensor& gates, const Tensor& cp, Tensor dh, Tensor dc) {
  auto p = chunk(gates, 4, 1);
  Tensor i = sigmoid(p[0]), f = sigmoid(p[1]), g = tanh(p[2]), o = sigmoid(p[3]);
  Tensor tc = tanh(f * cp + i * g);
  dh = or_zeros(dh, cp);
  dc = or_zeros(dc, cp);
  Tensor dct = dc + dh * o * (1.0 - tc * tc);  // dc_total = dc + dh o (1 - tanh(c)^2)
  // d gates = [dct g i(1-i), dct c_prev f(1-f), dct i (1-g^2), dh tanh(c) o(1-o)]; dc_prev = dct f
  Tensor dgates = cat({dct * g * i * (1.0 - i), dct * cp * f * (1.0 - f), dct * i * (1.0 - g * g),
                       dh * tc * o * (1.0 - o)}, 1);
  return {dgates, dct * f};
}

std::vector<Tensor> gru_backward_composite(const Tensor& gi, const Tensor& gh, const Tensor& h, const Tensor& dy) {
  auto a = chunk(gi, 3, 1), b = chunk(gh, 3, 1);
  Tensor r = sigmoid(a[0] + b[0]), z = sigmoid(a[1] + b[1]), n = tanh(a[2] + r * b[2]);
  // dn = dy (1 - z), dz = dy (h - n), dh_prev = dy z
  Tensor dan = dy * (1.0 - z) * (1.0 - n * n);         // d(gi_n) = dn (1 - n^2)
  Tensor dar = dan * b[2] * r * (1.0 - r);             // d(gi_r) = d(gh_r) = dan gh_n r(1-r)
  Tensor daz = dy * (h - n) * z * (1.0 - z);           // d(gi_z) = d(gh_z) = dz z(1-z)
  return {cat({dar, daz, dan}, 1), cat({dar, daz, dan * r}, 1), dy * z};
}

// Off the CPU (the fused loops read host memory) the cells run as tape ops on the device:
// the same math, differentiable by the engine.
std::pair<Tensor, Tensor> lstm_on_device(const Tensor& gates, const Tensor& cp) {
  auto p = chunk(gates, 4, 1);
  Tensor c = sigmoid(p[1]) * cp + sigmoid(p[0]) * tanh(p[2]);  // c = f c_prev + i g
  return {sigmoid(p[3]) * tanh(c), c};                          // h = o tanh(c)
}
Tensor gru_on_device(const Tensor& gi, const Tensor& gh, const Tensor& hp) {
  auto a = chunk(gi, 3, 1), b = chunk(gh, 3, 1);
  Tensor r = sigmoid(a[0] + b[0]), z = sigmoid(a[1] + b[1]), n = tanh(a[2] + r * b[2]);
  return n + z * (hp - n);  // h = (1 - z) n + z h_prev
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    GRAFT_CHECK(t->device() == (*ts.begin())->device(), "{}: inputs on different devices ({} and "
                "{}); hint: move them with .to(device)", op, (*ts.begin())->device().str(),
                t->device().str());
}

}  // namespace

std::pair<Tensor, Tensor> lstm_cell_fused(const Tensor& gates, const Tensor& c_prev) {
  const char* op = "lstm_cell_fused";
  check_defined(gates, op);
  check_defined(c_prev, op);
  GRAFT_CHECK(c_prev.dim() == 2, "{}: c_prev must be [B, H], got {}", op, c_prev.shape());
  const int64_t B = c_prev.size(0), H = c_prev.size(1);
  check_cell_input(gates, op, "gates", B, 4 * H);
  check_cell_input(c_prev, op, "c_prev", B, H);
  detail::check_same_dtype(gates, c_prev, op);
  check_same_device(op, {&gates, &c_prev});
  if (!gates.device().is_cpu()) return lstm_on_device(gates, c_prev);
  const DType dt = gates.dtype();
  Tensor gd = unit_cols(gates), cd = unit_cols(c_prev);
  Tensor h = Tensor::empty({B, H}, dt), c = Tensor::empty({B, H}, dt);
  const bool grad = needs_grad({&gates, &c_prev});
  Tensor acts = grad ? Tensor::empty({B, 5 * H}, dt) : Tensor();  // i, f, g, o, tanh(c)
  GRAFT_DISPATCH_FLOAT(dt, op, T, [&] {
    std::array<CBlock<T>, 5> in{cblock<T>(gd, 0), cblock<T>(gd, H), cblock<T>(gd, 2 * H),
                                cblock<T>(gd, 3 * H), cblock<T>(cd)};
    auto a = [&](int k) { return grad ? block<T>(acts, k * H) : Block<T>{}; };
    rnn_loops::get<T>().lstm_forward(in, {a(0), a(1), a(2), a(3), block<T>(c), a(4), block<T>(h)}, B, H);
  });
  if (auto n = record(op, {gates, c_prev}, [B, H](BackwardCtx& ctx) -> std::vector<Tensor> {
        Tensor gates = ctx.saved_tensor(0), cp = ctx.saved_tensor(1);
        if (ctx.create_graph) return lstm_backward_composite(gates, cp, ctx.grad(0), ctx.grad(1));
        Tensor acts = ctx.saved_tensor(2), cd = unit_cols(cp);
        Tensor dh = unit_cols(or_zeros(ctx.grad(0), cp)), dc = unit_cols(or_zeros(ctx.grad(1), cp));
        Tensor dgates = ctx.needs(0) ? Tensor::empty({B, 4 * H}, gates.dtype()) : Tensor();
        Tensor dcp = ctx.needs(1) ? Tensor::empty({B, H}, gates.dtype()) : Tensor();
        GRAFT_DISPATCH_FLOAT(gates.dtype(), "lstm_cell_fused", T, [&] {
          std::array<CBlock<T>, 8> in{cblock<T>(acts, 0),     cblock<T>(acts, H), cblock<T>(acts, 2 * H),
                                      cblock<T>(acts, 3 * H), cblock<T>(acts, 4 * H), cblock<T>(cd),
                                      cblock<T>(dh),          cblock<T>(dc)};
          auto dg = [&](int k) { return dgates.defined() ? block<T>(dgates, k * H) : Block<T>{}; };
          // dgates = [dc' g i(1-i), dc' c_prev f(1-f), dc' i(1-g^2), dh tanh(c) o(1-o)], dc_prev = dc' f
          rnn_loops::get<T>().lstm_backward(in,
                                       {Block<T>{}, dg(0), dg(1), dg(2), dg(3),
                                        dcp.defined() ? block<T>(dcp) : Block<T>{}}, B, H);
        });
        return {dgates, dcp};
      })) {
    n->num_outputs = 2;
    n->saved = {SavedTensor::input(gates), SavedTensor::input(c_prev), SavedTensor::input(acts)};
    set_history(h, n, 0);
    set_history(c, n, 1);
  }
  return {h, c};
}

Tensor gru_cell_fused(const Tensor& gi, const Tensor& gh, const Tensor& h_prev) {
  const char* op = "gru_cell_fused";
  check_defined(gi, op);
  check_defined(gh, op);
  check_defined(h_prev, op);
  GRAFT_CHECK(h_prev.dim() == 2, "{}: h_prev must be [B, H], got {}", op, h_prev.shape());
  const int64_t B = h_prev.size(0), H = h_prev.size(1);
  check_cell_input(gi, op, "gi", B, 3 * H);
  check_cell_input(gh, op, "gh", B, 3 * H);
  check_cell_input(h_prev, op, "h_prev", B, H);
  detail::check_same_dtype(gi, h_prev, op);
  detail::check_same_dtype(gh, h_prev, op);
  check_same_device(op, {&gi, &gh, &h_prev});
  if (!gi.device().is_cpu()) return gru_on_device(gi, gh, h_prev);
  const DType dt = gi.dtype();
  Tensor id = unit_cols(gi), hd = unit_cols(gh), pd = unit_cols(h_prev);
  Tensor h = Tensor::empty({B, H}, dt);
  const bool grad = needs_grad({&gi, &gh, &h_prev});
  Tensor acts = grad ? Tensor::empty({B, 3 * H}, dt) : Tensor();  // r, z, n
  GRAFT_DISPATCH_FLOAT(dt, op, T, [&] {
    std::array<CBlock<T>, 7> in{cblock<T>(id, 0), cblock<T>(id, H), cblock<T>(id, 2 * H),
                                cblock<T>(hd, 0), cblock<T>(hd, H), cblock<T>(hd, 2 * H),
                                cblock<T>(pd)};
    auto a = [&](int k) { return grad ? block<T>(acts, k * H) : Block<T>{}; };
    rnn_loops::get<T>().gru_forward(in, {a(0), a(1), a(2), block<T>(h)}, B, H);
  });
  if (auto n = record(op, {gi, gh, h_prev}, [B, H](BackwardCtx& ctx) -> std::vector<Tensor> {
        Tensor gi = ctx.saved_tensor(0), gh = ctx.saved_tensor(1), hp = ctx.saved_tensor(2);
        if (ctx.create_graph) return gru_backward_composite(gi, gh, hp, ctx.grad(0));
        Tensor acts = ctx.saved_tensor(3), hd = unit_cols(gh), pd = unit_cols(hp), dy = unit_cols(ctx.grad(0));
        Tensor dgi = ctx.needs(0) ? Tensor::empty({B, 3 * H}, gi.dtype()) : Tensor();
        Tensor dgh = ctx.needs(1) ? Tensor::empty({B, 3 * H}, gi.dtype()) : Tensor();
        Tensor dhp = ctx.needs(2) ? Tensor::empty({B, H}, gi.dtype()) : Tensor();
        GRAFT_DISPATCH_FLOAT(gi.dtype(), "gru_cell_fused", T, [&] {
          std::array<CBlock<T>, 6> in{cblock<T>(acts, 0), cblock<T>(acts, H), cblock<T>(acts, 2 * H),
                                      cblock<T>(hd, 2 * H), cblock<T>(pd), cblock<T>(dy)};
          auto b_i = [&](int k) { return dgi.defined() ? block<T>(dgi, k * H) : Block<T>{}; };
          auto b_h = [&](int k) { return dgh.defined() ? block<T>(dgh, k * H) : Block<T>{}; };
          // dn = dy(1-z), dz = dy(h_prev-n), dh_prev = dy z; d gi_n = dn(1-n^2), d gh_n = d gi_n r,
          // d gi_r = d gh_r = d gi_n gh_n r(1-r), d gi_z = d gh_z = dz z(1-z)
          rnn_loops::get<T>().gru_backward(in,
                                       {b_i(2), b_i(0), b_i(1), b_h(2),
                                        dhp.defined() ? block<T>(dhp) : Block<T>{}, b_h(0), b_h(1)}, B, H);
        });
        return {dgi, dgh, dhp};
      })) {
    n->saved = {SavedTensor::input(gi), SavedTensor::input(gh), SavedTensor::input(h_prev),
                SavedTensor::input(acts)};
    set_history(h, n);
  }
  return h;
}

// ---------------------------------------------------------------- additive attention score
namespace {

void check_score_inputs(const Tensor& uh, const Tensor& wq, const Tensor& v) {
  const char* op = "additive_attention_score";
  check_defined(uh, op);
  check_defined(wq, op);
  check_defined(v, op);
  GRAFT_CHECK(uh.dim() == 3 && wq.dim() == 2 && v.dim() == 1 && wq.size(0) == uh.size(0) &&
                  wq.size(1) == uh.size(2) && v.size(0) == uh.size(2),
              "{}: expected uh [B, S, A], wq [B, A], v [A], got {}, {}, {}", op, uh.shape(),
              wq.shape(), v.shape());
  detail::check_float(uh, op);
  detail::check_same_dtype(uh, wq, op);
  detail::check_same_dtype(uh, v, op);
  for (const Tensor* x : {&wq, &v})
    GRAFT_CHECK(x->device() == uh.device(), "{}: inputs on different devices ({} and {}); hint: "
                "move them with .to(device)", op, uh.device().str(), x->device().str());
}

}  // namespace

Tensor additive_attention_score(const Tensor& uh, const Tensor& wq, const Tensor& v) {
  check_score_inputs(uh, wq, v);
  // off the CPU (the fused loops read host memory): the same math as tape ops on the device
  if (!uh.device().is_cpu()) return matmul(tanh(uh + wq.unsqueeze(1)), v);
  const int64_t B = uh.size(0), S = uh.size(1), A = uh.size(2);
  const DType dt = uh.dtype();
  Tensor ud = uh.detach().contiguous(), qd = wq.detach().contiguous(), vd = v.detach().contiguous();
  const bool grad = needs_grad({&uh, &wq, &v});
  Tensor e = Tensor::empty({B, S}, dt);
  Tensor t = grad ? Tensor::empty({B, S, A}, dt) : Tensor();  // tanh(uh + wq), saved
  GRAFT_DISPATCH_FLOAT(dt, "additive_attention_score", T, [&] {
    const T *pu = ud.data<T>(), *pq = qd.data<T>(), *pv = vd.data<T>();
    rnn_loops::get<T>().score_forward(pu, pq, pv, grad ? t.data<T>() : nullptr, e.data<T>(), B, S, A);
  });
  if (auto n = record("additive_attention_score", {uh, wq, v}, [B, S, A](BackwardCtx& ctx) -> std::vector<Tensor> {
        Tensor de = ctx.grad(0);
        if (!de.defined()) return {Tensor(), Tensor(), Tensor()};
        if (ctx.create_graph) {  // the same derivatives as tape ops (differentiable again)
          Tensor uh = ctx.saved_tensor(0), wq = ctx.saved_tensor(1), v = ctx.saved_tensor(2);
          Tensor th = tanh(uh + wq.unsqueeze(1));
          Tensor g = de.unsqueeze(2) * v * (1.0 - th * th);  // d uh = de v (1 - t^2)
          return {g, sum(g, {1}), sum(de.unsqueeze(2) * th, {0, 1})};  // d wq = sum_s, d v = sum de t
        }
        Tensor t = ctx.saved_tensor(3), v = ctx.saved_tensor(2).contiguous(), dd = de.contiguous();
        Tensor duh = ctx.needs(0) ? Tensor::empty({B, S, A}, t.dtype()) : Tensor();
        Tensor dwq = Tensor::empty({B, A}, t.dtype());
        GRAFT_DISPATCH_FLOAT(t.dtype(), "additive_attention_score", T, [&] {
          const T *pt = t.data<T>(), *pd = dd.data<T>(), *pv = v.data<T>();
          T *pu = duh.defined() ? duh.data<T>() : nullptr, *pq = dwq.data<T>();
          rnn_loops::get<T>().score_backward(pt, pd, pv, pu, pq, B, S, A);  // d uh = de v (1 - t^2), d wq = sum_s d uh
        });
        Tensor dv;  // d v = sum_{b,s} de[b, s] t[b, s, :]  (one matrix-vector product)
        if (ctx.needs(2)) dv = matmul(dd.reshape({1, B * S}), t.reshape({B * S, A})).reshape({A});
        return {duh, ctx.needs(1) ? dwq : Tensor(), dv};
      })) {
    n->saved = {SavedTensor::input(uh), SavedTensor::input(wq), SavedTensor::input(v), SavedTensor::input(t)};
    set_history(e, n);
  }
  return e;
}

std::vector<Tensor> unstack(const Tensor& x, int64_t dim) {
  check_defined(x, "unstack");
  const int64_t rank = x.dim();
  GRAFT_CHECK(rank >= 1 && dim >= -rank && dim < rank,
              "unstack: dim {} is out of range for a tensor of rank {}; hint: use a dim in [{}, {})",
              dim, rank, -rank, rank);
  const int64_t k = dim < 0 ? dim + rank : dim, n = x.size(k);
  Tensor xd = x.detach();
  std::vector<Tensor> out;
  out.reserve(size_t(n));
  for (int64_t t = 0; t < n; ++t) out.push_back(xd.select(k, t));
  if (n == 0) return out;
  Shape piece = out[0].shape();
  const TensorOptions opts = x.options();
  if (auto node = record("unstack", {x}, [k, piece, opts](BackwardCtx& c) -> std::vector<Tensor> {
        std::vector<Tensor> gs;
        gs.reserve(c.grads.size());
        for (const Tensor& g : c.grads) gs.push_back(g.defined() ? g : zeros(piece, opts));
        return {stack(gs, k)};  // dx = stack(dy_0, ..., dy_{n-1}) along dim (zeros for unused)
      })) {
    node->num_outputs = uint32_t(n);
    for (int64_t t = 0; t < n; ++t) set_history(out[size_t(t)], node, uint32_t(t));
  }
  return out;
}

// ------------------------------------------------------------------ op table entries
using namespace cases;

void register_rnn_ops(std::vector<OpInfo>& t) {
  // CPU: the fused loops; other devices: the same math as tape ops (lstm_on_device).
  auto cells = [](const Backend& b) {
    return &b == &cpu_backend() || &b == &cpu_reference_backend() ||
           (b.unary && b.unary_backward && b.binary && b.copy);
  };
  t.push_back({"lstm_cell_fused", true, cells, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("gates [3,12], c [3,3] -> cat(h, c)", {u(g, {3, 12}, -2, 2), u(g, {3, 3})},
                        [](const auto& in) {
                          auto [h, c] = lstm_cell_fused(in[0], in[1]);
                          return cat({h, c * 0.5}, 1);
                        }),
                     mk("h only (no gradient reaches c), transposed gates, H=5 (SIMD tail)",
                        {transposed(g, {2, 20}, -2, 2), u(g, {2, 5})},
                        [](const auto& in) { return lstm_cell_fused(in[0].t(), in[1]).first; }),
                     mk("c only, gates as a [B, T, 4H] step slice", {u(g, {2, 3, 8}, -2, 2), u(g, {2, 2})},
                        [](const auto& in) { return lstm_cell_fused(in[0].select(1, 1), in[1]).second; })};
               }});
  t.push_back({"gru_cell_fused", true, cells, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("gi, gh [3,9], h [3,3]", {u(g, {3, 9}, -2, 2), u(g, {3, 9}, -2, 2), u(g, {3, 3})},
                        [](const auto& in) { return gru_cell_fused(in[0], in[1], in[2]); }),
                     mk("transposed gh, H=6", {u(g, {2, 18}, -2, 2), transposed(g, {2, 18}, -2, 2), u(g, {2, 6})},
                        [](const auto& in) { return gru_cell_fused(in[0], in[1].t(), in[2]); })};
               }});
  auto score_dev = [cells](const Backend& b) { return cells(b) && b.matmul && b.reduce; };
  t.push_back({"additive_attention_score", true, score_dev, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("uh [2,3,5], wq [2,5], v [5] (SIMD tail)", {u(g, {2, 3, 5}, -2, 2), u(g, {2, 5}), u(g, {5})},
                        [](const auto& in) { return additive_attention_score(in[0], in[1], in[2]); }),
                     mk("A=19 (one SIMD block + tail), transposed wq", {u(g, {2, 2, 19}, -2, 2),
                        transposed(g, {2, 19}), u(g, {19})},
                        [](const auto& in) { return additive_attention_score(in[0], in[1].t(), in[2]); })};
               }});
  auto any_copy = [](const Backend& b) { return b.copy != nullptr; };
  t.push_back({"unstack", true, any_copy, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[2,3,4] along dim 1, middle slice unused", {u(g, {2, 3, 4})},
                        [](const auto& in) {
                          auto p = unstack(in[0], 1);
                          return p[0] * p[2] + p[2];
                        }),
                     mk("[3,2] along dim -1", {u(g, {3, 2})}, [](const auto& in) {
                       auto p = unstack(in[0], -1);
                       return stack({p[1], p[0] * p[1]}, 0);
                     })};
               }});
}

}  // namespace graft
