// scaled_dot_product_attention: the fused kernel (one tape node, backward by recomputation from
// the saved row logsumexp) and the composite path built from matmul and softmax. See
// autograd/attention.h for the semantics of masks, causal offsets, dead rows and dropout.
//
// Shapes: q [..., T, D], k [..., S, D], v [..., S, E] with equal leading dims; out [..., T, E].
#include <cmath>
#include <limits>

#include "autograd/attention.h"
#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr double kInf = std::numeric_limits<double>::infinity();


Shape lead_dims(const Tensor& x) {
  Shape s;
  for (int i = 0; i + 2 < x.dim(); ++i) s.push_back(x.shape()[i]);
  return s;
}
Shape with_last2(Shape s, int64_t a, int64_t b) {
  s.push_back(a);
  s.push_back(b);
  return s;
}

struct Checked {
  int64_t T, S, D, E;
  double scale;
  Tensor mask;  // additive, q's dtype (undefined: none); broadcastable to [..., T, S]
};

Checked check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  for (const Tensor* t : {&q, &k, &v}) check_defined(*t, kOp);
  detail::check_float(q, kOp);
  detail::check_same_dtype(q, k, kOp);
  detail::check_same_dtype(q, v, kOp);
  GRAFT_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(),
              "{}: q, k, v must have the same rank >= 2 ([..., T, D], [..., S, D], [..., S, E]), "
              "got shapes {}, {}, {}",
              kOp, q.shape(), k.shape(), v.shape());
  GRAFT_CHECK(lead_dims(q) == lead_dims(k) && lead_dims(q) == lead_dims(v),
              "{}: q, k, v must share their leading (batch, head) dims, got {}, {}, {}; hint: "
              "expand them first",
              kOp, q.shape(), k.shape(), v.shape());
  const int64_t T = q.shape()[q.dim() - 2], D = q.shape().back();
  const int64_t S = k.shape()[k.dim() - 2], E = v.shape().back();
  GRAFT_CHECK(k.shape().back() == D, "{}: q and k must have the same last dim (D), got q {} and k {}",
              kOp, q.shape(), k.shape());
  GRAFT_CHECK(v.shape()[v.dim() - 2] == S,
              "{}: k and v must have the same number of keys (S), got k {} and v {}", kOp,
              k.shape(), v.shape());
  GRAFT_CHECK(o.dropout_p >= 0.0 && o.dropout_p < 1.0,
              "{}: dropout_p must be in [0, 1), got {}", kOp, o.dropout_p);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(double(std::max<int64_t>(D, 1)));
  GRAFT_CHECK(std::isfinite(scale), "{}: scale must be finite, got {}", kOp, scale);
  Checked c{T, S, D, E, scale, {}};
  if (o.attn_mask.defined()) {
    const Tensor& m = o.attn_mask;
    GRAFT_CHECK(m.device() == q.device(), "{}: attn_mask is on {} but q is on {}", kOp,
                m.device().str(), q.device().str());
    GRAFT_CHECK(m.dtype() == DType::b8 || is_floating(m.dtype()),
                "{}: attn_mask must be bool (true = attend) or floating (added to the scores), "
                "got {}",
                kOp, m.dtype());
    const Shape scores = with_last2(lead_dims(q), T, S);
    bool ok = m.dim() <= q.dim();
    for (int i = 0; ok && i < m.dim(); ++i) {
      const int64_t ms = m.shape()[m.dim() - 1 - i], fs = scores[scores.size() - 1 - i];
      ok = ms == 1 || ms == fs;
    }
    GRAFT_CHECK(ok, "{}: attn_mask of shape {} does not broadcast to the scores [..., T, S] = {}",
                kOp, m.shape(), scores);
    NoGradGuard ng;
    if (m.dtype() == DType::b8)
      c.mask = where(m, zeros(Shape{}, q.options()), full(Shape{}, -kInf, q.options()));
    else
      c.mask = m.detach().to(q.dtype());
  }
  return c;
}

// The constant additive bias [.., T, S] (mask + causal), or undefined when there is none.
Tensor score_bias(const Checked& c, const AttentionOptions& o, const Tensor& q) {
  NoGradGuard ng;
  Tensor bias = c.mask;
  if (o.is_causal) {
    TensorOptions f64 = TensorOptions(DType::f64).device(q.device());
    Tensor i = arange(0, double(c.T), 1, f64).unsqueeze(1), j = arange(0, double(c.S), 1, f64).unsqueeze(0);
    // masked where j > i + offset
    Tensor hidden = gt(j, add(i, double(o.causal_offset)));
    Tensor causal = where(hidden, full(Shape{}, -kInf, q.options()), zeros(Shape{}, q.options()));
    bias = bias.defined() ? bias + causal : causal;
  }
  return bias;
}

