// TensorView: what a kernel sees of a tensor — a typed pointer with shape and strides (in
// elements). ops/ knows nothing of autograd; every kernel takes TensorViews.
#pragma once
#include <cstdint>

#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/shape.h"

namespace graft {

struct TensorView {
  void* data = nullptr;  // points at element [0, 0, ...] (storage offset already applied)
  DType dtype = DType::f32;
  Shape shape;
  Strides strides;
  Device device;

  int rank() const { return shape.size(); }
  int64_t numel() const { return shape.numel(); }
  template <class T> T* ptr() const { return static_cast<T*>(data); }
  bool is_contiguous() const {
    int64_t expect = 1;
    for (int i = rank() - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  }
  // A view with the same data but shape `s` and strides broadcast (stride 0 on new/size-1 dims).
  TensorView broadcast_to(const Shape& s) const {
    TensorView v = *this;
    v.shape = s;
    v.strides = Shape::filled(s.size(), 0);
    int off = s.size() - rank();
    for (int i = 0; i < rank(); ++i)
      v.strides[i + off] = (shape[i] == 1 && s[i + off] != 1) ? 0 : strides[i];
    return v;
  }
};

// Calls f(linear_index, offset) for every element of `shape` in row-major order, where offset
// is the element offset under `strides`. Reference kernels use it for any layout.
template <class F> inline void for_each_offset(const Shape& shape, const Strides& strides, F&& f) {
  const int r = shape.size();
  const int64_t n = shape.numel();
  if (n == 0) return;
  int64_t idx[kMaxDims] = {};
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace graft
