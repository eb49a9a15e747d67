// Reductions over any dims with keepdim: sum, mean, amax, amin, logsumexp, var; argmax; cumsum;
// sum_to.
#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

namespace {

// The keepdim shape: reduced dims set to 1.
Shape keep_shape(const Shape& s, const std::vector<int>& dims) {
  Shape k = s;
  for (int d : dims) k[d] = 1;
  return k;
}
Shape drop_shape(const Shape& s, const std::vector<int>& dims) {
  Shape k;
  for (int i = 0; i < s.size(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) k.push_back(s[i]);
  return k;
}

// Runs the reduce kernel; returns the keepdim-shaped result (no autograd).
Tensor reduce_raw(ReduceOp op, const Tensor& x, const std::vector<int>& dims, const char* name) {
  const Backend& be = detail::backend(name, {&x});
  Tensor out = Tensor::empty(keep_shape(x.shape(), dims), x.options());
  if (x.numel() == 0) {
    GRAFT_CHECK(op == ReduceOp::sum, "{}: cannot reduce an empty tensor", name);
    be.fill(out.kview(), 0.0);
    return out;
  }
  detail::need(be.reduce, name, x)(op, x.kview(), out.kview());
  return out;
}

Tensor finish(const Tensor& keep, const Shape& in, const std::vector<int>& dims, bool keepdim) {
  return keepdim ? keep : keep.reshape(drop_shape(in, dims));
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  check_defined(x, "sum");
  detail::check_float(x, "sum");
  std::vector<int> dims = detail::wrap_dims(dims_in, x.dim(), "sum");
  Tensor y = reduce_raw(ReduceOp::sum, x, dims, "sum");
  Shape in = x.shape(), ks = y.shape();
  if (auto n = record("sum", {x}, [in, ks](BackwardCtx& c) -> std::vector<Tensor> {
        return {c.grad().reshape(ks).expand(in)};  // dx = broadcast(dy)
      }))
    set_history(y, n);
  return finish(y, in, dims, keepdim);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  check_defined(x, "mean");
  std::vector<int> dims = detail::wrap_dims(dims_in, x.dim(), "mean");
  int64_t count = 1;
  for (int d : dims) count *= x.shape()[d];
  GRAFT_CHECK(count > 0, "mean: cannot average over an empty dimension (shape {})", x.shape());
  return mul(sum(x, dims_in, keepdim), 1.0 / double(count));  // composite: sum / n
}

namespace {
Tensor extremum(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim, ReduceOp op,
                const char* name) {
  check_defined(x, name);
  detail::check_float(x, name);
  GRAFT_CHECK(x.numel() > 0, "{}: cannot reduce an empty tensor", name);
  std::vector<int> dims = detail::wrap_dims(dims_in, x.dim(), name);
  Tensor y = reduce_raw(op, x, dims, name);
  if (auto n = record(name, {x}, [](BackwardCtx& c) -> std::vector<Tensor> {
        Tensor x = c.saved_tensor(0), y = c.saved_tensor(1);
        // dx = dy * [x == y] / (number of ties): the gradient is shared evenly among ties
        Tensor m = eq(x, y).to(x.dtype());
        Shape ks = y.shape();
        std::vector<int64_t> rd;
        for (int d = 0; d < x.dim(); ++d)
          if (ks[d] == 1 && x.shape()[d] != 1) rd.push_back(d);
        Tensor cnt = rd.empty() ? ones(ks, x.options()) : sum(m, rd, true);
        return {m * (c.grad().reshape(ks) / cnt)};
      })) {
    n->saved = {SavedTensor::input(x), SavedTensor::output(y, n)};
    set_history(y, n);
  }
  return finish(y, x.shape(), dims, keepdim);
}
}  // namespace

Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extremum(x, dims, keepdim, ReduceOp::max, "amax");
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extremum(x, dims, keepdim, ReduceOp::min, "amin");
}

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_defined(x, "logsumexp");
  // composite, stable: m + log(sum(exp(x - m))) with m = max(x) held constant
  Tensor m = amax(x.detach(), dims, true);
  Tensor y = log(sum(exp(x - m), dims, true)) + m;
  return keepdim ? y : y.reshape(drop_shape(y.shape(), detail::wrap_dims(dims, x.dim(), "logsumexp")));
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims_in, bool unbiased, bool keepdim) {
  check_defined(x, "var");
  std::vector<int> dims = detail::wrap_dims(dims_in, x.dim(), "var");
  int64_t n = 1;
  for (int d : dims) n *= x.shape()[d];
  GRAFT_CHECK(n - (unbiased ? 1 : 0) > 0, "var: need more than {} element(s) per reduction, got {}",
              unbiased ? 1 : 0, n);
  // composite: sum((x - mean)^2) / (n - unbiased)
  Tensor xc = x - mean(x, dims_in, true);
  return mul(sum(square(xc), dims_in, keepdim), 1.0 / double(n - (unbiased ? 1 : 0)));
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined(x, "argmax");
  detail::check_float(x, "argmax");
  NoGradGuard ng;
  int d = wrap_dim(dim, x.dim(), "argmax");
  int64_t n = x.shape()[d];
  GRAFT_CHECK(n > 0, "argmax: dim {} is empty", d);
  // first index of the maximum: max over (x == max) * (n - i), then n - that
  Tensor m = amax(x, {d}, true);
  Shape ishape = Shape::filled(x.dim(), 1);
  ishape[d] = n;
  Tensor rev = arange(double(n), 0.0, -1.0, x.options()).reshape(ishape);
  Tensor score = eq(x, m).to(x.dtype()) * rev;
  Tensor idx = (double(n) - amax(score, {d}, keepdim)).to(DType::i64);
  return idx;
}

