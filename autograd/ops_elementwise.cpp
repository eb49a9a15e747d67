// Elementwise ops: unary math, binary math with broadcasting, comparisons, where/masked_fill.
// The math and its derivative rules are written once in ops/functors.h; here are the tape
// nodes (autograd/tensor_functors.h runs the rules on tensors) and the op-table entries.
#include <cmath>

#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"
#include "autograd/tensor_functors.h"

namespace graft {

namespace {

Tensor unary_op(UnaryOp op, double alpha, const Tensor& x) {
  const char* name = unary_name(op);
  check_defined(x, name);
  detail::check_float(x, name);
  const Backend& b = detail::backend(name, {&x});
  Tensor y = Tensor::empty(x.shape(), x.options());
  detail::need(b.unary, name, x)(op, alpha, x.kview(), y.kview());
  if (auto n = record(name, {x}, [op, alpha](BackwardCtx& c) -> std::vector<Tensor> {
        Tensor x = c.saved_tensor(0), y = c.saved_tensor(1);
        const Tensor& dy = c.grad();
        // dx = df(x, y, dy), the functor's rule (ops/functors.h): on tensors, so that the result
        // is differentiable again, or fused into one kernel when no graph is wanted
        if (c.create_graph) return {tfn::unary_df(op, alpha, x, y, dy)};
        Tensor dx = Tensor::empty(x.shape(), x.options());
        const Backend& be = detail::backend(unary_name(op), {&x, &dy});
        detail::need(be.unary_backward, unary_name(op), x)(op, alpha, x.kview(), y.kview(),
                                                          dy.kview(), dx.kview());
        return {dx};
      })) {
    n->saved = {SavedTensor::input(x), SavedTensor::output(y, n)};
    set_history(y, n);
  }
  return y;
}

Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_name(op);
  check_defined(a, name);
  check_defined(b, name);
  detail::check_float(a, name);
  detail::check_same_dtype(a, b, name);
  const Backend& be = detail::backend(name, {&a, &b});
  Tensor y;
  if (a.shape() == b.shape()) {  // common case: no broadcasting work
    y = Tensor::empty(a.shape(), a.options());
    detail::need(be.binary, name, a)(op, a.kview(), b.kview(), y.kview());
  } else {
    Shape s = broadcast_shapes(a.shape(), b.shape(), name);
    y = Tensor::empty(s, a.options());
    detail::need(be.binary, name, a)(op, a.kview().broadcast_to(s), b.kview().broadcast_to(s), y.kview());
  }
  // Save what the op's rules read (add and sub: nothing, pow: y as well); ops/functors.h has
  // the rules, autograd/tensor_functors.h runs them on tensors.
  const unsigned use = tfn::binary_uses(op);
  Shape sa = a.shape(), sb = b.shape();
  if (auto n = record(name, {a, b}, [op, use, sa, sb](BackwardCtx& c) -> std::vector<Tensor> {
        Tensor a, b, y;
        int k = 0;
        if (use & tfn::kUseX) a = c.saved_tensor(k++);
        if (use & tfn::kUseZ) b = c.saved_tensor(k++);
        if (use & tfn::kUseY) y = c.saved_tensor(k++);
        const Tensor& dy = c.grad();
        // da = dF/da dy, db = dF/db dy at the broadcast shape, then summed back to each input's
        Tensor da = c.needs(0) ? sum_to(tfn::binary_d(op, true, a, b, y, dy), sa) : Tensor();
        Tensor db = c.needs(1) ? sum_to(tfn::binary_d(op, false, a, b, y, dy), sb) : Tensor();
        return {da, db};
      })) {
    if (use & tfn::kUseX) n->saved.push_back(SavedTensor::input(a));
    if (use & tfn::kUseZ) n->saved.push_back(SavedTensor::input(b));
    if (use & tfn::kUseY) n->saved.push_back(SavedTensor::output(y, n));
    set_history(y, n);
  }
  return y;
}

Tensor compare_op(CompareOp op, const Tensor& a, const Tensor& b) {
  const char* name = compare_name(op);
  check_defined(a, name);
  check_defined(b, name);
  detail::check_same_dtype(a, b, name);
  const Backend& be = detail::backend(name, {&a, &b});
  Shape s = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor y = Tensor::empty(s, TensorOptions(DType::b8).device(a.device()));
  detail::need(be.compare, name, a)(op, a.kview().broadcast_to(s), b.kview().broadcast_to(s), y.kview());
  return y;
}

}  // namespace