// The dropout stream of one call: the fused kernel and the composite path read the same one.
struct Stream {
  uint64_t seed = 0, offset = 0;
};
Stream draw_stream(const AttentionOptions& o, const Tensor& q, int64_t S) {
  if (o.dropout_p == 0.0) return {};
  Generator& g = o.generator ? *o.generator : default_generator();
  const int64_t n = q.numel() / std::max<int64_t>(q.shape().back(), 1) * S;  // N T S
  return {g.seed, g.advance(uint64_t(n))};
}

// keep / (1 - p) for every score [.., T, S] (constant), from the call's Philox stream.
Tensor keep_factor(const Tensor& q, int64_t T, int64_t S, double p, Stream st) {
  NoGradGuard ng;
  Generator g(st.seed);
  g.offset = st.offset;
  Tensor u = uniform(with_last2(lead_dims(q), T, S), 0.0, 1.0,
                     TensorOptions(DType::f64).device(q.device()), &g);
  return where(ge(u, full(Shape{}, p, u.options())), full(Shape{}, 1.0 / (1.0 - p), q.options()),
               zeros(Shape{}, q.options()));
}

// Probabilities before dropout: softmax(scale q k^T + bias) with dead rows set to 0.
Tensor composite_probs(const Tensor& q, const Tensor& k, const Tensor& bias, double scale) {
  Tensor s = matmul(q, k.transpose(-2, -1)) * scale;  // [.., T, S]
  if (!bias.defined()) return softmax(s, -1);
  s = s + bias;
  Tensor dead;
  {
    NoGradGuard ng;
    dead = eq(amax(bias.expand(s.shape()), {-1}, true), full(Shape{}, -kInf, s.options()));  // [.., T, 1]
  }
  if (amax(dead.to(DType::f64)).item<double>() == 0.0) return softmax(s, -1);  // no dead row
  Tensor zero = zeros(Shape{}, s.options());
  return where(dead, zero, softmax(where(dead, zero, s), -1));
}

std::pair<Tensor, Tensor> composite(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Checked& c, const AttentionOptions& o, Stream st) {
  Tensor p = composite_probs(q, k, score_bias(c, o, q), c.scale);
  Tensor pd = o.dropout_p > 0 ? p * keep_factor(q, c.T, c.S, o.dropout_p, st) : p;
  return {matmul(pd, v), p};
}

// [..] -> exactly 4 dims by prepending ones (rank <= 4).
Shape to4(const Shape& s) {
  Shape r;
  for (int i = s.size(); i < 4; ++i) r.push_back(1);
  for (int i = 0; i < s.size(); ++i) r.push_back(s[i]);
  return r;
}

