// Random kernels: the fast (chunked, parallel) fill must equal the reference bit for bit, follow
// the Philox stream of ops/random.h element by element, and have the right moments.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/ops/kernel_test_util.h"

using namespace graft::testing;  // Buf, DType, Shape, TensorView, cpu

namespace {

using FillFn = void (*)(const graft::TensorView&, uint64_t, uint64_t);

bool same_bytes(const Buf& a, const Buf& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.v.data, b.v.data, a.numel() * graft::dtype_size(a.v.dtype)) == 0;
}

Buf draw(FillFn fn, int64_t n, DType dt, uint64_t seed, uint64_t offset) {
  Buf b(Shape{n}, dt);
  fn(b.v, seed, offset);
  return b;
}

struct Moments {
  double mean, var;
};
Moments moments(const Buf& b) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < b.numel(); ++i) s += b.at(i);
  const double mean = s / b.numel();
  for (int64_t i = 0; i < b.numel(); ++i) s2 += (b.at(i) - mean) * (b.at(i) - mean);
  return {mean, s2 / (b.numel() - 1)};
}

}  // namespace

TEST_CASE("random: fast == reference bit for bit") {
  // Sizes around the SIMD block (16), the chunk (4096) and the parallel grain.
  for (DType dt : {DType::f32, DType::f64})
    for (int64_t n : {0, 1, 15, 17, 4097, 100003})
      for (uint64_t offset : {uint64_t(0), uint64_t(5), (uint64_t(1) << 32) - 3}) {
        CAPTURE(n);
        CAPTURE(offset);
        CHECK(same_bytes(draw(cpu::uniform, n, dt, 42, offset),
                         draw(cpu::ref::uniform, n, dt, 42, offset)));
        CHECK(same_bytes(draw(cpu::normal, n, dt, 42, offset),
                         draw(cpu::ref::normal, n, dt, 42, offset)));
      }
}

TEST_CASE("random: element i is the Philox draw for offset + i") {
  const uint64_t seed = 7, offset = 1000;
  Buf u = draw(cpu::uniform, 100, DType::f64, seed, offset);
  Buf z = draw(cpu::normal, 100, DType::f64, seed, offset);
  Buf uf = draw(cpu::uniform, 100, DType::f32, seed, offset);
  for (int64_t i = 0; i < 100; ++i) {
    CHECK(u.ptr<double>()[i] == graft::philox_uniform(seed, offset + i));
    CHECK(z.ptr<double>()[i] == graft::philox_normal(seed, offset + i));
    CHECK(uf.ptr<float>()[i] == float(graft::philox_uniform(seed, offset + i)));
  }
  // A draw at a later offset continues the same stream.
  Buf tail = draw(cpu::uniform, 60, DType::f64, seed, offset + 40);
  for (int64_t i = 0; i < 60; ++i) CHECK(tail.ptr<double>()[i] == u.ptr<double>()[40 + i]);
}

TEST_CASE("random: strided output follows row-major element order") {
  // A [4, 3] view with row stride 8 inside a 32-element buffer.
  for (FillFn fast : {FillFn(cpu::uniform), FillFn(cpu::normal)}) {
    FillFn ref =
        fast == FillFn(cpu::uniform) ? FillFn(cpu::ref::uniform) : FillFn(cpu::ref::normal);
    Buf a(Shape{32}, DType::f32), b(Shape{32}, DType::f32), dense(Shape{12}, DType::f32);
    graft::TensorView va = a.v, vb = b.v;
    va.shape = vb.shape = Shape{4, 3};
    va.strides = vb.strides = graft::Strides{8, 1};
    fast(va, 3, 11);
    ref(vb, 3, 11);
    fast(dense.v, 3, 11);
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 3; ++c) {
        CHECK(a.ptr<float>()[r * 8 + c] == dense.ptr<float>()[r * 3 + c]);
        CHECK(b.ptr<float>()[r * 8 + c] == dense.ptr<float>()[r * 3 + c]);
      }
  }
}

TEST_CASE("random: uniform moments and range on 1M samples") {
  for (DType dt : {DType::f32, DType::f64}) {
    Buf u = draw(cpu::uniform, 1 << 20, dt, 1234, 0);
    double lo = 1, hi = 0;
    for (int64_t i = 0; i < u.numel(); ++i) {
      lo = std::min(lo, u.at(i));
      hi = std::max(hi, u.at(i));
    }
    CHECK(lo >= 0.0);
    CHECK(hi < 1.0);
    // Standard error of the mean: sqrt(1/12 / 2^20) ~ 2.8e-4; of the variance ~ 7e-5.
    const Moments m = moments(u);
    CHECK(std::abs(m.mean - 0.5) < 2e-3);
    CHECK(std::abs(m.var - 1.0 / 12) < 5e-4);
  }
}

TEST_CASE("random: normal moments on 1M samples") {
  for (DType dt : {DType::f32, DType::f64}) {
    Buf z = draw(cpu::normal, 1 << 20, dt, 99, 0);
    // Standard error of the mean ~ 1e-3, of the variance sqrt(2 / 2^20) ~ 1.4e-3.
    const Moments m = moments(z);
    CHECK(std::abs(m.mean) < 5e-3);
    CHECK(std::abs(m.var - 1.0) < 1e-2);
    // Tails: about 4.55% of samples beyond 2 sigma.
    int64_t beyond = 0;
    for (int64_t i = 0; i < z.numel(); ++i) beyond += std::abs(z.at(i)) > 2.0;
    CHECK(std::abs(double(beyond) / z.numel() - 0.0455) < 2e-3);
  }
}

