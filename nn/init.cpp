#include "nn/init.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"

namespace graft::nn::init {

namespace {

constexpr double kPi = 3.14159265358979323846;

void check_float(const Tensor& t, const char* op) {
  check_defined(t, op);
  GRAFT_CHECK(is_floating(t.dtype()),
              "init::{}: tensor must be floating (float32 or float64), got {}", op, t.dtype());
}

void check_finite(double v, const char* what, const char* op) {
  GRAFT_CHECK(std::isfinite(v), "init::{}: {} must be finite, got {}", op, what, v);
}

// Writes `values` (float64, CPU, shape of t) into t: cast to t's dtype, moved to its device.
Tensor write(const Tensor& t, const Tensor& values) {
  NoGradGuard ng;
  Tensor dst = t;
  dst.copy_(values.to(t.device()));
  return t;
}

int64_t fan(const Tensor& t, FanMode mode) {
  Fans f = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::fan_in ? f.fan_in : f.fan_out;
}

// ---- the standard normal CDF and its inverse (for trunc_normal_)
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }
double normal_pdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2.0 * kPi); }

// Phi^-1(u) for u in (0, 0.5]: the Abramowitz & Stegun 26.2.23 start (error < 5e-4), then
// Newton on g(z) = log Phi(z) - log u (concave, so it converges from either side), which stays
// accurate far into the lower tail where Phi(z) is tiny.
double probit_lower(double u) {
  const double t = std::sqrt(-2.0 * std::log(u));
  double z = -(t - (2.515517 + 0.802853 * t + 0.010328 * t * t) /
                       (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t));
  for (int i = 0; i < 10; ++i) {
    const double c = normal_cdf(z), p = normal_pdf(z);
    if (!(c > 0.0) || !(p > 0.0)) break;
    const double step = (std::log(c) - std::log(u)) * c / p;  // g / g', g' = phi / Phi
    z -= step;
    if (std::abs(step) <= 1e-15 * (1.0 + std::abs(z))) break;
  }
  return z;
}

double probit(double u) {
  if (u <= 0.0) return -std::numeric_limits<double>::infinity();
  if (u >= 1.0) return std::numeric_limits<double>::infinity();
  return u <= 0.5 ? probit_lower(u) : -probit_lower(1.0 - u);
}

