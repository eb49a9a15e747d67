// Argument checks that the CPU and the OpenCL kernels share, so that every back-end refuses the
// same inputs with the same message.
#pragma once
#include "ops/error.h"
#include "ops/kernels.h"

namespace graft {

// compare: both operands have one dtype.
inline void check_compare(CompareOp op, const TensorView& a, const TensorView& b) {
  GRAFT_CHECK(a.dtype == b.dtype, "{}: operands must have the same dtype, got {} and {}",
              compare_name(op), a.dtype, b.dtype);
}

// where: a bool condition and branches of the output's dtype.
inline void check_where(const TensorView& cond, const TensorView& a, const TensorView& b,
                        const TensorView& out) {
  GRAFT_CHECK(cond.dtype == DType::b8, "where: condition must be bool, got {}", cond.dtype);
  GRAFT_CHECK(a.dtype == out.dtype && b.dtype == out.dtype,
              "where: both branches must have dtype {}, got {} and {}", out.dtype, a.dtype,
              b.dtype);
}

}  // namespace graft
