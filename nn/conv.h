// Convolution and pooling layers over sequences, like torch.nn.Conv1d / MaxPool1d / AvgPool1d.
// Parameter names, shapes and initialisation are PyTorch's, so checkpoints map one to one:
//
//   nn::Conv1d conv(/*in*/ 50, /*out*/ 50, /*kernel*/ 3, {.padding = "wide"});
//   Tensor y = conv.forward(x);     // x [B, 50, L] -> y [B, 50, L + 2]
//   // parameters "weight" [50, 50, 3], "bias" [50]
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "autograd/conv.h"
#include "nn/module.h"

namespace graft::nn {

struct Conv1dOptions {
  int64_t stride = 1;
  // A number (as a string: "0", "2", ...), "valid", "same" or "wide" (see graft::conv1d).
  std::string padding = "0";
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

// y = conv1d(x, weight, bias): x [B, C_in, L] (or [C_in, L]) -> [B, C_out, L_out].
// weight [C_out, C_in/groups, K], bias [C_out]; both ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
// fan_in = C_in/groups * K (PyTorch's kaiming_uniform_(a = sqrt(5)) and its bias bound).
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv1dOptions options = {});
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;
  void reset_parameters();
  // L_out for an input of length L (PyTorch's formula, see graft::conv1d_output_length).
  int64_t output_length(int64_t L) const;

  const int64_t in_channels, out_channels, kernel_size;
  const Conv1dOptions options;
  Tensor weight;  // [C_out, C_in/groups, K]
  Tensor bias;    // [C_out]; undefined when options.bias = false

 private:
  int64_t pad_l_ = 0, pad_r_ = 0;  // resolved from options.padding
};

// Max over windows (stride defaults to kernel_size).
class MaxPool1d : public Module {
 public:
  explicit MaxPool1d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                     int64_t padding = 0, int64_t dilation = 1);
  Tensor forward(const Tensor& x) override;  // [B, C, L] -> [B, C, L_out]
  std::string repr() const override;
  const int64_t kernel_size, stride, padding, dilation;
};

// Mean over windows (stride defaults to kernel_size). With kernel_size = w and stride 1 after
// a wide convolution of width w, this is the "w-ap" layer of Yin et al. (L + w - 1 -> L).
class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                     int64_t padding = 0, bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;
  const int64_t kernel_size, stride, padding;
  const bool count_include_pad;
};

// Average over the whole sequence ("all-ap"): [B, C, L] -> [B, C].
using GlobalAvgPool1d = FunctionModule<"GlobalAvgPool1d", global_avg_pool1d>;
// Max over the whole sequence: [B, C, L] -> [B, C].
using GlobalMaxPool1d = FunctionModule<"GlobalMaxPool1d", global_max_pool1d>;

}  // namespace graft::nn
