// Shape and strides: a small fixed-capacity vector of int64 (no heap allocation per tensor).
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "ops/error.h"

namespace graft {

inline constexpr int kMaxDims = 8;
// The most elements one tensor may have: 2^59, so that its size in bytes (at most 8 per
// element) and every offset into it fit in int64 with room to spare.
inline constexpr int64_t kMaxNumel = int64_t(1) << 59;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(std::span<const int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.begin(), dims.end()); }
  static Shape filled(int n, int64_t v) {
    Shape s;
    s.resize(n);
    for (int i = 0; i < n; ++i) s.d_[i] = v;
    return s;
  }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t& operator[](int i) { return d_[i]; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t* begin() { return d_; }
  int64_t* end() { return d_ + n_; }
  const int64_t* begin() const { return d_; }
  const int64_t* end() const { return d_ + n_; }
  const int64_t* data() const { return d_; }
  int64_t back() const { return d_[n_ - 1]; }
  void resize(int n) {
    GRAFT_CHECK(n >= 0 && n <= kMaxDims, "tensor rank {} exceeds graft's limit of {} dims", n,
                kMaxDims);
    for (int i = n_; i < n; ++i) d_[i] = 0;
    n_ = n;
  }
  void push_back(int64_t v) {
    resize(n_ + 1);
    d_[n_ - 1] = v;
  }
  void insert(int pos, int64_t v) {
    resize(n_ + 1);
    for (int i = n_ - 1; i > pos; --i) d_[i] = d_[i - 1];
    d_[pos] = v;
  }
  void erase(int pos) {
    for (int i = pos; i + 1 < n_; ++i) d_[i] = d_[i + 1];
    --n_;
  }
  std::vector<int64_t> vec() const { return {d_, d_ + n_}; }
  bool operator==(const Shape& o) const {
    return n_ == o.n_ && std::equal(d_, d_ + n_, o.d_);
  }
  // Number of elements (product of dims; 1 for a scalar). graft::Error naming the shape for a
  // negative dim, or when the dims multiply past kMaxNumel (a zero dim does not excuse the
  // others: their product still bounds the strides). Every element count of a tensor comes
  // from here, so a shape that passes can be sized in bytes without overflow.
  int64_t numel() const {
    int64_t p = 1;
    bool zero = false;
    for (int i = 0; i < n_; ++i) {
      const int64_t d = d_[i];
      if (d <= 0) {
        if (d < 0) fail_numel("has a negative dimension");
        zero = true;
      } else if (__builtin_mul_overflow(p, d, &p) || p > kMaxNumel) {
        fail_numel("has more elements than graft allows (2^59)");
      }
    }
    return zero ? 0 : p;
  }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < n_; ++i) s += (i ? ", " : "") + std::to_string(d_[i]);
    return s + "]";
  }

 private:
  [[noreturn]] void fail_numel(const char* why) const {
    throw Error(fmt::format("shape {} {}; hint: sizes must be >= 0 and their product at most "
                            "{}", str(), why, kMaxNumel));
  }
  template <class It> void assign(It b, It e) {
    resize(static_cast<int>(e - b));
    std::copy(b, e, d_);
  }
  int64_t d_[kMaxDims] = {};
  int n_ = 0;
};

using Strides = Shape;

// Row-major (C-contiguous) strides, in elements.
inline Strides contiguous_strides(const Shape& s) {
  Strides st = Shape::filled(s.size(), 1);
  for (int i = s.size() - 2; i >= 0; --i) st[i] = st[i + 1] * std::max<int64_t>(s[i + 1], 1);
  return st;
}

// Wraps a possibly negative dim into [0, rank); throws graft::Error naming the op otherwise.
inline int wrap_dim(int64_t dim, int rank, const char* op) {
  int64_t r = std::max(rank, 1);
  GRAFT_CHECK(dim >= -r && dim < r, "{}: dim {} out of range for a tensor of rank {} (valid: {}..{})",
              op, dim, rank, -r, r - 1);
  return static_cast<int>(dim < 0 ? dim + r : dim);
}

// NumPy broadcasting of two shapes; throws graft::Error naming the op on mismatch.
inline Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  int n = std::max(a.size(), b.size());
  Shape out = Shape::filled(n, 1);
  for (int i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    GRAFT_CHECK(da == db || da == 1 || db == 1,
                "{}: shapes {} and {} cannot be broadcast (dim {}: {} vs {}); hint: sizes must "
                "match or be 1",
                op, a.str(), b.str(), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace graft

template <> struct fmt::formatter<graft::Shape> : fmt::formatter<std::string> {
  auto format(const graft::Shape& s, format_context& ctx) const {
    return fmt::formatter<std::string>::format(s.str(), ctx);
  }
};
