// OpenCL kernels of the 1-D convolution, pooling and fused attention Backend entries
// (host code in backend_nn.cpp, device code in kernels/conv.cl and kernels/attention.cl).
// Signatures and semantics are those of the matching fields of graft::Backend (ops/kernels.h).
#pragma once
#include "ops/kernels.h"

namespace graft::ocl {

void conv1d(const TensorView& x, const TensorView& w, const TensorView& bias, const Conv1dArgs& a,
            const TensorView& out);
void conv1d_backward_input(const TensorView& dy, const TensorView& w, const Conv1dArgs& a,
                           const TensorView& dx);
void conv1d_backward_weight(const TensorView& x, const TensorView& dy, const Conv1dArgs& a,
                            const TensorView& dw, const TensorView& dbias);
void pool1d(const TensorView& x, const Pool1dArgs& a, const TensorView& out,
            const TensorView& indices);
void pool1d_backward(const TensorView& dy, const TensorView& indices, const Pool1dArgs& a,
                     const TensorView& dx);
void attention(const TensorView& q, const TensorView& k, const TensorView& v,
               const TensorView& mask, const AttentionArgs& a, const TensorView& out,
               const TensorView& lse);
void attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& mask, const AttentionArgs& a, const TensorView& out,
                        const TensorView& lse, const TensorView& dout, const TensorView& dq,
                        const TensorView& dk, const TensorView& dv);

// A copy of `base` whose null entries run the CPU kernel on host copies of the device views
// (fallback.cpp), each printing a one-time warning naming the op.
Backend with_cpu_fallback(const Backend& base);
uint64_t fallback_calls();

}  // namespace graft::ocl