TensorView mask_view(const Tensor& mask4, const Shape& scores4) {
  TensorView none;
  if (!mask4.defined()) return none;
  return detail::broadcast_view(mask4, scores4);
}

Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Checked& c,
             const AttentionOptions& o, Stream st) {
  const Backend& be = detail::backend(kOp, {&q, &k, &v});
  detail::need(be.attention, kOp, q);
  AttentionArgs a;
  a.scale = c.scale;
  a.causal = o.is_causal;
  a.causal_offset = o.causal_offset;
  a.dropout_p = o.dropout_p;
  a.seed = st.seed;
  a.offset = st.offset;
  Tensor q4 = q.detach().contiguous().reshape(to4(q.shape()));
  Tensor k4 = k.detach().contiguous().reshape(to4(k.shape()));
  Tensor v4 = v.detach().contiguous().reshape(to4(v.shape()));
  const Shape scores4{q4.shape()[0], q4.shape()[1], c.T, c.S};
  Tensor mask4;
  if (c.mask.defined()) {
    mask4 = c.mask.contiguous();
    while (mask4.dim() < 4) mask4 = mask4.unsqueeze(0);
  }
  Tensor out = Tensor::empty(with_last2(lead_dims(q), c.T, c.E), q.options());
  Tensor lse = Tensor::empty(to4(with_last2(lead_dims(q), c.T, 1)), q.options());
  Tensor out4 = out.reshape(to4(out.shape()));
  be.attention(q4.kview(), k4.kview(), v4.kview(), mask_view(mask4, scores4), a, out4.kview(),
               lse.kview());
  const int64_t T = c.T, S = c.S, E = c.E, D = c.D;
  auto backward = [a, T, S, E, D](BackwardCtx& ctx) -> std::vector<Tensor> {
    Tensor q = ctx.saved_tensor(0), k = ctx.saved_tensor(1), v = ctx.saved_tensor(2);
    Tensor out = ctx.saved_tensor(3), lse = ctx.saved_tensor(4);
    Tensor mask4 = ctx.saved[5].defined() ? ctx.saved_tensor(5) : Tensor();
    const Tensor& dout = ctx.grad();
    if (ctx.create_graph) {
      // differentiable composite rules (double backward): P = softmax(S), P' = P keep/(1-p),
      // dV = P'^T dO, dP = keep/(1-p) dO V^T, dS = P (dP - rowsum(P dP)), dQ = s dS K, dK = s dS^T Q
      Checked cc{T, S, D, E, a.scale, mask4};
      while (cc.mask.defined() && cc.mask.dim() > q.dim()) cc.mask = cc.mask.squeeze(0);
      AttentionOptions co;
      co.is_causal = a.causal;
      co.causal_offset = a.causal_offset;
      Tensor p = composite_probs(q, k, score_bias(cc, co, q), a.scale);
      Tensor kf = a.dropout_p > 0 ? keep_factor(q, T, S, a.dropout_p, {a.seed, a.offset}) : Tensor();
      Tensor pd = kf.defined() ? p * kf : p;
      Tensor dp = matmul(dout, v.transpose(-2, -1));
      if (kf.defined()) dp = dp * kf;
      Tensor ds = p * (dp - sum(p * dp, {-1}, true));
      return {ctx.needs(0) ? matmul(ds, k) * a.scale : Tensor(),
              ctx.needs(1) ? matmul(ds.transpose(-2, -1), q) * a.scale : Tensor(),
              ctx.needs(2) ? matmul(pd.transpose(-2, -1), dout) : Tensor()};
    }
    // fused: recompute P = exp(S - lse) by blocks; dS = P (dP - dO.O), dQ = s dS K, dK = s dS^T Q,
    // dV = P'^T dO
    const Backend& be = detail::backend(kOp, {&q, &dout});
    Tensor q4 = q.contiguous().reshape(to4(q.shape())), k4 = k.contiguous().reshape(to4(k.shape()));
    Tensor v4 = v.contiguous().reshape(to4(v.shape()));
    Tensor g4 = dout.to(q.dtype()).contiguous().reshape(to4(out.shape()));
    Tensor o4 = out.contiguous().reshape(to4(out.shape()));
    Tensor dq = Tensor::empty(q.shape(), q.options()), dk = Tensor::empty(k.shape(), k.options());
    Tensor dv = Tensor::empty(v.shape(), v.options());
    const Shape s4{q4.shape()[0], q4.shape()[1], T, S};
    detail::need(be.attention_backward, kOp, q)(
        q4.kview(), k4.kview(), v4.kview(), mask_view(mask4, s4), a, o4.kview(), lse.kview(),
        g4.kview(), dq.reshape(q4.shape()).kview(), dk.reshape(k4.shape()).kview(),
        dv.reshape(v4.shape()).kview());
    return {ctx.needs(0) ? dq : Tensor(), ctx.needs(1) ? dk : Tensor(),
            ctx.needs(2) ? dv : Tensor()};
  };
  if (auto n = record(kOp, {q, k, v}, backward)) {
    n->saved = {SavedTensor::input(q), SavedTensor::input(k), SavedTensor::input(v),
                SavedTensor::output(out, n), SavedTensor::input(lse),
                mask4.defined() ? SavedTensor::input(mask4) : SavedTensor()};
    set_history(out, n);
  }
  return out;
}

