// graft::nn::init — in-place parameter initialisers, like torch.nn.init.
//
//   nn::init::xavier_uniform_(lin->weight);            // the global generator (manual_seed)
//   Generator g(42);  nn::init::orthogonal_(w, 1.0, &g);  // an explicit, seeded stream
//
// Every initialiser writes under NoGradGuard (parameters may require grad), accepts views
// (init::zeros_(w.select(0, pad))), returns its tensor, and draws its random numbers in
// float64 on the CPU before casting: the same seed gives the same values (rounded) for float32
// and float64 tensors. Zero-element tensors are left alone (after the arguments are checked).
#pragma once
#include <cstdint>
#include <optional>

#include "autograd/tensor.h"
#include "ops/random.h"

namespace graft::nn::init {

enum class Nonlinearity { linear, conv, sigmoid, tanh, relu, leaky_relu, selu };
enum class FanMode { fan_in, fan_out };

// Recommended gain for a nonlinearity (torch.nn.init.calculate_gain): linear/conv/sigmoid 1,
// tanh 5/3, relu sqrt(2), leaky_relu sqrt(2 / (1 + slope^2)) (slope = param, default 0.01),
// selu 3/4.
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);

// fan_in = size(1) * receptive, fan_out = size(0) * receptive, receptive = prod(dims[2:]).
// A Linear weight [out, in] has fan_in = in, fan_out = out. Needs at least 2 dims.
struct Fans {
  int64_t fan_in = 0;
  int64_t fan_out = 0;
};
Fans calculate_fan_in_and_fan_out(const Tensor& t);

// ---- plain distributions
// U[a, b)
Tensor uniform_(const Tensor& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
Tensor normal_(const Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
// N(mean, std^2) restricted to [a, b] (absolute bounds, as in PyTorch and BERT), sampled by the
// inverse CDF: u ~ U(Phi(alpha), Phi(beta)), x = mean + std Phi^-1(u).
Tensor trunc_normal_(const Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0,
                     double b = 2.0, Generator* gen = nullptr);
Tensor constant_(const Tensor& t, double value);
Tensor zeros_(const Tensor& t);
Tensor ones_(const Tensor& t);

// ---- variance-scaling (Glorot & Bengio 2010; He et al. 2015)
// U(-bound, bound), bound = gain sqrt(6 / (fan_in + fan_out))
Tensor xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// N(0, std^2), std = gain sqrt(2 / (fan_in + fan_out))
Tensor xavier_normal_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// U(-bound, bound), bound = gain(nonlinearity, a) sqrt(3 / fan); `a` is the leaky_relu slope.
Tensor kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nonlinearity = Nonlinearity::leaky_relu,
                        Generator* gen = nullptr);
// N(0, std^2), std = gain(nonlinearity, a) / sqrt(fan)
Tensor kaiming_normal_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                       Nonlinearity nonlinearity = Nonlinearity::leaky_relu,
                       Generator* gen = nullptr);

// ---- orthogonal (Saxe et al. 2013; RNN weights)
// t viewed as [rows = size(0), cols = numel / rows] becomes gain * Q with orthonormal rows
// (rows <= cols: W W^T = I) or columns (rows > cols: W^T W = I); Q from the QR decomposition
// of a standard normal matrix (Householder, float64), signs fixed so that diag(R) > 0.
Tensor orthogonal_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);

}  // namespace graft::nn::init
