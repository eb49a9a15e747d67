// Mixed precision (like torch.autocast on the CPU): inside an AutocastGuard(Precision::bf16),
// float32 matmul / linear (forward and the matmuls of their backward, and the composite
// attention path's batched matmuls) round their operands to bfloat16 and multiply them with f32
// accumulation. Everything else stays float32: parameters ("master weights"), activations,
// gradients, optimizer state, and the softmax, LayerNorm and loss statistics. No tensor ever has
// a bf16 dtype, so nothing else needs a bf16 kernel.
//
//   { AutocastGuard ac(Precision::bf16); loss = model.loss(batch); }
//   loss.backward();  // each matmul's backward runs in the precision its forward ran in
//
// Autocast is decided where the op is recorded, as in PyTorch: autograd's matmul / linear ask
// autocast_for() and pass the answer to the kernel as its `prec` argument (ops/kernel_list.h).
// So a traced step (graft::compile) records the precision with each product and replays it,
// with or without oneDNN, and the plan key holds the precision (autograd/context.h).
//
// The setting is per thread (AutogradContext::autocast) and nests. It applies to CPU float32
// products of at least 2^15 multiply-adds (smaller ones stay f32: the rounding and oneDNN's call
// overhead would dominate); float64 (gradcheck) and OpenCL tensors are never affected. The fused
// attention kernel computes in float32 either way.
#pragma once
#include <cstdint>

#include "autograd/context.h"
#include "autograd/tensor.h"

namespace graft {

// The precision float32 matmuls run in on this thread now.
inline Precision autocast_precision() { return autograd_context().autocast; }
inline bool autocast_enabled() { return autocast_precision() == Precision::bf16; }

// Products smaller than this many multiply-adds stay f32 under autocast.
inline constexpr double kAutocastMinMacs = double(int64_t(1) << 15);

// The precision a product with operand `x` (its dtype and device) and `macs` multiply-adds
// computes in under the thread's autocast setting.
inline Precision autocast_for(const Tensor& x, double macs) {
  return autocast_enabled() && x.dtype() == DType::f32 && x.device().is_cpu() &&
                 macs >= kAutocastMinMacs
             ? Precision::bf16
             : Precision::f32;
}

// Sets the matmul precision for its scope; restores the whole thread context after.
class AutocastGuard : public ContextGuard {
 public:
  explicit AutocastGuard(Precision p = Precision::bf16) { autograd_context().autocast = p; }
};

}  // namespace graft