// Q [m, n] (row-major, m >= n) with orthonormal columns from the Householder QR of A [m, n],
// each column multiplied by sign(R_jj) so the factorisation is unique (diag(R) > 0).
std::vector<double> householder_q(std::vector<double> A, int64_t m, int64_t n) {
  auto at = [n](std::vector<double>& M, int64_t i, int64_t j) -> double& {
    return M[size_t(i * n + j)];
  };
  std::vector<std::vector<double>> vs(static_cast<size_t>(n));  // reflectors v_k [m - k]
  std::vector<double> rdiag(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    double norm = 0;
    for (int64_t i = k; i < m; ++i) norm += at(A, i, k) * at(A, i, k);
    norm = std::sqrt(norm);
    // H_k = I - 2 v v^T maps A[k:, k] to alpha e_1; alpha's sign avoids cancellation in v
    const double alpha = at(A, k, k) > 0 ? -norm : norm;
    std::vector<double> v(size_t(m - k));
    for (int64_t i = k; i < m; ++i) v[size_t(i - k)] = at(A, i, k);
    v[0] -= alpha;
    double vn = 0;
    for (double x : v) vn += x * x;
    vn = std::sqrt(vn);
    if (vn == 0.0) {  // the column is already zero: H_k = I
      rdiag[size_t(k)] = at(A, k, k);
      continue;
    }
    for (double& x : v) x /= vn;
    for (int64_t j = k; j < n; ++j) {  // A[k:, j] -= 2 v (v . A[k:, j])
      double s = 0;
      for (int64_t i = k; i < m; ++i) s += v[size_t(i - k)] * at(A, i, j);
      for (int64_t i = k; i < m; ++i) at(A, i, j) -= 2.0 * v[size_t(i - k)] * s;
    }
    rdiag[size_t(k)] = at(A, k, k);
    vs[size_t(k)] = std::move(v);
  }
  // Q = H_0 H_1 ... H_{n-1} [I_n; 0], applied right to left
  std::vector<double> Q(size_t(m * n), 0.0);
  for (int64_t j = 0; j < n; ++j) at(Q, j, j) = 1.0;
  for (int64_t k = n - 1; k >= 0; --k) {
    const std::vector<double>& v = vs[size_t(k)];
    if (v.empty()) continue;
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = k; i < m; ++i) s += v[size_t(i - k)] * at(Q, i, j);
      for (int64_t i = k; i < m; ++i) at(Q, i, j) -= 2.0 * v[size_t(i - k)] * s;
    }
  }
  for (int64_t j = 0; j < n; ++j)
    if (rdiag[size_t(j)] < 0)
      for (int64_t i = 0; i < m; ++i) at(Q, i, j) = -at(Q, i, j);
  return Q;
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param) {
  switch (nonlinearity) {
    case Nonlinearity::linear:
    case Nonlinearity::conv:
    case Nonlinearity::sigmoid: return 1.0;
    case Nonlinearity::tanh: return 5.0 / 3.0;
    case Nonlinearity::relu: return std::sqrt(2.0);
    case Nonlinearity::leaky_relu: {
      const double slope = param.value_or(0.01);
      check_finite(slope, "the leaky_relu slope", "calculate_gain");
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case Nonlinearity::selu: return 0.75;
  }
  throw Error("init::calculate_gain: unknown nonlinearity");
}

Fans calculate_fan_in_and_fan_out(const Tensor& t) {
  check_defined(t, "calculate_fan_in_and_fan_out");
  GRAFT_CHECK(t.dim() >= 2,
              "init: fan_in and fan_out need a tensor with at least 2 dims (a weight [out, in, "
              "...]), got shape {}; hint: initialise 1-D tensors (biases) with uniform_, normal_ "
              "or zeros_",
              t.shape());
  int64_t receptive = 1;
  for (int d = 2; d < t.dim(); ++d) receptive *= t.shape()[d];
  return {t.shape()[1] * receptive, t.shape()[0] * receptive};
}

Tensor uniform_(const Tensor& t, double a, double b, Generator* gen) {
  check_float(t, "uniform_");
  check_finite(a, "the lower bound a", "uniform_");
  check_finite(b, "the upper bound b", "uniform_");
  GRAFT_CHECK(a <= b, "init::uniform_: need a <= b, got a = {}, b = {}", a, b);
  if (t.numel() == 0) return t;
  return write(t, graft::uniform(t.shape(), a, b, DType::f64, gen));
}

Tensor normal_(const Tensor& t, double mean, double std, Generator* gen) {
  check_float(t, "normal_");
  check_finite(mean, "mean", "normal_");
  check_finite(std, "std", "normal_");
  GRAFT_CHECK(std >= 0, "init::normal_: std must be >= 0, got {}", std);
  if (t.numel() == 0) return t;
  NoGradGuard ng;
  return write(t, graft::randn(t.shape(), DType::f64, gen) * std + mean);
}

Tensor trunc_normal_(const Tensor& t, double mean, double std, double a, double b,
                     Generator* gen) {
  check_float(t, "trunc_normal_");
  check_finite(mean, "mean", "trunc_normal_");
  check_finite(std, "std", "trunc_normal_");
  check_finite(a, "the lower bound a", "trunc_normal_");
  check_finite(b, "the upper bound b", "trunc_normal_");
  GRAFT_CHECK(std > 0, "init::trunc_normal_: std must be > 0, got {}", std);
  GRAFT_CHECK(a < b, "init::trunc_normal_: need a < b, got a = {}, b = {}", a, b);
  if (t.numel() == 0) return t;
  // Standardised bounds; an interval in the upper tail is mirrored into the lower one, where
  // Phi keeps its relative precision.
  double alpha = (a - mean) / std, beta = (b - mean) / std;
  const bool mirror = alpha > 0;
  if (mirror) {
    const double lo_std = -beta, hi_std = -alpha;
    alpha = lo_std;
    beta = hi_std;
  }
  const double lo = normal_cdf(alpha), hi = normal_cdf(beta);
  std::vector<double> u = graft::rand(t.shape(), DType::f64, gen).to_vector<double>();
  for (double& x : u) {
    const double z = probit(lo + (hi - lo) * x);  // z ~ N(0, 1) restricted to [alpha, beta]
    x = std::clamp(mean + std * (mirror ? -z : z), a, b);
  }
  return write(t, from_vector(u, t.shape(), DType::f64));
}

Tensor constant_(const Tensor& t, double value) {
  check_defined(t, "constant_");
  NoGradGuard ng;
  Tensor dst = t;
  dst.fill_(value);
  return t;
}
Tensor zeros_(const Tensor& t) { return constant_(t, 0.0); }
Tensor ones_(const Tensor& t) { return constant_(t, 1.0); }

Tensor xavier_uniform_(const Tensor& t, double gain, Generator* gen) {
  check_float(t, "xavier_uniform_");
  check_finite(gain, "gain", "xavier_uniform_");
  Fans f = calculate_fan_in_and_fan_out(t);
  if (t.numel() == 0) return t;
  const double bound = std::abs(gain) * std::sqrt(6.0 / double(f.fan_in + f.fan_out));
  return uniform_(t, -bound, bound, gen);
}

Tensor xavier_normal_(const Tensor& t, double gain, Generator* gen) {
  check_float(t, "xavier_normal_");
  check_finite(gain, "gain", "xavier_normal_");
  Fans f = calculate_fan_in_and_fan_out(t);
  if (t.numel() == 0) return t;
  return normal_(t, 0.0, std::abs(gain) * std::sqrt(2.0 / double(f.fan_in + f.fan_out)), gen);
}

namespace {
// What both kaiming_* fills scale by: the nonlinearity's gain and the fan of `mode` (after the
// same checks: a float t, a known nonlinearity, a t with fans).
struct Kaiming {
  double gain;
  int64_t n;
};
Kaiming kaiming(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                const char* op) {
  check_float(t, op);
  const double gain = calculate_gain(nonlinearity, a);
  return {gain, fan(t, mode)};
}
}  // namespace

Tensor kaiming_uniform_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                        Generator* gen) {
  const Kaiming k = kaiming(t, a, mode, nonlinearity, "kaiming_uniform_");
  if (t.numel() == 0) return t;
  const double bound = k.gain * std::sqrt(3.0 / double(k.n));
  return uniform_(t, -bound, bound, gen);
}

