#include "nn/conv.h"

#include <cmath>

#include "nn/init.h"

namespace graft::nn {

namespace {
void check_positive(int64_t v, const char* what, const char* layer) {
  GRAFT_CHECK(v > 0, "{}: {} must be positive, got {}", layer, what, v);
}
}  // namespace

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, Conv1dOptions o)
    : in_channels(in), out_channels(out), kernel_size(k), options(std::move(o)) {
  check_positive(in, "in_channels", "Conv1d");
  check_positive(out, "out_channels", "Conv1d");
  check_positive(k, "kernel_size", "Conv1d");
  check_positive(options.stride, "stride", "Conv1d");
  check_positive(options.dilation, "dilation", "Conv1d");
  check_positive(options.groups, "groups", "Conv1d");
  GRAFT_CHECK(in % options.groups == 0 && out % options.groups == 0,
              "Conv1d: in_channels {} and out_channels {} must be divisible by groups {}", in, out,
              options.groups);
  const int64_t span = options.dilation * (k - 1);
  const std::string& p = options.padding;
  if (p == "valid") {
  } else if (p == "same") {
    GRAFT_CHECK(options.stride == 1, "Conv1d: padding='same' needs stride 1, got {}", options.stride);
    pad_l_ = span / 2, pad_r_ = span - span / 2;
  } else if (p == "wide") {
    pad_l_ = pad_r_ = span;
  } else {
    size_t used = 0;
    int64_t n = -1;
    try {
      n = std::stoll(p, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    GRAFT_CHECK(used == p.size() && n >= 0,
                "Conv1d: padding '{}' is not a number >= 0, 'valid', 'same' or 'wide'", p);
    pad_l_ = pad_r_ = n;
  }
  weight = register_parameter("weight", empty({out, in / options.groups, k}));
  if (options.bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Conv1d::reset_parameters() {
  // kaiming_uniform_(a = sqrt(5)) on [C_out, C_in/G, K]: bound = 1 / sqrt(fan_in)
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(double(in_channels / options.groups * kernel_size));
    init::uniform_(bias, -bound, bound);
  }
}

int64_t Conv1d::output_length(int64_t L) const {
  return conv1d_output_length(L, kernel_size, options.stride, pad_l_, pad_r_, options.dilation);
}

Tensor Conv1d::forward(const Tensor& x) {
  check_defined(x, "Conv1d");
  GRAFT_CHECK((x.dim() == 3 || x.dim() == 2) && x.shape()[x.dim() - 2] == in_channels,
              "{}: input of shape {} must be [B, {}, L] or [{}, L]; hint: embedded tokens "
              "[B, L, C] need .transpose(1, 2)", repr(), x.shape(), in_channels, in_channels);
  Conv1dArgs a{options.stride, pad_l_, pad_r_, options.dilation, options.groups};
  Tensor xb = x.dim() == 2 ? x.unsqueeze(0) : x;
  // graft::conv1d takes symmetric numeric padding; asymmetric ("same", even K) goes by name
  Tensor y = pad_l_ == pad_r_
                 ? conv1d(xb, weight, bias, a.stride, pad_l_, a.dilation, a.groups)
                 : conv1d(xb, weight, bias, a.stride, std::string("same"), a.dilation, a.groups);
  return x.dim() == 2 ? y.squeeze(0) : y;
}

std::string Conv1d::repr() const {
  return fmt::format("Conv1d({}, {}, kernel_size={}, stride={}, padding={}, dilation={}, "
                     "groups={}, bias={})", in_channels, out_channels, kernel_size,
                     options.stride, options.padding, options.dilation, options.groups,
                     bias.defined());
}

MaxPool1d::MaxPool1d(int64_t k, std::optional<int64_t> s, int64_t p, int64_t d)
    : kernel_size(k), stride(s.value_or(k)), padding(p), dilation(d) {
  check_positive(k, "kernel_size", "MaxPool1d");
  check_positive(stride, "stride", "MaxPool1d");
  check_positive(d, "dilation", "MaxPool1d");
  GRAFT_CHECK(p >= 0 && p <= (d * (k - 1) + 1) / 2,
              "MaxPool1d: padding {} must be in [0, half the effective kernel size]", p);
}
Tensor MaxPool1d::forward(const Tensor& x) { return max_pool1d(x, kernel_size, stride, padding, dilation); }
std::string MaxPool1d::repr() const {
  return fmt::format("MaxPool1d(kernel_size={}, stride={}, padding={}, dilation={})", kernel_size,
                     stride, padding, dilation);
}

AvgPool1d::AvgPool1d(int64_t k, std::optional<int64_t> s, int64_t p, bool include)
    : kernel_size(k), stride(s.value_or(k)), padding(p), count_include_pad(include) {
  check_positive(k, "kernel_size", "AvgPool1d");
  check_positive(stride, "stride", "AvgPool1d");
  GRAFT_CHECK(p >= 0 && p <= k / 2, "AvgPool1d: padding {} must be in [0, kernel_size / 2 = {}]",
              p, k / 2);
}
Tensor AvgPool1d::forward(const Tensor& x) {
  return avg_pool1d(x, kernel_size, stride, padding, count_include_pad);
}
std::string AvgPool1d::repr() const {
  return fmt::format("AvgPool1d(kernel_size={}, stride={}, padding={}, count_include_pad={})",
                     kernel_size, stride, padding, count_include_pad);
}

}  // namespace graft::nn
