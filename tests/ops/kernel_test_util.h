// Helpers for kernel tests: owning buffers wrapped as TensorViews, random fill, comparison.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ops/cpu/cpu_kernels.h"
#include "ops/error.h"
#include "ops/random.h"

namespace graft::testing {

// The names the kernel tests use unqualified, brought in with `using namespace graft::testing`
// (cpu:: for the fast kernels, cpu::ref:: for the reference ones).
using graft::DType;
using graft::Shape;
using graft::TensorView;
namespace cpu = graft::cpu;

// A contiguous CPU buffer of `shape` and `dtype`, viewable as a TensorView.
struct Buf {
  std::shared_ptr<std::vector<std::byte>> mem;
  TensorView v;
  Buf() = default;
  Buf(const Shape& shape, DType dt) {
    mem = std::make_shared<std::vector<std::byte>>(std::max<int64_t>(shape.numel(), 1) * dtype_size(dt));
    v.data = mem->data();
    v.dtype = dt;
    v.shape = shape;
    v.strides = contiguous_strides(shape);
  }
  template <class T> T* ptr() const { return v.ptr<T>(); }
  int64_t numel() const { return v.numel(); }
  // Fills with uniform values in [lo, hi) from a fixed seed.
  Buf& rand(double lo, double hi, uint64_t seed = 1) {
    for (int64_t i = 0; i < numel(); ++i) {
      double u = lo + (hi - lo) * philox_uniform(seed, i);
      if (v.dtype == DType::f32) ptr<float>()[i] = float(u);
      else if (v.dtype == DType::f64) ptr<double>()[i] = u;
      else if (v.dtype == DType::i64) ptr<int64_t>()[i] = int64_t(std::floor(u));
      else ptr<bool>()[i] = u >= (lo + hi) / 2;
    }
    return *this;
  }
  double at(int64_t i) const {
    switch (v.dtype) {
      case DType::f32: return ptr<float>()[i];
      case DType::f64: return ptr<double>()[i];
      case DType::i64: return double(ptr<int64_t>()[i]);
      case DType::b8: return ptr<bool>()[i] ? 1.0 : 0.0;
    }
    return 0;
  }
};

// A buffer of `shape` and `dt` holding `values` (row-major), converted to the dtype.
inline Buf buf_of(const Shape& shape, DType dt, const std::vector<double>& values) {
  Buf b(shape, dt);
  REQUIRE(int64_t(values.size()) == b.numel());
  for (int64_t i = 0; i < b.numel(); ++i) {
    if (dt == DType::f32) b.ptr<float>()[i] = float(values[i]);
    else if (dt == DType::f64) b.ptr<double>()[i] = values[i];
    else if (dt == DType::i64) b.ptr<int64_t>()[i] = int64_t(values[i]);
    else b.ptr<bool>()[i] = values[i] != 0;
  }
  return b;
}

// Max |a - b| / (atol + rtol |b|) over all elements must be <= 1.
inline void check_close(const Buf& a, const Buf& b, double atol, double rtol) {
  REQUIRE(a.numel() == b.numel());
  double worst = 0;
  int64_t worst_i = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.at(i), y = b.at(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    double r = std::abs(x - y) / (atol + rtol * std::abs(y));
    if (!(r <= worst)) { worst = r; worst_i = i; }
  }
  INFO("worst element " << worst_i << ": " << (worst_i >= 0 ? a.at(worst_i) : 0) << " vs "
                        << (worst_i >= 0 ? b.at(worst_i) : 0));
  CHECK(worst <= 1.0);
}

// A kernel input: its own buffer and the view the kernel gets of it.
struct In {
  Buf buf;
  TensorView v;
};

// Logical shape `shape` with all dims reversed in memory (a transpose: the last dim has the
// largest stride).
inline In reversed_layout(const Shape& shape, DType dt) {
  Shape s = shape;
  std::reverse(s.begin(), s.end());
  In in;
  in.buf = Buf(s, dt);
  in.v = in.buf.v;
  in.v.shape = shape;
  Strides st = contiguous_strides(s);
  std::reverse(st.begin(), st.end());
  in.v.strides = st;
  return in;
}

// Runs f, which must throw graft::Error mentioning every one of `parts`.
template <class F> void check_error(F&& f, std::vector<std::string> parts) {
  bool thrown = false;
  try {
    f();
  } catch (const graft::Error& e) {
    thrown = true;
    const std::string msg = e.what();
    for (const auto& p : parts) {
      INFO("message: " << msg << " should mention " << p);
      CHECK(msg.find(p) != std::string::npos);
    }
  }
  CHECK(thrown);
}

}  // namespace graft::testing
