// Random fills from the counter-based Philox stream of ops/random.h: element i of `out` is
// philox_uniform(seed, offset + i) or philox_normal(seed, offset + i), converted to out's dtype.
// Because each element depends only on its own counter, the fast kernel can cut the tensor
// into chunks in any way (threads, SIMD lanes) and still match the reference bit for bit.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/philox_lanes.h"
#include "ops/random.h"

namespace GRAFT_CPU_NAMESPACE {
namespace {

// Conversion of a draw to the output dtype. A double just below 1 rounds to 1.0f in float,
// which would break the [0, 1) contract (e.g. log(1 - u) = -inf), so float draws are clamped
// to the largest float below 1.
template <class T> inline T uniform_as(double u) {
  if constexpr (std::is_same_v<T, float>) {
    const float f = float(u);
    return f < 1.0f ? f : 0x1.fffffep-1f;
  } else {
    return u;
  }
}

// ---- fast: Philox on kLanes consecutive counters at once

// Lanes per block: one AVX-512 register of 32-bit words.
constexpr int kLanes = 16;
// Elements per OpenMP work item (a multiple of kLanes).
constexpr int64_t kChunk = 4096;

// The same formulas as philox_uniform / philox_normal, applied to precomputed words.
inline double uniform_from(uint32_t r0, uint32_t r1) {
  const uint64_t bits = (uint64_t(r0) << 21) ^ uint64_t(r1);
  return double(bits & ((uint64_t(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}
inline double normal_from(uint32_t r0, uint32_t r1) {
  const double u1 = (double(r0) + 1.0) * (1.0 / 4294967297.0);
  const double u2 = double(r1) * (1.0 / 4294967296.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// out[0..n) = draw(seed, offset + i) for a contiguous out, in parallel chunks.
template <class T, bool kNormal>
void fill_random(T* out, int64_t n, uint64_t seed, uint64_t offset) {
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * kChunk);
    uint32_t w0[kLanes], w1[kLanes];
    for (int64_t i = c * kChunk; i < end; i += kLanes) {
      philox_lanes<kLanes>(offset + uint64_t(i), seed, kLanes, w0, w1);
      const int64_t m = std::min<int64_t>(kLanes, end - i);
      for (int64_t l = 0; l < m; ++l) {
        if constexpr (kNormal) out[i + l] = T(normal_from(w0[l], w1[l]));
        else out[i + l] = uniform_as<T>(uniform_from(w0[l], w1[l]));
      }
    }
  }
}

// The smallest 53-bit draw b whose uniform u = b 2^-53, converted to T, is >= T(p): the mask
// keeps element i iff its bits are >= this. The conversion is monotone in b, so a binary search
// finds it exactly (2^53 when no draw passes, e.g. float(p) == 1).
template <class T> uint64_t keep_threshold(double p) {
  const T pt = T(p);
  uint64_t lo = 0, hi = uint64_t(1) << 53;  // the answer lies in [lo, hi]
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (uniform_as<T>(double(mid) * (1.0 / 9007199254740992.0)) >= pt) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// out[0..n) = keep ? scale : 0 for the draws of (seed, offset + i), in parallel chunks.
template <class T>
void fill_dropout_mask(T* out, int64_t n, double p, uint64_t seed, uint64_t offset) {
  const uint64_t threshold = keep_threshold<T>(p);
  const T scale = T(1.0 / (1.0 - p));
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * kChunk);
    alignas(64) uint32_t w0[kLanes], w1[kLanes];
    for (int64_t i = c * kChunk; i < end; i += kLanes) {
      philox_lanes<kLanes>(offset + uint64_t(i), seed, kLanes, w0, w1);
      const int64_t m = std::min<int64_t>(kLanes, end - i);
#pragma omp simd
      for (int64_t l = 0; l < m; ++l) {
        const uint64_t bits = ((uint64_t(w0[l]) << 21) ^ uint64_t(w1[l])) & ((uint64_t(1) << 53) - 1);
        out[i + l] = bits >= threshold ? scale : T(0);
      }
    }
  }
}

void check_out(const char* op, const TensorView& out) {
  GRAFT_CHECK(is_floating(out.dtype), "{}: expected a floating output (float32 or float64), got {}",
              op, out.dtype);
}

}  // namespace

void uniform(const TensorView& out, uint64_t seed, uint64_t offset) {
  check_out("uniform", out);
  if (!out.is_contiguous()) return ref::uniform(out, seed, offset);
  GRAFT_DISPATCH_FLOAT(out.dtype, "uniform", T,
                       [&] { fill_random<T, false>(out.ptr<T>(), out.numel(), seed, offset); });
}

void normal(const TensorView& out, uint64_t seed, uint64_t offset) {
  check_out("normal", out);
  if (!out.is_contiguous()) return ref::normal(out, seed, offset);
  GRAFT_DISPATCH_FLOAT(out.dtype, "normal", T,
                       [&] { fill_random<T, true>(out.ptr<T>(), out.numel(), seed, offset); });
}

void dropout_mask(const TensorView& out, double p, uint64_t seed, uint64_t offset) {
  check_out("dropout_mask", out);
  GRAFT_CHECK(p >= 0.0 && p < 1.0, "dropout_mask: p must be in [0, 1), got {}", p);
  if (!out.is_contiguous()) return ref::dropout_mask(out, p, seed, offset);
  GRAFT_DISPATCH_FLOAT(out.dtype, "dropout_mask", T,
                       [&] { fill_dropout_mask<T>(out.ptr<T>(), out.numel(), p, seed, offset); });
}

// ---------------------------------------------------------------------------------------------
// Reference kernels: the ops/random.h functions, one element at a time, any strides (element i
// is the i-th in row-major order).

namespace ref {

void uniform(const TensorView& out, uint64_t seed, uint64_t offset) {
  check_out("uniform", out);
  GRAFT_DISPATCH_FLOAT(out.dtype, "uniform", T, [&] {
    T* o = out.ptr<T>();
    for_each_offset(out.shape, out.strides, [&](int64_t i, int64_t off) {
      o[off] = uniform_as<T>(philox_uniform(seed, offset + uint64_t(i)));
    });
  });
}

void normal(const TensorView& out, uint64_t seed, uint64_t offset) {
  check_out("normal", out);
  GRAFT_DISPATCH_FLOAT(out.dtype, "normal", T, [&] {
    T* o = out.ptr<T>();
    for_each_offset(out.shape, out.strides, [&](int64_t i, int64_t off) {
      o[off] = T(philox_normal(seed, offset + uint64_t(i)));
    });
  });
}

// The composite's definition, element by element: [uniform draw >= p] / (1 - p) in T.
void dropout_mask(const TensorView& out, double p, uint64_t seed, uint64_t offset) {
  check_out("dropout_mask", out);
  GRAFT_CHECK(p >= 0.0 && p < 1.0, "dropout_mask: p must be in [0, 1), got {}", p);
  GRAFT_DISPATCH_FLOAT(out.dtype, "dropout_mask", T, [&] {
    T* o = out.ptr<T>();
    const T scale = T(1.0 / (1.0 - p));
    for_each_offset(out.shape, out.strides, [&](int64_t i, int64_t off) {
      o[off] = uniform_as<T>(philox_uniform(seed, offset + uint64_t(i))) >= T(p) ? scale : T(0);
    });
  });
}

}  // namespace ref
}  // namespace graft::cpu
