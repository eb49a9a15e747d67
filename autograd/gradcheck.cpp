// Finite-difference gradient checks (float64, central differences).
//
// For y = fn(inputs) we check the vector-Jacobian product with a fixed random projection v:
// analytical  g = d(sum(y * v))/dx  from backward (graft::grad), numerical
// g_j ~= (L(x + eps e_j) - L(x - eps e_j)) / (2 eps)  with L(x) = sum(fn(x) * v).
#include "autograd/gradcheck.h"

#include <cmath>

#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

namespace {

double dot(const Tensor& y, const std::vector<double>& v) {
  std::vector<double> a = y.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * v[i];
  return s;
}

std::vector<size_t> diff_inputs(const std::vector<Tensor>& inputs) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    GRAFT_CHECK(inputs[i].dtype() == DType::f64,
                "gradcheck: input {} is {}; gradcheck needs float64 inputs for accuracy", i,
                inputs[i].dtype());
    GRAFT_CHECK(inputs[i].is_leaf() && inputs[i].is_contiguous(),
                "gradcheck: input {} must be a contiguous leaf tensor", i);
    idx.push_back(i);
  }
  GRAFT_CHECK(!idx.empty(), "gradcheck: no input requires grad");
  return idx;
}

}  // namespace

GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps,
                          double atol, double rtol) {
  std::vector<size_t> idx = diff_inputs(inputs);
  Tensor y = fn(inputs);
  check_defined(y, "gradcheck");
  GRAFT_CHECK(y.dtype() == DType::f64, "gradcheck: fn returned {}; expected float64", y.dtype());
  Generator gv(1234);
  Tensor v = uniform(y.shape(), 0.5, 1.5, DType::f64, &gv);
  std::vector<double> vv = v.to_vector<double>();

  // analytical
  std::vector<Tensor> wrt;
  for (size_t i : idx) wrt.push_back(inputs[i]);
  std::vector<Tensor> ana(wrt.size());
  if (y.requires_grad()) ana = grad({y}, wrt, {v}, false, false, /*allow_unused=*/true);

  GradcheckResult res;
  for (size_t k = 0; k < wrt.size(); ++k) {
    Tensor x = wrt[k];
    std::vector<double> a = ana[k].defined() ? ana[k].to_vector<double>()
                                             : std::vector<double>(size_t(x.numel()), 0.0);
    GRAFT_CHECK(int64_t(a.size()) == x.numel(),
                "gradcheck: gradient for input {} has {} elements, the input {}", idx[k], a.size(),
                x.numel());
    double* p = x.data<double>();
    for (int64_t j = 0; j < x.numel(); ++j) {
      double orig = p[j];
      double lp, lm;
      {
        NoGradGuard ng;
        p[j] = orig + eps;
        lp = dot(fn(inputs), vv);
        p[j] = orig - eps;
        lm = dot(fn(inputs), vv);
        p[j] = orig;
      }
      double num = (lp - lm) / (2 * eps);
      double err = std::abs(a[j] - num);
      res.max_abs_err = std::max(res.max_abs_err, err);
      if (!(err <= atol + rtol * std::abs(num)) && res.ok) {
        res.ok = false;
        res.message = fmt::format("input {} element {}: analytical {:.10g} vs numerical {:.10g} "
                                  "(|diff| {:.3g} > atol {} + rtol {} * |numerical|)",
                                  idx[k], j, a[j], num, err, atol, rtol);
      }
    }
  }
  return res;
}

GradcheckResult gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps,
                              double atol, double rtol) {
  std::vector<size_t> idx = diff_inputs(inputs);
  Tensor y0;
  {
    NoGradGuard ng;
    y0 = fn(inputs);
  }
  Generator gv(4321);
  Tensor v = uniform(y0.shape(), 0.5, 1.5, DType::f64, &gv);
  // G(x) = sum_i sum(grad_i(x) * w_i): a scalar whose gradient needs second derivatives.
  std::vector<Tensor> ws;
  for (size_t i : idx) ws.push_back(uniform(inputs[i].shape(), 0.5, 1.5, DType::f64, &gv));
  TensorFn g = [&](const std::vector<Tensor>& in) -> Tensor {
    // The first derivatives always need the tape (also inside gradcheck's NoGradGuard for the
    // finite differences); only the analytical pass builds a graph of them (create_graph).
    const bool outer = GradMode::is_enabled();
    GradModeGuard on(true);
    Tensor y = fn(in);
    Tensor total = zeros({}, DType::f64);
    if (!y.requires_grad()) return total;
    std::vector<Tensor> wrt;
    for (size_t i : idx) wrt.push_back(in[i]);
    std::vector<Tensor> gs = grad({y}, wrt, {v}, /*retain_graph=*/false,
                                  /*create_graph=*/outer, /*allow_unused=*/true);
    for (size_t k = 0; k < gs.size(); ++k)
      if (gs[k].defined()) total = total + sum(gs[k] * ws[k]);
    return outer ? total : total.detach();
  };
  return gradcheck(g, inputs, eps, atol, rtol);
}

}  // namespace graft
