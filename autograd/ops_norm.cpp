// softmax / log_softmax over any dim, and layer_norm over the last dim.
#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

namespace {

// softmax over the last dim of a contiguous tensor (kernel + autograd).
Tensor softmax_last(const Tensor& x, bool log_) {
  const char* name = log_ ? "log_softmax" : "softmax";
  const Backend& be = detail::backend(name, {&x});
  Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty(x.shape(), x.options());
  if (y.numel() > 0) detail::need(be.softmax, name, x)(xc.kview(), y.kview(), log_);
  if (auto n = record(name, {x}, [log_, name](BackwardCtx& c) -> std::vector<Tensor> {
        Tensor y = c.saved_tensor(0);
        const Tensor& dy = c.grad();
        if (c.create_graph) {
          if (log_) return {dy - exp(y) * sum(dy, {-1}, true)};  // dx = dy - softmax * sum(dy)
          return {y * (dy - sum(dy * y, {-1}, true))};            // dx = y (dy - sum(dy y))
        }
        const Backend& be = detail::backend(name, {&y, &dy});
        Tensor dyc = dy.contiguous();
        Tensor dx = Tensor::empty(y.shape(), y.options());
        if (dx.numel() > 0) be.softmax_backward(y.kview(), dyc.kview(), dx.kview(), log_);
        return {dx};
      })) {
    n->saved = {SavedTensor::output(y, n)};
    set_history(y, n);
  }
  return y;
}

Tensor softmax_any(const Tensor& x, int64_t dim, bool log_) {
  const char* name = log_ ? "log_softmax" : "softmax";
  check_defined(x, name);
  detail::check_float(x, name);
  if (x.dim() == 0) return softmax_last(x.reshape({1}), log_).reshape(Shape{});
  int d = wrap_dim(dim, x.dim(), name);
  if (d == x.dim() - 1) return softmax_last(x, log_);
  return softmax_last(x.transpose(d, -1), log_).transpose(d, -1);
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_any(x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_any(x, dim, true); }

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  check_defined(x, "layer_norm");
  detail::check_float(x, "layer_norm");
  GRAFT_CHECK(x.dim() >= 1, "layer_norm: input must have at least 1 dim");
  GRAFT_CHECK(eps >= 0, "layer_norm: eps must be >= 0, got {}", eps);
  int64_t C = x.shape().back();
  for (const Tensor* p : {&gamma, &beta}) {
    if (!p->defined()) continue;
    detail::check_same_dtype(x, *p, "layer_norm");
    GRAFT_CHECK(p->dim() == 1 && p->shape()[0] == C,
                "layer_norm: weight/bias must have shape [{}] (the last dim of input {}), got {}",
                C, x.shape(), p->shape());
  }
  const Backend& be = detail::backend("layer_norm", {&x, &gamma, &beta});
  Tensor x2 = x.detach().contiguous().reshape({-1, C});
  int64_t N = x2.shape()[0];
  Tensor y = Tensor::empty(x2.shape(), x.options());
  Tensor mu = Tensor::empty({N}, x.options()), rstd = Tensor::empty({N}, x.options());
  Tensor g = gamma.defined() ? gamma.detach().contiguous() : Tensor();
  Tensor b = beta.defined() ? beta.detach().contiguous() : Tensor();
  TensorView none;
  none.dtype = x.dtype();
  if (y.numel() > 0)
    detail::need(be.layer_norm, "layer_norm", x)(x2.kview(), g.defined() ? g.kview() : none,
                                                 b.defined() ? b.kview() : none, eps, y.kview(),
                                                 mu.kview(), rstd.kview());
  y = y.reshape(x.shape());
  if (auto n = record("layer_norm", {x, gamma, beta}, [C, eps](BackwardCtx& c) -> std::vector<Tensor> {
        Tensor x = c.saved_tensor(0), gamma = c.saved[1].defined() ? c.saved_tensor(1) : Tensor();
        Tensor mu = c.saved_tensor(2), rstd = c.saved_tensor(3);
        Tensor dy = c.grad().reshape({-1, C});
        Tensor x2 = x.reshape({-1, C});
        if (c.create_graph) {
          // composite, differentiable: xhat = (x - mean) rstd, dxhat = dy gamma,
          // dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dgamma = sum(dy xhat), dbeta = sum(dy)
          Tensor xc = x2 - mean(x2, {-1}, true);
          Tensor r = rsqrt(mean(xc * xc, {-1}, true) + eps);
          Tensor xhat = xc * r;
          Tensor dxhat = gamma.defined() ? dy * gamma : dy;
          Tensor dx = r * (dxhat - mean(dxhat, {-1}, true) - xhat * mean(dxhat * xhat, {-1}, true));
          return {dx.reshape(x.shape()), c.needs(1) ? sum(dy * xhat, {0}) : Tensor(),
                  c.needs(2) ? sum(dy, {0}) : Tensor()};
        }
        const Backend& be = detail::backend("layer_norm", {&x, &dy});
        Tensor dyc = dy.contiguous(), xcont = x2.contiguous();
        TensorOptions o = x.options();
        Tensor dx = Tensor::empty(x2.shape(), o);
        Tensor dg = c.needs(1) ? Tensor::empty({C}, o) : Tensor();
        Tensor db = c.needs(2) ? Tensor::empty({C}, o) : Tensor();
        TensorView none;
        none.dtype = x.dtype();
        Tensor gc = gamma.defined() ? gamma.contiguous() : Tensor();
        be.layer_norm_backward(xcont.kview(), gc.defined() ? gc.kview() : none, mu.kview(),
                               rstd.kview(), dyc.kview(), dx.kview(),
                               dg.defined() ? dg.kview() : none, db.defined() ? db.kview() : none);
        return {dx.reshape(x.shape()), dg, db};
      })) {
    n->saved = {SavedTensor::input(x), gamma.defined() ? SavedTensor::input(gamma) : SavedTensor(),
                SavedTensor::input(mu), SavedTensor::input(rstd)};
    set_history(y, n);
  }
  return y;
}

// ------------------------------------------------------------------ op table entries
using namespace cases;

void register_norm_ops(std::vector<OpInfo>& t) {
  auto has = [](const Backend& b) { return b.softmax && b.softmax_backward && b.reduce; };
  t.push_back({"softmax", true, has, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[3,5] dim -1, weighted", {u(g, {3, 5}, -2, 2)},
                        [](const auto& in) { return softmax(in[0], -1) * (in[0] + 1.0); }),
                     mk("[3,4,2] dim 1", {u(g, {3, 4, 2}, -2, 2)},
                        [](const auto& in) { return softmax(in[0], 1) * in[0]; })};
               }});
  t.push_back({"log_softmax", true, has, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[3,5] dim 1", {u(g, {3, 5}, -2, 2)}, [](const auto& in) { return log_softmax(in[0], 1); }),
                     mk("transposed [4,3] dim 0", {u(g, {3, 4}, -2, 2)},
                        [](const auto& in) { return log_softmax(in[0].t(), 0); })};
               }});
  t.push_back({"layer_norm", true,
               [](const Backend& b) { return b.layer_norm && b.layer_norm_backward && b.reduce; },
               [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[4,6] with gamma, beta", {u(g, {4, 6}, -2, 2), u(g, {6}, 0.5, 1.5), u(g, {6})},
                        [](const auto& in) { return layer_norm(in[0], in[1], in[2]); }),
                     mk("[2,3,5] no affine", {u(g, {2, 3, 5}, -2, 2)},
                        [](const auto& in) { return layer_norm(in[0]) * in[0]; })};
               }});
}

}  // namespace graft
