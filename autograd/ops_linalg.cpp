// matmul (batched, broadcast batch dims, 1-D operands) and linear (fused bias).
#include "autograd/autocast.h"
#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

namespace {

// a [..., M, K] @ b [..., K, N] for rank >= 2 operands.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  int ra = a.dim(), rb = b.dim();
  int64_t M = a.shape()[ra - 2], K = a.shape()[ra - 1], K2 = b.shape()[rb - 2], N = b.shape()[rb - 1];
  GRAFT_CHECK(K == K2, "matmul: shapes {} and {} cannot be multiplied ({} != {}); hint: the last "
              "dim of the first operand must equal the second-to-last dim of the second",
              a.shape(), b.shape(), K, K2);
  Shape ba, bb;
  for (int i = 0; i < ra - 2; ++i) ba.push_back(a.shape()[i]);
  for (int i = 0; i < rb - 2; ++i) bb.push_back(b.shape()[i]);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  Shape sa = batch, sb = batch, so = batch;
  sa.push_back(M), sa.push_back(K);
  sb.push_back(K), sb.push_back(N);
  so.push_back(M), so.push_back(N);
  const Backend& be = detail::backend("matmul", {&a, &b});
  Tensor y = Tensor::empty(so, a.options());
  if (y.numel() > 0) {
    if (K == 0)
      be.fill(y.kview(), 0.0);
    else
      detail::need(be.matmul, "matmul", a)(a.kview().broadcast_to(sa), b.kview().broadcast_to(sb),
                                           y.kview(), autocast_for(a, double(y.numel()) * double(K)));
  }
  if (auto n = record("matmul", {a, b}, [prec = autocast_precision()](BackwardCtx& c) -> std::vector<Tensor> {
        AutocastGuard ac(prec);  // backward in the forward's precision
        Tensor a = c.saved_tensor(0), b = c.saved_tensor(1);
        const Tensor& dy = c.grad();
        // da = dy @ b^T, db = a^T @ dy (summed over broadcast batch dims)
        return {c.needs(0) ? sum_to(matmul_nd(dy, b.transpose(-1, -2)), a.shape()) : Tensor(),
                c.needs(1) ? sum_to(matmul_nd(a.transpose(-1, -2), dy), b.shape()) : Tensor()};
      })) {
    n->saved = {SavedTensor::input(a), SavedTensor::input(b)};
    set_history(y, n);
  }
  return y;
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_defined(a, "matmul");
  check_defined(b, "matmul");
  detail::check_float(a, "matmul");
  detail::check_same_dtype(a, b, "matmul");
  GRAFT_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got {} and {}",
              a.shape(), b.shape());
  if (a.dim() == 1 && b.dim() == 1) {
    GRAFT_CHECK(a.shape()[0] == b.shape()[0], "matmul: shapes {} and {} cannot be multiplied ({} != {})",
                a.shape(), b.shape(), a.shape()[0], b.shape()[0]);
    return matmul_nd(a.unsqueeze(0), b.unsqueeze(1)).reshape(Shape{});
  }
  if (a.dim() == 1) return matmul_nd(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul_nd(a, b.unsqueeze(1)).squeeze(-1);
  return matmul_nd(a, b);
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  check_defined(x, "linear");
  check_defined(w, "linear");
  detail::check_float(x, "linear");
  detail::check_same_dtype(x, w, "linear");
  GRAFT_CHECK(w.dim() == 2, "linear: weight must be 2-D [out, in], got {}", w.shape());
  GRAFT_CHECK(x.dim() >= 1 && x.shape().back() == w.shape()[1],
              "linear: input {} and weight {} do not match (input features {} != weight in {})",
              x.shape(), w.shape(), x.dim() ? x.shape().back() : 0, w.shape()[1]);
  int64_t O = w.shape()[0], I = w.shape()[1];
  if (bias.defined()) {
    detail::check_same_dtype(x, bias, "linear");
    GRAFT_CHECK(bias.dim() == 1 && bias.shape()[0] == O, "linear: bias must be [{}], got {}", O,
                bias.shape());
  }
  // x [N..., I] -> x2 [N, I]
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = O;
  Tensor x2 = x.detach().reshape({-1, I});
  Tensor wc = w.detach().contiguous(), bc = bias.defined() ? bias.detach() : Tensor();
  const Backend& be = detail::backend("linear", {&x, &w, &bias});
  Tensor y = Tensor::empty({x2.shape()[0], O}, x.options());
  TensorView bv;
  bv.dtype = x.dtype();
  if (bc.defined()) bv = bc.contiguous().kview();
  if (y.numel() > 0)
    detail::need(be.linear, "linear", x)(x2.kview(), wc.kview(), bv, y.kview(),
                                         autocast_for(x, double(y.numel()) * double(I)));
  y = y.reshape(out_shape);
  if (auto n = record("linear", {x, w, bias}, [I, prec = autocast_precision()](BackwardCtx& c) -> std::vector<Tensor> {
        AutocastGuard ac(prec);  // backward in the forward's precision
        Tensor x = c.saved_tensor(0), w = c.saved_tensor(1);
        Tensor dy2 = c.grad().reshape({-1, c.grad().shape().back()});
        // dx = dy @ w ; dw = dy^T @ x ; db = sum_rows(dy)
        Tensor dx = c.needs(0) ? matmul(dy2, w).reshape(x.shape()) : Tensor();
        Tensor dw = c.needs(1) ? matmul(dy2.t(), x.reshape({-1, I})) : Tensor();
        Tensor db = c.needs(2) ? sum(dy2, {0}) : Tensor();
        return {dx, dw, db};
      })) {
    n->saved = {SavedTensor::input(x), SavedTensor::input(w)};
    set_history(y, n);
  }
  return y;
}

// ------------------------------------------------------------------ op table entries
using namespace cases;

void register_linalg_ops(std::vector<OpInfo>& t) {
  auto has = [](const Backend& b) { return b.matmul && b.reduce; };
  t.push_back({"matmul", true, has, [](Generator& g) {
                 auto f = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
                 return std::vector<OpCase>{
                     mk("[3,4] @ [4,5]", {u(g, {3, 4}), u(g, {4, 5})}, f),
                     mk("transposed [4,3]^T @ [4,2]", {u(g, {4, 3}), u(g, {4, 2})},
                        [](const auto& in) { return matmul(in[0].t(), in[1]); }),
                     mk("batched [2,3,4] @ [2,4,2]", {u(g, {2, 3, 4}), u(g, {2, 4, 2})}, f),
                     mk("broadcast [2,1,3,4] @ [3,4,2]", {u(g, {2, 1, 3, 4}), u(g, {3, 4, 2})}, f),
                     mk("vector [4] @ [4,3]", {u(g, {4}), u(g, {4, 3})}, f),
                     mk("[3,4] @ vector [4]", {u(g, {3, 4}), u(g, {4})}, f)};
               }});
  t.push_back({"linear", true, [](const Backend& b) { return b.linear && b.matmul && b.reduce; },
               [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[5,4] W[3,4] b[3]", {u(g, {5, 4}), u(g, {3, 4}), u(g, {3})},
                        [](const auto& in) { return linear(in[0], in[1], in[2]); }),
                     mk("[2,3,4] W[2,4] no bias", {u(g, {2, 3, 4}), u(g, {2, 4})},
                        [](const auto& in) { return linear(in[0], in[1]); }),
                     mk("transposed W", {u(g, {3, 4}), u(g, {4, 2}), u(g, {2})},
                        [](const auto& in) { return linear(in[0], in[1].t(), in[2]); })};
               }});
}

}  // namespace graft