#define GRAFT_DEFINE_UNARY(name, ...) \
  Tensor name(const Tensor& x) { return unary_op(UnaryOp::name, 0.0, x); }
GRAFT_PLAIN_UNARY_OPS(GRAFT_DEFINE_UNARY)
#undef GRAFT_DEFINE_UNARY
Tensor gelu(const Tensor& x, const std::string& approximate) {
  GRAFT_CHECK(approximate == "none" || approximate == "tanh",
              "gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
  return unary_op(approximate == "none" ? UnaryOp::gelu : UnaryOp::gelu_tanh, 0.0, x);
}
Tensor pow(const Tensor& x, double e) { return unary_op(UnaryOp::pow_scalar, e, x); }
Tensor square(const Tensor& x) { return unary_op(UnaryOp::pow_scalar, 2.0, x); }
Tensor add(const Tensor& x, double s) { return unary_op(UnaryOp::add_scalar, s, x); }
Tensor mul(const Tensor& x, double s) { return unary_op(UnaryOp::mul_scalar, s, x); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  GRAFT_CHECK(beta != 0.0 && std::isfinite(beta), "softplus: beta must be finite and nonzero, got {}",
              beta);
  if (beta == 1.0) return unary_op(UnaryOp::softplus, threshold, x);
  check_defined(x, "softplus");
  detail::check_float(x, "softplus");
  return unary_op(UnaryOp::softplus, threshold, x * beta) * (1.0 / beta);  // sp(beta x) / beta
}

Tensor add(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::minimum, a, b); }

Tensor eq(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::ge, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined(cond, "where");
  check_defined(a, "where");
  check_defined(b, "where");
  GRAFT_CHECK(cond.dtype() == DType::b8, "where: condition must be bool, got {}; hint: use a "
              "comparison such as gt(x, y)", cond.dtype());
  detail::check_same_dtype(a, b, "where");
  const Backend& be = detail::backend("where", {&cond, &a, &b});
  Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor y = Tensor::empty(s, a.options());
  detail::need(be.where, "where", a)(cond.kview().broadcast_to(s), a.kview().broadcast_to(s),
                                     b.kview().broadcast_to(s), y.kview());
  if (auto n = record("where", {Tensor(), a, b}, [](BackwardCtx& c) -> std::vector<Tensor> {
        Tensor cond = c.saved_tensor(0), a = c.saved_tensor(1), b = c.saved_tensor(2);
        const Tensor& dy = c.grad();
        Tensor zero = zeros(Shape{}, dy.options());
        // da = dy [cond], db = dy [!cond]
        return {Tensor(), c.needs(1) ? sum_to(where(cond, dy, zero), a.shape()) : Tensor(),
                c.needs(2) ? sum_to(where(cond, zero, dy), b.shape()) : Tensor()};
      })) {
    n->saved = {SavedTensor::input(cond), SavedTensor::input(a.detach()), SavedTensor::input(b.detach())};
    set_history(y, n);
  }
  return y;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined(x, "masked_fill");
  return where(mask, full(Shape{}, value, x.options()), x);
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double s) { return add(a, s); }
Tensor operator-(const Tensor& a, double s) { return add(a, -s); }
Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
Tensor operator/(const Tensor& a, double s) { return mul(a, 1.0 / s); }
Tensor operator+(double s, const Tensor& a) { return add(a, s); }
Tensor operator-(double s, const Tensor& a) { return add(neg(a), s); }
Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
Tensor operator/(double s, const Tensor& a) { return mul(pow(a, -1.0), s); }

// ------------------------------------------------------------------ op table entries
using namespace cases;

