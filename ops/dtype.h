// Element types. float32 is the default; float64 is used by gradcheck; int64 holds indices and
// token ids; bool (one byte) holds masks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ops/error.h"

namespace graft {

enum class DType : uint8_t { f32, f64, i64, b8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i64: return 8;
    case DType::b8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i64: return "int64";
    case DType::b8: return "bool";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }

// The precision a float32 matrix product computes in: f32, or bf16 (both operands rounded to
// bfloat16, products accumulated in f32, f32 output). No tensor has a bf16 dtype: bf16 is a
// way of computing, chosen per call by autocast (autograd/autocast.h). float64 ignores it.
enum class Precision : uint8_t { f32, bf16 };

constexpr std::string_view precision_name(Precision p) {
  return p == Precision::bf16 ? "bf16" : "f32";
}

template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::i64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::b8; };
template <class T> constexpr DType dtype_of = DTypeOf<T>::value;

}  // namespace graft

template <> struct fmt::formatter<graft::DType> : fmt::formatter<std::string_view> {
  auto format(graft::DType t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(graft::dtype_name(t), ctx);
  }
};

// GRAFT_DISPATCH_FLOAT(dtype, "op", T, body): runs body with T = float or double.
#define GRAFT_DISPATCH_FLOAT(DT, OPNAME, T, ...)                                          \
  [&] {                                                                                   \
    switch (DT) {                                                                         \
      case ::graft::DType::f32: { using T = float; return __VA_ARGS__(); }                \
      case ::graft::DType::f64: { using T = double; return __VA_ARGS__(); }               \
      default:                                                                            \
        throw ::graft::Error(::fmt::format("{}: expected a floating dtype (float32 or "   \
                                           "float64), got {}", OPNAME, DT));             \
    }                                                                                     \
  }()

// GRAFT_DISPATCH_ALL(dtype, "op", T, body): float, double, int64_t or bool.
#define GRAFT_DISPATCH_ALL(DT, OPNAME, T, ...)                                  \
  [&] {                                                                         \
    switch (DT) {                                                               \
      case ::graft::DType::f32: { using T = float; return __VA_ARGS__(); }      \
      case ::graft::DType::f64: { using T = double; return __VA_ARGS__(); }     \
      case ::graft::DType::i64: { using T = int64_t; return __VA_ARGS__(); }    \
      case ::graft::DType::b8: { using T = bool; return __VA_ARGS__(); }        \
    }                                                                           \
    throw ::graft::Error(::fmt::format("{}: unknown dtype", OPNAME));           \
  }()