bool use_fused(const Tensor& q, const AttentionOptions& o) {
  if (o.impl == AttentionImpl::composite) return false;
  const Backend* be = backend_for(q.device());
  const bool can = q.dim() <= 4 && be && be->attention && be->attention_backward;
  GRAFT_CHECK(can || o.impl != AttentionImpl::fused,
              "{}: the fused kernel needs rank <= 4 inputs on a device with attention kernels, "
              "got shape {} on {}; hint: use AttentionImpl::composite",
              kOp, q.shape(), q.device().str());
  return can;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& opt) {
  Checked c = check_inputs(q, k, v, opt);
  Stream st = draw_stream(opt, q, c.S);
  if (use_fused(q, opt)) return fused(q, k, v, c, opt, st);
  return composite(q, k, v, c, opt, st).first;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen) {
  AttentionOptions o;
  o.attn_mask = attn_mask;
  o.dropout_p = dropout_p;
  o.is_causal = is_causal;
  o.scale = scale;
  o.generator = gen;
  return scaled_dot_product_attention(q, k, v, o);
}

std::pair<Tensor, Tensor> scaled_dot_product_attention_with_weights(const Tensor& q,
                                                                    const Tensor& k,
                                                                    const Tensor& v,
                                                                    const AttentionOptions& opt) {
  Checked c = check_inputs(q, k, v, opt);
  Stream st = draw_stream(opt, q, c.S);
  return composite(q, k, v, c, opt, st);
}

// ------------------------------------------------------------------ op table entries
using namespace cases;

namespace {
// The same cases for both implementations: every mask kind and combination, cross attention
// with T != S and E != D, dropout, rank 3, and a row whose keys are all masked.
std::vector<OpCase> attention_cases(Generator& g, AttentionImpl impl) {
  auto opts = [impl](Tensor mask, bool causal, double p = 0.0, int64_t off = 0) {
    AttentionOptions o;
    o.attn_mask = std::move(mask);
    o.is_causal = causal;
    o.causal_offset = off;
    o.dropout_p = p;
    o.impl = impl;
    return o;
  };
  auto call = [](AttentionOptions o, uint64_t seed = 0) {
    return [o, seed](const std::vector<Tensor>& in) {
      AttentionOptions oo = o;
      Generator gen(seed);  // a fresh stream per call: finite differences see one mask
      oo.generator = &gen;
      return scaled_dot_product_attention(in[0], in[1], in[2], oo);
    };
  };
  // bool key padding [B,1,1,S]: batch 1 has its last two keys padded
  Tensor kpm = ne(from_vector(std::vector<double>{1, 1, 1, 1, 1, 0}, {2, 1, 1, 3}, DType::f64),
                  zeros(Shape{}, DType::f64));
  Tensor add_mask = u(g, {4, 3}, -1, 1, false);               // additive [T, S]
  Tensor dead = ne(from_vector(std::vector<double>{1, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 0}, {4, 3}, DType::f64),
                   zeros(Shape{}, DType::f64));              // row 1 fully masked
  return {
      mk("[2,2,4,3] no mask", {u(g, {2, 2, 4, 3}), u(g, {2, 2, 3, 3}), u(g, {2, 2, 3, 2})},
         call(opts({}, false))),
      mk("[1,2,5,3] causal", {u(g, {1, 2, 5, 3}), u(g, {1, 2, 5, 3}), u(g, {1, 2, 5, 3})},
         call(opts({}, true))),
      mk("[2,2,4,3] bool key padding + causal", {u(g, {2, 2, 4, 3}), u(g, {2, 2, 3, 3}), u(g, {2, 2, 3, 2})},
         call(opts(kpm, true))),
      mk("[2,1,4,3] additive [T,S] mask, causal offset 1", {u(g, {2, 1, 4, 3}), u(g, {2, 1, 3, 3}), u(g, {2, 1, 3, 4})},
         call(opts(add_mask, true, 0.0, -1))),
      mk("[3,4,2] rank 3, fully masked row", {u(g, {3, 4, 2}), u(g, {3, 3, 2}), u(g, {3, 3, 2})},
         call(opts(dead, false))),
      mk("[2,2,3,4] dropout 0.3", {u(g, {2, 2, 3, 4}), u(g, {2, 2, 5, 4}), u(g, {2, 2, 5, 3})},
         call(opts({}, false, 0.3), 7)),
  };
}
}  // namespace

void register_attention_ops(std::vector<OpInfo>& t) {
  t.push_back({"scaled_dot_product_attention", true,
               [](const Backend& b) { return b.attention && b.attention_backward && b.matmul && b.softmax; },
               [](Generator& g) { return attention_cases(g, AttentionImpl::fused); }});
  t.push_back({"scaled_dot_product_attention_composite", true,
               [](const Backend& b) { return b.matmul && b.softmax && b.softmax_backward && b.where; },
               [](Generator& g) { return attention_cases(g, AttentionImpl::composite); }});
}

}  // namespace graft