void register_elementwise_ops(std::vector<OpInfo>& t) {
  auto has_unary = [](const Backend& b) { return b.unary && b.unary_backward; };
  auto has_binary = [](const Backend& b) { return b.binary && b.compare && b.where; };
  // Unary ops: each on a [3,4] input and on a transposed (non-contiguous) one, inside its
  // domain; ops with a kink at 0 (abs, relu) get inputs away from it.
  struct U { const char* name; std::function<Tensor(const Tensor&)> fn; double lo, hi; bool kink; };
  const std::vector<U> unaries = {
#define GRAFT_UNARY_CASE(name, F, lo, hi, ...) \
  {#name, [](const Tensor& x) { return name(x); }, lo, hi, (lo) == (hi)},
      GRAFT_PLAIN_UNARY_OPS(GRAFT_UNARY_CASE)
#undef GRAFT_UNARY_CASE
      {"gelu", [](const Tensor& x) { return gelu(x); }, -3, 3, false},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, -3, 3, false},
      {"pow_scalar", [](const Tensor& x) { return pow(x, 2.5); }, 0.3, 2, false},
      {"add_scalar", [](const Tensor& x) { return x + 0.75; }, -2, 2, false},
      {"mul_scalar", [](const Tensor& x) { return x * -1.5; }, -2, 2, false},
      {"softplus", [](const Tensor& x) { return softplus(x); }, -3, 3, false},
      {"softplus beta=2 threshold=3", [](const Tensor& x) { return softplus(x, 2.0, 3.0); }, -2, 2, false},
  };
  for (const U& u : unaries) {
    t.push_back({u.name, true, has_unary, [u](Generator& g) {
                   Tensor x = u.kink ? away0(g, {3, 4}) : cases::u(g, {3, 4}, u.lo, u.hi);
                   Tensor xt = u.kink ? away0(g, {4, 3}) : cases::u(g, {4, 3}, u.lo, u.hi);
                   auto f = u.fn;
                   return std::vector<OpCase>{
                       mk("[3,4]", {x}, [f](const std::vector<Tensor>& in) { return f(in[0]); }),
                       mk("transposed [3,4]", {xt},
                          [f](const std::vector<Tensor>& in) { return f(in[0].t()); })};
                 }});
  }
  // Binary ops: same shapes, broadcast [3,1] x [4], and a transposed operand.
  struct B { const char* name; std::function<Tensor(const Tensor&, const Tensor&)> fn; double lo, hi; bool kink; };
  const std::vector<B> binaries = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, -2, 2, false},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, -2, 2, false},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, -2, 2, false},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, 0.5, 2, false},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, 0.5, 2, false},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, 0, 0, true},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, 0, 0, true},
  };
  for (const B& bo : binaries) {
    t.push_back({bo.name, true, has_binary, [bo](Generator& g) {
                   auto f = bo.fn;
                   Fn fn = [f](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
                   Fn fnt = [f](const std::vector<Tensor>& in) { return f(in[0].t(), in[1]); };
                   auto draw = [&](const Shape& s) {
                     // for max/min keep a and b apart: a away from 0, b = 0 plus small noise
                     return bo.kink ? away0(g, s) : cases::u(g, s, bo.lo, bo.hi);
                   };
                   auto near0 = [&](const Shape& s) {
                     return bo.kink ? cases::u(g, s, -0.1, 0.1) : draw(s);
                   };
                   return std::vector<OpCase>{
                       mk("[3,4] (.) [3,4]", {draw({3, 4}), near0({3, 4})}, fn),
                       mk("broadcast [3,1] (.) [4]", {draw({3, 1}), near0({4})}, fn),
                       mk("transposed [4,3]^T (.) [3,4]", {draw({4, 3}), near0({3, 4})}, fnt)};
                 }});
  }
  // Comparisons: forward only (boolean output, not differentiable).
  const std::vector<std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)>> cmps = {
      {"eq", eq}, {"ne", ne}, {"lt", lt}, {"le", le}, {"gt", gt}, {"ge", ge}};
  for (auto [name, f] : cmps) {
    t.push_back({name, false, has_binary, [f](Generator& g) {
                   // rounded values so that equality actually occurs
                   Tensor a = cases::u(g, {3, 4}, -2, 2, false).to(DType::i64).to(DType::f64);
                   Tensor b = cases::u(g, {4}, -2, 2, false).to(DType::i64).to(DType::f64);
                   return std::vector<OpCase>{mk("broadcast [3,4] vs [4]", {a, b},
                                                 [f](const std::vector<Tensor>& in) {
                                                   return f(in[0], in[1]).to(DType::f64);
                                                 })};
                 }});
  }
  t.push_back({"where", true, has_binary, [](Generator& g) {
                 Tensor c = gt(cases::u(g, {3, 4}, -1, 1, false), zeros({}, DType::f64));
                 return std::vector<OpCase>{
                     mk("cond [3,4], a [3,4], b [4]", {c, cases::u(g, {3, 4}), cases::u(g, {4})},
                        [](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); })};
               }});
  t.push_back({"masked_fill", true, has_binary, [](Generator& g) {
                 Tensor m = gt(cases::u(g, {1, 4}, -1, 1, false), zeros({}, DType::f64));
                 return std::vector<OpCase>{
                     mk("x [3,4], mask [1,4]", {cases::u(g, {3, 4}), m},
                        [](const std::vector<Tensor>& in) { return masked_fill(in[0], in[1], -3.0); })};
               }});
}

}  // namespace graft