TEST_CASE("random: seeds select streams") {
  const int64_t n = 10000;
  for (FillFn fn : {FillFn(cpu::uniform), FillFn(cpu::normal)}) {
    Buf a = draw(fn, n, DType::f64, 1, 0), a2 = draw(fn, n, DType::f64, 1, 0);
    Buf b = draw(fn, n, DType::f64, 2, 0), c = draw(fn, n, DType::f64, 1, n);
    CHECK(same_bytes(a, a2));
    int64_t same_seed = 0, same_offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      same_seed += a.at(i) == b.at(i);
      same_offset += a.at(i) == c.at(i);
    }
    CHECK(same_seed == 0);
    CHECK(same_offset == 0);
  }
}

TEST_CASE("random: integer outputs are rejected") {
  Buf b(Shape{4}, DType::i64);
  CHECK_THROWS_AS(cpu::uniform(b.v, 1, 0), graft::Error);
  CHECK_THROWS_AS(cpu::ref::normal(b.v, 1, 0), graft::Error);
}

namespace {
using MaskFn = void (*)(const graft::TensorView&, double, uint64_t, uint64_t);
Buf mask_draw(MaskFn fn, int64_t n, DType dt, double p, uint64_t seed, uint64_t offset) {
  Buf b(Shape{n}, dt);
  fn(b.v, p, seed, offset);
  return b;
}
// p = the float of a draw that rounds up to float: that element's float draw equals float(p)
// and must be kept, which a threshold taken in double (u >= p) gets wrong.
double edge_p(uint64_t seed, uint64_t offset) {
  Buf u = draw(cpu::uniform, 64, DType::f64, seed, offset);
  for (int64_t i = 0; i < 64; ++i) {
    const double d = u.ptr<double>()[i];
    if (double(float(d)) > d) return double(float(d));
  }
  return 0.5;  // (64 draws that all round down: not for this seed)
}
}  // namespace

TEST_CASE("random: dropout_mask is [uniform >= p] / (1 - p), fast == reference bit for bit") {
  const uint64_t seed = 17;
  for (DType dt : {DType::f32, DType::f64}) {
    const double p_edge = edge_p(seed, 3);
    for (double p : {0.1, 0.5, 1e-12, 0.9999999, p_edge})
      for (int64_t n : {1, 17, 4097, 100003}) {
        CAPTURE(p);
        CAPTURE(n);
        Buf fast = mask_draw(cpu::dropout_mask, n, dt, p, seed, 3);
        CHECK(same_bytes(fast, mask_draw(cpu::ref::dropout_mask, n, dt, p, seed, 3)));
        Buf u = draw(cpu::uniform, n, dt, seed, 3);
        const double scale = dt == DType::f32 ? double(float(1.0 / (1.0 - p))) : 1.0 / (1.0 - p);
        const double pt = dt == DType::f32 ? double(float(p)) : p;
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i) wrong += fast.at(i) != (u.at(i) >= pt ? scale : 0.0);
        CHECK(wrong == 0);
      }
  }
  // The edge element itself (f32): its float draw equals float(p), so it is kept, though its
  // double draw is below p.
  const double p_edge = edge_p(seed, 3);
  Buf u64 = draw(cpu::uniform, 64, DType::f64, seed, 3);
  int64_t edge = 0;
  while (edge < 64 && double(float(u64.ptr<double>()[edge])) != p_edge) ++edge;
  REQUIRE(edge < 64);
  CHECK(u64.ptr<double>()[edge] < p_edge);
  CHECK(mask_draw(cpu::dropout_mask, 64, DType::f32, p_edge, seed, 3).at(edge) > 0.0);
  CHECK(mask_draw(cpu::ref::dropout_mask, 64, DType::f32, p_edge, seed, 3).at(edge) > 0.0);
  // About 1 - p of 1M elements are kept (standard error ~3e-4).
  Buf m = mask_draw(cpu::dropout_mask, 1 << 20, DType::f32, 0.1, 5, 0);
  int64_t kept = 0;
  for (int64_t i = 0; i < m.numel(); ++i) kept += m.at(i) != 0.0;
  CHECK(std::abs(double(kept) / m.numel() - 0.9) < 2e-3);
  Buf bad(Shape{4}, DType::f32);
  CHECK_THROWS_AS(cpu::dropout_mask(bad.v, 1.0, 1, 0), graft::Error);
  CHECK_THROWS_AS(cpu::ref::dropout_mask(bad.v, -0.1, 1, 0), graft::Error);
}

TEST_CASE("random: the kernel copy this CPU runs (AVX2 / AVX-512 Philox) == reference") {
  // cpu_backend() is the best ISA copy (GRAFT_CPU_ISA picks another); offsets that cross a
  // 2^32 boundary inside a SIMD block check the carry into the counter's high word.
  const graft::Backend& be = graft::cpu_backend();
  CAPTURE(graft::cpu_isa());
  for (uint64_t offset : {uint64_t(0), (uint64_t(1) << 32) - 5, (uint64_t(7) << 32) - 100})
    for (int64_t n : {1, 16, 37, 100003}) {
      CAPTURE(offset);
      CAPTURE(n);
      for (DType dt : {DType::f32, DType::f64}) {
        CHECK(same_bytes(draw(be.uniform, n, dt, 99, offset), draw(cpu::ref::uniform, n, dt, 99, offset)));
        CHECK(same_bytes(draw(be.normal, n, dt, 99, offset), draw(cpu::ref::normal, n, dt, 99, offset)));
        CHECK(same_bytes(mask_draw(be.dropout_mask, n, dt, 0.25, 99, offset),
                         mask_draw(cpu::ref::dropout_mask, n, dt, 0.25, 99, offset)));
      }
    }
}
