// Recurrent-layer ops: the fused LSTM and GRU cell updates (one tape node each, gate math in
// one SIMD loop per direction, see autograd/fuse_multi.h) and unstack (all time-step slices as
// one node). Op-table entries with float64 gradcheck cases are at the bottom.
#include "autograd/ops_rnn.h"

#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/fuse_multi.h"
#include "autograd/node.h"

namespace graft {

namespace {

using fuse_multi::Block;
using fuse_multi::CBlock;

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
  GRAFT_CHECK(t.device().is_cpu(), "{}: fused cells run on the CPU only, {} is on {}; hint: set "
              "use_fused = false on the layer for other devices", op, what, t.device().str());
}

// ---------------------------------------------------------------- the cells' static graphs
// LSTM: Var<0..4> = i, f, g, o (pre-activations), c_prev; Var<5> = c (the first output).
ct::Var<0> l_i;
ct::Var<1> l_f;
ct::Var<2> l_g;
ct::Var<3> l_o;
ct::Var<4> l_c;
ct::Var<5> l_cn;
const auto lstm_exprs = std::make_tuple(sigmoid(l_f) * l_c + sigmoid(l_i) * tanh(l_g),  // c
                                        sigmoid(l_o) * tanh(l_cn));                     // h

// GRU: Var<0..2> = gi_r, gi_z, gi_n; Var<3..5> = gh_r, gh_z, gh_n; Var<6> = h_prev;
// Var<7> = z, Var<8> = n (intermediates kept in registers).
ct::Var<0> g_ir;
ct::Var<1> g_iz;
ct::Var<2> g_in;
ct::Var<3> g_hr;
ct::Var<4> g_hz;
ct::Var<5> g_hn;
ct::Var<6> g_h;
ct::Var<7> g_z;
ct::Var<8> g_n;
const auto gru_exprs = std::make_tuple(sigmoid(g_iz + g_hz),                          // z
                                       tanh(g_in + sigmoid(g_ir + g_hr) * g_hn),      // n
                                       g_n + g_z * (g_h - g_n));                      // h

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
  Tensor gd = unit_cols(gates), cd = unit_cols(c_prev);
  Tensor h = Tensor::empty({B, H}, gates.dtype()), c = Tensor::empty({B, H}, gates.dtype());
  GRAFT_DISPATCH_FLOAT(gates.dtype(), op, T, [&] {
    std::array<CBlock<T>, 5> in{cblock<T>(gd, 0), cblock<T>(gd, H), cblock<T>(gd, 2 * H),
                                cblock<T>(gd, 3 * H), cblock<T>(cd)};
    fuse_multi::forward<T, 5, 2>(lstm_exprs, in, std::array<Block<T>, 2>{block<T>(c), block<T>(h)}, B, H);
  });
  if (auto n = record(op, {gates, c_prev}, [B, H](BackwardCtx& ctx) -> std::vector<Tensor> {
        Tensor gates = ctx.saved_tensor(0), cp = ctx.saved_tensor(1);
        if (ctx.create_graph) return lstm_backward_composite(gates, cp, ctx.grad(0), ctx.grad(1));
        Tensor gd = unit_cols(gates), cd = unit_cols(cp);
        Tensor dh = ctx.grad(0).defined() ? unit_cols(ctx.grad(0)) : Tensor();
        Tensor dc = ctx.grad(1).defined() ? unit_cols(ctx.grad(1)) : Tensor();
        Tensor dgates = ctx.needs(0) ? Tensor::empty({B, 4 * H}, gates.dtype()) : Tensor();
        Tensor dcp = ctx.needs(1) ? Tensor::empty({B, H}, gates.dtype()) : Tensor();
        GRAFT_DISPATCH_FLOAT(gates.dtype(), "lstm_cell_fused", T, [&] {
          std::array<CBlock<T>, 5> in{cblock<T>(gd, 0), cblock<T>(gd, H), cblock<T>(gd, 2 * H),
                                      cblock<T>(gd, 3 * H), cblock<T>(cd)};
          std::array<CBlock<T>, 2> dy{dc.defined() ? cblock<T>(dc) : CBlock<T>{},
                                      dh.defined() ? cblock<T>(dh) : CBlock<T>{}};
          std::array<Block<T>, 5> gx{};
          if (dgates.defined())
            for (int k = 0; k < 4; ++k) gx[k] = block<T>(dgates, k * H);
          if (dcp.defined()) gx[4] = block<T>(dcp);
          // dgates = [dc' g i(1-i), dc' c f(1-f), dc' i(1-g^2), dh tanh(c) o(1-o)], dc_prev = dc' f
          // with dc' = dc + dh o (1 - tanh(c)^2): the ct::Tape reverse sweep of lstm_exprs
          fuse_multi::backward<T, 5, 2>(lstm_exprs, in, dy, gx, B, H);
        });
        return {dgates, dcp};
      })) {
    n->num_outputs = 2;
    n->saved = {SavedTensor::input(gates), SavedTensor::input(c_prev)};
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
  Tensor id = unit_cols(gi), hd = unit_cols(gh), pd = unit_cols(h_prev);
  Tensor h = Tensor::empty({B, H}, gi.dtype());
  GRAFT_DISPATCH_FLOAT(gi.dtype(), op, T, [&] {
    std::array<CBlock<T>, 7> in{cblock<T>(id, 0), cblock<T>(id, H), cblock<T>(id, 2 * H),
                                cblock<T>(hd, 0), cblock<T>(hd, H), cblock<T>(hd, 2 * H),
                                cblock<T>(pd)};
    fuse_multi::forward<T, 7, 3>(gru_exprs, in, std::array<Block<T>, 3>{Block<T>{}, Block<T>{}, block<T>(h)}, B, H);
  });
  if (auto n = record(op, {gi, gh, h_prev}, [B, H](BackwardCtx& ctx) -> std::vector<Tensor> {
        Tensor gi = ctx.saved_tensor(0), gh = ctx.saved_tensor(1), hp = ctx.saved_tensor(2);
        if (ctx.create_graph) return gru_backward_composite(gi, gh, hp, ctx.grad(0));
        Tensor id = unit_cols(gi), hd = unit_cols(gh), pd = unit_cols(hp), dy = unit_cols(ctx.grad(0));
        Tensor dgi = ctx.needs(0) ? Tensor::empty({B, 3 * H}, gi.dtype()) : Tensor();
        Tensor dgh = ctx.needs(1) ? Tensor::empty({B, 3 * H}, gi.dtype()) : Tensor();
        Tensor dhp = ctx.needs(2) ? Tensor::empty({B, H}, gi.dtype()) : Tensor();
        GRAFT_DISPATCH_FLOAT(gi.dtype(), "gru_cell_fused", T, [&] {
          std::array<CBlock<T>, 7> in{cblock<T>(id, 0), cblock<T>(id, H), cblock<T>(id, 2 * H),
                                      cblock<T>(hd, 0), cblock<T>(hd, H), cblock<T>(hd, 2 * H),
                                      cblock<T>(pd)};
          std::array<CBlock<T>, 3> dys{CBlock<T>{}, CBlock<T>{}, cblock<T>(dy)};
          std::array<Block<T>, 7> gx{};
          for (int k = 0; k < 3; ++k) {
            if (dgi.defined()) gx[k] = block<T>(dgi, k * H);
            if (dgh.defined()) gx[3 + k] = block<T>(dgh, k * H);
          }
          if (dhp.defined()) gx[6] = block<T>(dhp);
          // dn = dy(1-z), dz = dy(h-n), dh_prev = dy z; d(gi_n) = dn(1-n^2), d(gh_n) = d(gi_n) r,
          // d(gi_r) = d(gh_r) = d(gi_n) gh_n r(1-r), d(gi_z) = d(gh_z) = dz z(1-z)
          fuse_multi::backward<T, 7, 3>(gru_exprs, in, dys, gx, B, H);
        });
        return {dgi, dgh, dhp};
      })) {
    n->saved = {SavedTensor::input(gi), SavedTensor::input(gh), SavedTensor::input(h_prev)};
    set_history(h, n);
  }
  return h;
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
  const DType dt = x.dtype();
  if (auto node = record("unstack", {x}, [k, piece, dt](BackwardCtx& c) -> std::vector<Tensor> {
        std::vector<Tensor> gs;
        gs.reserve(c.grads.size());
        for (const Tensor& g : c.grads) gs.push_back(g.defined() ? g : zeros(piece, dt));
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
  auto cpu_only = [](const Backend& b) { return &b == &cpu_backend() || &b == &cpu_reference_backend(); };
  t.push_back({"lstm_cell_fused", true, cpu_only, [](Generator& g) {
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
  t.push_back({"gru_cell_fused", true, cpu_only, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("gi, gh [3,9], h [3,3]", {u(g, {3, 9}, -2, 2), u(g, {3, 9}, -2, 2), u(g, {3, 3})},
                        [](const auto& in) { return gru_cell_fused(in[0], in[1], in[2]); }),
                     mk("transposed gh, H=6", {u(g, {2, 18}, -2, 2), transposed(g, {2, 18}, -2, 2), u(g, {2, 6})},
                        [](const auto& in) { return gru_cell_fused(in[0], in[1].t(), in[2]); })};
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