namespace {
// y = cumsum of x along d, from the end when reverse.
Tensor cumsum_along(const Tensor& x, int d, bool reverse) {
  const Backend& be = detail::backend("cumsum", {&x});
  Tensor y = Tensor::empty(x.shape(), TensorOptions(x.dtype()).device(x.device()));
  detail::need(be.cumsum, "cumsum", x)(x.kview(), d, reverse, y.kview());
  if (auto n = record("cumsum", {x}, [d, reverse](BackwardCtx& c) -> std::vector<Tensor> {
        // dx_j = sum_{i >= j} dy_i: the cumsum of dy in the other direction
        return {cumsum_along(c.grad(), d, !reverse)};
      }))
    set_history(y, n);
  return y;
}
}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim) {
  check_defined(x, "cumsum");
  detail::check_float(x, "cumsum");
  return cumsum_along(x, wrap_dim(dim, x.dim(), "cumsum"), false);
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  std::vector<int64_t> dims;
  int lead = g.dim() - shape.size();
  GRAFT_ASSERT(lead >= 0);
  for (int i = 0; i < g.dim(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) dims.push_back(i);
  Tensor s = dims.empty() ? g : sum(g, dims, true);
  return s.reshape(shape);
}

// ------------------------------------------------------------------ op table entries
using namespace cases;

void register_reduce_ops(std::vector<OpInfo>& t) {
  auto has = [](const Backend& b) { return b.reduce && b.binary && b.compare; };
  t.push_back({"sum", true, has, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[3,4] all", {u(g, {3, 4})}, [](const auto& in) { return sum(in[0]); }),
                     mk("[2,3,4] dims {0,2}", {u(g, {2, 3, 4})}, [](const auto& in) { return sum(in[0], {0, 2}); }),
                     mk("transposed [4,3] dim 1 keepdim", {u(g, {3, 4})},
                        [](const auto& in) { return sum(in[0].t(), {1}, true); })};
               }});
  t.push_back({"mean", true, has, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[2,3,4] dim -1", {u(g, {2, 3, 4})}, [](const auto& in) { return mean(in[0], {-1}); }),
                     mk("[3,4] all", {u(g, {3, 4})}, [](const auto& in) { return mean(in[0]); })};
               }});
  // amax/amin: distinct values (a permutation scaled), so no ties at the kink
  auto distinct = [](Generator& g, const Shape& s) {
    int64_t n = s.numel();
    Tensor p = uniform(Shape{n}, 0, 1, DType::f64, &g);
    std::vector<double> v = p.to_vector<double>();
    for (int64_t i = 0; i < n; ++i) v[i] = double(i) * 0.25 + 0.1 * v[i];
    // shuffle deterministically
    for (int64_t i = n - 1; i > 0; --i) std::swap(v[i], v[int64_t(philox_uniform(g.seed, g.advance(1)) * double(i + 1))]);
    return from_vector(v, s, TensorOptions(DType::f64).requires_grad());
  };
  t.push_back({"amax", true, has, [distinct](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[3,4] dim 1", {distinct(g, {3, 4})}, [](const auto& in) { return amax(in[0], {1}); }),
                     mk("[2,3,4] all", {distinct(g, {2, 3, 4})}, [](const auto& in) { return amax(in[0]); })};
               }});
  t.push_back({"amin", true, has, [distinct](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[3,4] dim 0 keepdim", {distinct(g, {3, 4})}, [](const auto& in) { return amin(in[0], {0}, true); })};
               }});
  t.push_back({"logsumexp", true, has, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[3,5] dim 1", {u(g, {3, 5}, -3, 3)}, [](const auto& in) { return logsumexp(in[0], {1}); })};
               }});
  t.push_back({"var", true, has, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[3,5] dim 1 unbiased", {u(g, {3, 5})}, [](const auto& in) { return var(in[0], {1}); }),
                     mk("[2,3,4] dims {0,2} biased", {u(g, {2, 3, 4})},
                        [](const auto& in) { return var(in[0], {0, 2}, false); })};
               }});
  t.push_back({"cumsum", true, [](const Backend& b) { return b.cumsum != nullptr; },
               [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[3,4] dim 1", {u(g, {3, 4})}, [](const auto& in) { return cumsum(in[0], 1); }),
                     mk("[2,3,4] dim 0", {u(g, {2, 3, 4})}, [](const auto& in) { return cumsum(in[0], 0); }),
                     mk("transposed [4,3] dim -1", {u(g, {3, 4})},
                        [](const auto& in) { return cumsum(in[0].t(), -1); })};
               }});
  t.push_back({"argmax", false, has, [distinct](Generator& g) {
                 return std::vector<OpCase>{mk("[3,4] dim 1", {distinct(g, {3, 4})}, [](const auto& in) {
                   return argmax(in[0], 1).to(DType::f64);
                 })};
               }});
}

}  // namespace graft
