// 1-D convolution and pooling over sequences (PyTorch's torch.nn.functional names and argument
// orders). Every op here is in the op table with float64 gradcheck cases (autograd/ops_conv.cpp).
//
// Shapes: x [B, C, L] (or unbatched [C, L]); weight [C_out, C_in/groups, K]; bias [C_out].
// Output length (PyTorch's formula): L_out = (L + pad_l + pad_r - dilation (K - 1) - 1) / stride + 1.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "autograd/tensor.h"
#include "ops/kernels.h"

namespace graft {

// y[b, o, t] = bias[o] + sum_{i, k} weight[o, i, k] x[b, g C_in/G + i, t stride - padding + k dilation]
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// padding by name: "valid" (none), "same" (L_out = L; stride 1; an odd total puts the extra
// tap on the right, as PyTorch), "wide" (dilation (K-1) on both sides: L_out = L + dilation (K-1),
// every partial overlap of the filter with the sequence: the wide convolution of Yin et al.).
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              const std::string& padding, int64_t dilation = 1, int64_t groups = 1);
// PyTorch's output-length formula (graft::Error when it would be below 1).
int64_t conv1d_output_length(int64_t L, int64_t kernel_size, int64_t stride, int64_t pad_l,
                             int64_t pad_r, int64_t dilation);

// The two halves of conv1d's backward, differentiable themselves (double backward):
// dx [B, C_in, L] = conv1d's transpose applied to dy [B, C_out, L_out];
Tensor conv1d_backward_input(const Tensor& dy, const Tensor& weight, int64_t L,
                             const Conv1dArgs& args);
// dw [C_out, C_in/G, K] = sum_{b, t} dy[b, o, t] x-taps.
Tensor conv1d_backward_weight(const Tensor& x, const Tensor& dy, int64_t kernel_size,
                              const Conv1dArgs& args);

// Max over windows of kernel_size taps, `dilation` apart, every `stride` (default kernel_size)
// positions; padding (at most half the effective window) reads -inf.
Tensor max_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                  int64_t padding = 0, int64_t dilation = 1);
// Mean over windows; count_include_pad: divide by kernel_size (true) or by the taps inside x.
Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                  int64_t padding = 0, bool count_include_pad = true);
// Over the whole sequence: [B, C, L] -> [B, C] (all-ap in Yin et al.; [C, L] -> [C]).
Tensor global_avg_pool1d(const Tensor& x);
Tensor global_max_pool1d(const Tensor& x);

// The backward of pooling, differentiable (double backward): dx [B, C, L] from dy [B, C, L_out].
// max: dx[indices] += dy (indices from the forward, int64 [B, C, L_out]);
Tensor max_pool1d_backward(const Tensor& dy, const Tensor& indices, int64_t L,
                           const Pool1dArgs& args);
// avg: each dy spread over its window.
Tensor avg_pool1d_backward(const Tensor& dy, int64_t L, const Pool1dArgs& args);

}  // namespace graft
