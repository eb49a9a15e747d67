// Mixed precision (like torch.autocast on the CPU): inside an AutocastGuard(Precision::bf16),
// float32 matmul / linear (forward and the matmuls of their backward, and the composite
// attention path's batched matmuls) round their operands to bfloat16 and run oneDNN's bf16
// primitive with f32 accumulation. Everything else stays float32: parameters ("master weights"),
// activations, gradients, optimizer state, and the softmax, LayerNorm and loss statistics. No
// tensor ever has a bf16 dtype, so nothing else needs a bf16 kernel.
//
//   { AutocastGuard ac(Precision::bf16); loss = model.loss(batch); }
//   loss.backward();  // each matmul's backward runs in the precision its forward ran in
//
// The setting is per thread and nests. It applies to CPU float32 products of at least 2^15
// multiply-adds (smaller ones stay f32: oneDNN's call overhead would dominate); float64
// (gradcheck) and OpenCL tensors are never affected. The fused attention kernel computes in
// float32 either way.
#pragma once
#include <cstdint>

#include "ops/kernels.h"

namespace graft {

enum class Precision : uint8_t { f32, bf16 };

// The precision float32 matmuls run in on this thread now.
inline Precision autocast_precision() {
  return cpu::matmul_bf16() ? Precision::bf16 : Precision::f32;
}
inline bool autocast_enabled() { return autocast_precision() == Precision::bf16; }

// Sets the matmul precision for its scope and restores the previous one.
class AutocastGuard {
 public:
  explicit AutocastGuard(Precision p = Precision::bf16) : prev_(cpu::matmul_bf16()) {
    cpu::set_matmul_bf16(p == Precision::bf16);
  }
  ~AutocastGuard() { cpu::set_matmul_bf16(prev_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace graft