Tensor kaiming_normal_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                       Generator* gen) {
  const Kaiming k = kaiming(t, a, mode, nonlinearity, "kaiming_normal_");
  if (t.numel() == 0) return t;
  return normal_(t, 0.0, k.gain / std::sqrt(double(k.n)), gen);
}

Tensor orthogonal_(const Tensor& t, double gain, Generator* gen) {
  check_float(t, "orthogonal_");
  check_finite(gain, "gain", "orthogonal_");
  GRAFT_CHECK(t.dim() >= 2,
              "init::orthogonal_: needs a tensor with at least 2 dims, got shape {}", t.shape());
  if (t.numel() == 0) return t;
  const int64_t rows = t.shape()[0], cols = t.numel() / rows;
  // A [rows, cols] ~ N(0, 1); factor the tall one of A and A^T: [m, n] with m >= n
  std::vector<double> a = graft::randn(Shape{rows, cols}, DType::f64, gen).to_vector<double>();
  const bool wide = rows < cols;
  const int64_t m = wide ? cols : rows, n = wide ? rows : cols;
  std::vector<double> tall = a;
  if (wide)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) tall[size_t(j * rows + i)] = a[size_t(i * cols + j)];
  std::vector<double> q = householder_q(std::move(tall), m, n);  // [m, n]
  std::vector<double> w(size_t(rows * cols));                    // W = gain Q (or gain Q^T)
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      w[size_t(i * cols + j)] = gain * (wide ? q[size_t(j * n + i)] : q[size_t(i * n + j)]);
  return write(t, from_vector(w, t.shape(), DType::f64));
}

}  // namespace graft::nn::init
