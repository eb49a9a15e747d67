// Matrix products: graft::cpu::matmul / linear (oneDNN for f32, an own blocked xsimd kernel for
// f64 and for layouts oneDNN handles badly) and the scalar reference kernels in graft::cpu::ref.
// With prec == Precision::bf16 (chosen by autocast in the autograd op), f32 operands are rounded
// to bf16 here: oneDNN's bf16 primitive multiplies them with f32 accumulation and an f32 output,
// or, with oneDNN off (graft::compile), the own f32 kernel multiplies the rounded copies, which
// computes the same products (a product of two bf16 values is exact in f32).
//
// Shapes: a [..., M, K] @ b [..., K, N] -> out [..., M, N]; linear: x [N, I], w [O, I] -> [N, O].
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <type_traits>
#include <unordered_map>
#include <vector>
#include "ops/context.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/dnnl_cache.h"
#include "ops/cpu/simd.h"

namespace GRAFT_CPU_NAMESPACE {
namespace {

// Below this many multiply-adds a product runs on one thread (an OpenMP fork costs more).
constexpr int64_t kParallelMacs = int64_t(1) << 18;
// Below this many, f32 also takes the own kernel: oneDNN's per-call overhead (~1.5 us) is more
// than the whole product (32^3 takes ~1.5 us in the own kernel, measured).
constexpr int64_t kTinyMacs = int64_t(1) << 15;

// ------------------------------------------------------------------------------------------
// Operand description shared by both paths: batch dims already merged as far as the strides
// allow, with stride 0 marking a broadcast batch dim.

struct BatchDim {
  int64_t n, sa, sb;  // size, stride in a, stride in b (out is contiguous)
};

struct Problem {
  int64_t M, N, K;
  int64_t am, ak, bk, bn;  // matrix strides of a [M, K] and b [K, N]
  int nb = 0;              // number of (merged) batch dims
  BatchDim batch[kMaxDims];
  int64_t batches() const {
    int64_t p = 1;
    for (int i = 0; i < nb; ++i) p *= batch[i].n;
    return p;
  }
};

// Stride of `v`'s dim that lines up with out's dim `d` (v may have lower rank: missing dims,
// and size-1 dims facing a larger out dim, are broadcast and get stride 0).
int64_t aligned_stride(const TensorView& v, const TensorView& out, int d) {
  int vd = d - (out.rank() - v.rank());
  if (vd < 0 || (v.shape[vd] == 1 && out.shape[d] != 1)) return 0;
  return v.strides[vd];
}

Problem describe(const TensorView& a, const TensorView& b, const TensorView& out) {
  const int r = out.rank();
  GRAFT_ASSERT(r >= 2 && a.rank() >= 2 && b.rank() >= 2);
  Problem p;
  p.M = out.shape[r - 2];
  p.N = out.shape[r - 1];
  p.K = a.shape[a.rank() - 1];
  GRAFT_ASSERT(a.shape[a.rank() - 2] == p.M && b.shape[b.rank() - 2] == p.K &&
               b.shape[b.rank() - 1] == p.N);
  p.am = a.strides[a.rank() - 2];
  p.ak = a.strides[a.rank() - 1];
  p.bk = b.strides[b.rank() - 2];
  p.bn = b.strides[b.rank() - 1];
  // Drop size-1 batch dims and merge neighbours whose strides nest (d, d+1 act as one dim of
  // size n_d * n_{d+1}); out is contiguous so only a's and b's strides decide.
  for (int d = 0; d < r - 2; ++d) {
    BatchDim bd{out.shape[d], aligned_stride(a, out, d), aligned_stride(b, out, d)};
    if (bd.n == 1) continue;
    if (p.nb > 0) {
      BatchDim& last = p.batch[p.nb - 1];
      if (last.sa == bd.sa * bd.n && last.sb == bd.sb * bd.n) {
        last = {last.n * bd.n, bd.sa, bd.sb};
        continue;
      }
    }
    p.batch[p.nb++] = bd;
  }
  return p;
}

// Calls f(batch_index, a_offset, b_offset) for every batch of p in row-major order.
template <class F> void for_each_batch(const Problem& p, F&& f) {
  const int64_t nbat = p.batches();
  int64_t idx[kMaxDims] = {};
  int64_t oa = 0, ob = 0;
  for (int64_t i = 0; i < nbat; ++i) {
    f(i, oa, ob);
    for (int d = p.nb - 1; d >= 0; --d) {
      if (++idx[d] < p.batch[d].n) {
        oa += p.batch[d].sa;
        ob += p.batch[d].sb;
        break;
      }
      oa -= p.batch[d].sa * (p.batch[d].n - 1);
      ob -= p.batch[d].sb * (p.batch[d].n - 1);
      idx[d] = 0;
    }
  }
}

// ------------------------------------------------------------------------------------------
// Own kernel: C[M, N] (row stride ldc) = A[M, K] @ B[K, N], any strides for A and B.
// B is packed per K-block into zero-padded column panels of NR = 2 vectors; an MR x NR tile of C
// lives in 2 * MR vector registers while k runs over the block (A elements are broadcast).

template <class T> struct Tiles {
  using V = xsimd::batch<T>;
  static constexpr int W = int(V::size);
  static constexpr int NR = 2 * W;
  static constexpr int MR = 8;    // 16 accumulators of the 32 AVX-512 registers
  static constexpr int KC = 256;  // one packed panel (KC x NR) stays in L1/L2
};

// One tile: R rows (R <= MR) x NR columns, of which `cols` are real; adds to C when `acc`.
template <class T, int R>
void tile(const T* a, int64_t am, int64_t ak, const T* bp, int64_t kc, T* c, int64_t ldc,
          int cols, bool acc) {
  using V = typename Tiles<T>::V;
  constexpr int W = Tiles<T>::W, NR = Tiles<T>::NR;
  V c0[R], c1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = V(T(0));
  for (int64_t k = 0; k < kc; ++k) {
    const V b0 = V::load_unaligned(bp + k * NR), b1 = V::load_unaligned(bp + k * NR + W);
    const T* ak_ptr = a + k * ak;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V x(ak_ptr[r * am]);
      c0[r] = xsimd::fma(x, b0, c0[r]);
      c1[r] = xsimd::fma(x, b1, c1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    T* cr = c + r * ldc;
    if (cols == NR) {
      if (acc) {
        c0[r] += V::load_unaligned(cr);
        c1[r] += V::load_unaligned(cr + W);
      }
      c0[r].store_unaligned(cr);
      c1[r].store_unaligned(cr + W);
    } else {  // ragged right edge: go through a buffer
      alignas(64) T buf[NR];
      c0[r].store_aligned(buf);
      c1[r].store_aligned(buf + W);
      for (int j = 0; j < cols; ++j) cr[j] = acc ? cr[j] + buf[j] : buf[j];
    }
  }
}

template <class T>
void tile_rows(int rows, const T* a, int64_t am, int64_t ak, const T* bp, int64_t kc, T* c,
               int64_t ldc, int cols, bool acc) {
  switch (rows) {
#define GRAFT_TILE_CASE(R) \
  case R: return tile<T, R>(a, am, ak, bp, kc, c, ldc, cols, acc);
    GRAFT_TILE_CASE(1) GRAFT_TILE_CASE(2) GRAFT_TILE_CASE(3) GRAFT_TILE_CASE(4)
    GRAFT_TILE_CASE(5) GRAFT_TILE_CASE(6) GRAFT_TILE_CASE(7) GRAFT_TILE_CASE(8)
#undef GRAFT_TILE_CASE
  }
}

template <class T> std::vector<T>& pack_buffer() {
  thread_local std::vector<T> buf;
  return buf;
}

// One matrix product (K >= 1). `parallel` spreads the tiles over the OpenMP threads.
template <class T>
void gemm(const T* A, int64_t am, int64_t ak, const T* B, int64_t bk, int64_t bn, T* C,
          int64_t ldc, int64_t M, int64_t N, int64_t K, bool parallel) {
  constexpr int MR = Tiles<T>::MR, NR = Tiles<T>::NR, KC = Tiles<T>::KC;
  const int64_t panels = (N + NR - 1) / NR, mtiles = (M + MR - 1) / MR;
  std::vector<T>& pack = pack_buffer<T>();
  pack.resize(size_t(panels) * KC * NR);
  for (int64_t k0 = 0; k0 < K; k0 += KC) {
    const int64_t kc = std::min<int64_t>(KC, K - k0);
    // pack[p][k][j] = B[k0 + k, p * NR + j], zero beyond N
    auto pack_panel = [&](int64_t p) {
      T* dst = pack.data() + p * kc * NR;
      const int64_t j0 = p * NR, nj = std::min<int64_t>(NR, N - j0);
      for (int64_t k = 0; k < kc; ++k) {
        const T* src = B + (k0 + k) * bk + j0 * bn;
        for (int64_t j = 0; j < nj; ++j) dst[k * NR + j] = src[j * bn];
        for (int64_t j = nj; j < NR; ++j) dst[k * NR + j] = T(0);
      }
    };
    // tile t of panel p: C[t*MR.., p*NR..] (+)= A[t*MR.., k0..k0+kc] @ pack[p]
    auto run_tile = [&](int64_t p, int64_t t) {
      const int64_t i0 = t * MR, j0 = p * NR;
      tile_rows<T>(int(std::min<int64_t>(MR, M - i0)), A + i0 * am + k0 * ak, am, ak,
                   pack.data() + p * kc * NR, kc, C + i0 * ldc + j0, ldc,
                   int(std::min<int64_t>(NR, N - j0)), k0 > 0);
    };
    if (parallel) {
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < panels; ++p) pack_panel(p);
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t p = 0; p < panels; ++p)
        for (int64_t t = 0; t < mtiles; ++t) run_tile(p, t);
    } else {  // no OpenMP at all: even a team of one costs a little on every call
      for (int64_t p = 0; p < panels; ++p) pack_panel(p);
      for (int64_t p = 0; p < panels; ++p)
        for (int64_t t = 0; t < mtiles; ++t) run_tile(p, t);
    }
  }
}

// All batches of p with the own kernel; out is contiguous [batches, M, N].
template <class T> void gemm_batched(const Problem& p, const T* a, const T* b, T* out) {
  const int64_t nbat = p.batches(), mn = p.M * p.N;
  if (p.K == 0) {
    std::fill(out, out + nbat * mn, T(0));
    return;
  }
  const bool big = nbat * p.M * p.N * p.K >= kParallelMacs;
  const int threads = omp_get_max_threads();
  if (big && threads > 1 && nbat >= threads && p.M * p.N * p.K < 8 * kParallelMacs) {
    // Many small products: one product per thread at a time.
    std::vector<int64_t> offs(size_t(2 * nbat));
    for_each_batch(p, [&](int64_t i, int64_t oa, int64_t ob) {
      offs[2 * i] = oa;
      offs[2 * i + 1] = ob;
    });
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < nbat; ++i)
      gemm<T>(a + offs[2 * i], p.am, p.ak, b + offs[2 * i + 1], p.bk, p.bn, out + i * mn, p.N,
              p.M, p.N, p.K, false);
    return;
  }
  // One thread: no OpenMP region at all (libgomp allocates a team of one on every region).
  const bool par_each = threads > 1 && p.M * p.N * p.K >= kParallelMacs;
  for_each_batch(p, [&](int64_t i, int64_t oa, int64_t ob) {
    gemm<T>(a + oa, p.am, p.ak, b + ob, p.bk, p.bn, out + i * mn, p.N, p.M, p.N, p.K, par_each);
  });
}

// out[..., :] += bias (out contiguous [rows, N]).
template <class T> void add_bias(T* out, const TensorView& bias, int64_t rows, int64_t N) {
  const T* bv = bias.ptr<T>();
  const int64_t bs = bias.strides[bias.rank() - 1];
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < N; ++j) out[i * N + j] += bv[j * bs];
}

// ------------------------------------------------------------------------------------------
// oneDNN path (f32). Primitives are cached per thread, keyed by the exact dims and strides of
// the three (four with bias) memory descriptors, together with memory objects whose data
// handles are re-pointed on every call, so a repeated shape costs a hash lookup + execute.

// Plain old data, fully zero-initialised, so it can be hashed and compared as bytes. The OpenMP
// thread count is part of the key: oneDNN sizes its work split and scratchpad at creation.
struct MmKey {
  int64_t nd, has_bias, threads, bf16;  // bf16: a and b are bf16 (out and bias stay f32)
  int64_t ldc;                          // row stride of out (N, or more for a column slice)
  int64_t ad[kMaxDims], as[kMaxDims], bd[kMaxDims], bs[kMaxDims], cd[kMaxDims];
  bool operator==(const MmKey& o) const { return pod_equal(*this, o); }
};

struct MmEntry {
  bool usable = false;  // false: oneDNN refused or only has its slow reference impl
  dnnl::matmul prim;
  dnnl::memory ma, mb, mbias, mc;
  std::unordered_map<int, dnnl::memory> args;
};

MmEntry& lookup(const MmKey& key) {
  thread_local std::unordered_map<MmKey, MmEntry, PodHash<MmKey>> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 256) cache.clear();  // many distinct shapes: start over rather than grow
  MmEntry& e = cache[key];
  using dt = dnnl::memory::data_type;
  const int nd = int(key.nd);
  auto dims = [nd](const int64_t* d) { return dnnl::memory::dims(d, d + nd); };
  dnnl::memory::dims cd = dims(key.cd), cs(nd, 1);
  cs[nd - 2] = key.ldc;
  for (int i = nd - 3; i >= 0; --i) cs[i] = cs[i + 1] * cd[i + 1];
  const dt in_dt = key.bf16 ? dt::bf16 : dt::f32;
  dnnl::memory::desc a_md(dims(key.ad), in_dt, dims(key.as));
  dnnl::memory::desc b_md(dims(key.bd), in_dt, dims(key.bs));
  dnnl::memory::desc c_md(cd, dt::f32, cs);
  try {
    dnnl::matmul::primitive_desc pd;
    dnnl::memory::desc bias_md;
    if (key.has_bias) {
      // bias [1, ..., 1, N], broadcast over every other dim of out
      dnnl::memory::dims bdims(nd, 1);
      bdims[nd - 1] = cd[nd - 1];
      dnnl::memory::dims bstr(nd, cd[nd - 1]);
      bstr[nd - 1] = 1;
      bias_md = dnnl::memory::desc(bdims, dt::f32, bstr);
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, bias_md, c_md),
                                        dnnl_engine());
    } else {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), dnnl_engine());
    }
    if (std::strncmp(pd.impl_info_str(), "ref", 3) == 0) return e;  // own kernel is faster
    e.prim = dnnl::matmul(pd);
    e.ma = dnnl::memory(a_md, dnnl_engine(), nullptr);
    e.mb = dnnl::memory(b_md, dnnl_engine(), nullptr);
    e.mc = dnnl::memory(c_md, dnnl_engine(), nullptr);
    e.args = {{DNNL_ARG_SRC, e.ma}, {DNNL_ARG_WEIGHTS, e.mb}, {DNNL_ARG_DST, e.mc}};
    if (key.has_bias) {
      e.mbias = dnnl::memory(bias_md, dnnl_engine(), nullptr);
      e.args[DNNL_ARG_BIAS] = e.mbias;
    }
    e.usable = true;
  } catch (const dnnl::error&) {
    e.usable = false;
  }
  return e;
}

// One oneDNN operand: dims/strides in oneDNN order, plus a base pointer.
struct DnnlOperand {
  int64_t d[kMaxDims], s[kMaxDims];
  const void* ptr;  // float, or uint16_t (bf16 bits) after to_bf16
};

// Strides of size-1 dims are meaningless but oneDNN matches layouts by them: give each the
// value a dense layout would (the extent of the dims inside it).
void tidy_unit_strides(int nd, int64_t* d, int64_t* s) {
  if (d[nd - 1] == 1) s[nd - 1] = 1;
  if (d[nd - 2] == 1) s[nd - 2] = 1;
  for (int i = nd - 3; i >= 0; --i) {
    if (d[i] != 1) continue;
    int64_t ext = 1;
    for (int j = i + 1; j < nd; ++j) ext = std::max(ext, s[j] * d[j]);
    s[i] = ext;
  }
}

// oneDNN's fast kernels want each matrix row- or column-major (one unit stride, a leading
// dimension covering the other) and no negative strides.
bool gemm_friendly(int nd, const int64_t* d, const int64_t* s) {
  for (int i = 0; i < nd; ++i)
    if (s[i] < 0) return false;
  const int64_t R = d[nd - 2], C = d[nd - 1], rs = s[nd - 2], cs = s[nd - 1];
  return (cs == 1 && rs >= C) || (rs == 1 && cs >= R);
}

// Copies an operand into a dense row-major buffer and points it there.
void materialise(int nd, DnnlOperand& op, std::vector<float>& buf) {
  Shape shape = Shape::filled(nd, 1), strides = Shape::filled(nd, 0);
  for (int i = 0; i < nd; ++i) shape[i] = op.d[i], strides[i] = op.s[i];
  buf.resize(size_t(shape.numel()));
  float* dst = buf.data();
  const float* src = static_cast<const float*>(op.ptr);
  for_each_offset(shape, strides, [&](int64_t i, int64_t off) { dst[i] = src[off]; });
  Strides dense = contiguous_strides(shape);
  for (int i = 0; i < nd; ++i) op.s[i] = dense[i];
  op.ptr = dst;
}

// bf16 = the top 16 bits of an f32, rounded to nearest even; NaN stays a (quiet) NaN.
inline uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// dst[i] = bf16(src[i * stride]) for i < n.
void bf16_row(const float* src, int64_t stride, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#ifdef __AVX512BF16__
  if (stride == 1)
    for (; i + 16 <= n; i += 16) {
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), (__m256i)h);
    }
#endif
  for (; i < n; ++i) dst[i] = bf16_bits(src[i * stride]);
}

// Rounds an operand (oneDNN dims/strides, f32) into a dense bf16 buffer and points it there. The
// buffer keeps the operand's matrix order: a column-major operand (w^T in linear) stays
// column-major, so each row of the copy is a unit-stride read.
void to_bf16(int nd, DnnlOperand& op, std::vector<uint16_t>& buf, bool parallel) {
  const int64_t R = op.d[nd - 2], C = op.d[nd - 1];
  const bool col = op.s[nd - 1] != 1 && op.s[nd - 2] == 1;
  const int64_t lines = col ? C : R, len = col ? R : C;           // copy `lines` runs of `len`
  const int64_t ls = col ? op.s[nd - 1] : op.s[nd - 2], es = col ? 1 : op.s[nd - 1];
  int64_t nbat = 1;
  for (int i = 0; i < nd - 2; ++i) nbat *= op.d[i];
  buf.resize(size_t(nbat * R * C));
  const float* src = static_cast<const float*>(op.ptr);
  uint16_t* dst = buf.data();
  // batch b's offset in src (row-major walk over the batch dims)
  auto batch_off = [&](int64_t b) {
    int64_t off = 0;
    for (int i = nd - 3; i >= 0; --i) {
      off += (b % op.d[i]) * op.s[i];
      b /= op.d[i];
    }
    return off;
  };
  const int64_t total = nbat * lines;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < total; ++t) {
    const int64_t b = t / lines, l = t % lines;
    bf16_row(src + batch_off(b) + l * ls, es, dst + t * len, len);
  }
  // dense strides in the same order: batch dims outermost, then lines, then the run
  int64_t ext = R * C;
  for (int i = nd - 3; i >= 0; --i) {
    op.s[i] = ext;
    ext *= op.d[i];
  }
  op.s[nd - 2] = col ? 1 : C;
  op.s[nd - 1] = col ? R : 1;
  op.ptr = dst;
}

// f32 product through oneDNN (inputs rounded to bf16 when `bf16`); out's rows are `ldc` apart
// (ldc = N, or more for a column slice of a 2-D out). `ready_a` / `ready_b`, when given, is that
// operand already rounded (a slice's shared operand). Returns false when oneDNN cannot do it
// well (the caller falls back to the own f32 kernel).
bool dnnl_matmul(const Problem& p, const float* a, const float* b, const TensorView* bias,
                 float* out, bool bf16, int64_t ldc, const DnnlOperand* ready_a = nullptr,
                 const DnnlOperand* ready_b = nullptr) {
  const int nd = p.nb + 2;
  MmKey key;
  std::memset(&key, 0, sizeof key);
  key.nd = nd;
  key.ldc = ldc;
  key.has_bias = bias != nullptr;
  key.bf16 = bf16;
  // Small products run on one thread: oneDNN would still fork a team, and the fork and join
  // cost more than the arithmetic (much more when the cores are shared).
  const int threads = omp_get_max_threads();
  const bool single = p.batches() * p.M * p.N * p.K < kParallelMacs;
  key.threads = single ? 1 : threads;
  DnnlOperand A, B;
  A.ptr = a;
  B.ptr = b;
  for (int i = 0; i < p.nb; ++i) {
    const BatchDim& bd = p.batch[i];
    // oneDNN broadcasts a batch dim given as size 1 (a zero stride sends it to ref:any).
    if (bd.sa == 0 && bd.sb == 0) return false;  // both broadcast: out would repeat itself
    A.d[i] = bd.sa == 0 ? 1 : bd.n;
    A.s[i] = bd.sa;
    B.d[i] = bd.sb == 0 ? 1 : bd.n;
    B.s[i] = bd.sb;
    key.cd[i] = bd.n;
  }
  A.d[nd - 2] = p.M, A.d[nd - 1] = p.K, A.s[nd - 2] = p.am, A.s[nd - 1] = p.ak;
  B.d[nd - 2] = p.K, B.d[nd - 1] = p.N, B.s[nd - 2] = p.bk, B.s[nd - 1] = p.bn;
  key.cd[nd - 2] = p.M, key.cd[nd - 1] = p.N;
  if (ready_a) A = *ready_a;
  if (ready_b) B = *ready_b;
  for (DnnlOperand* op : {&A, &B}) {
    if ((op == &A && ready_a) || (op == &B && ready_b)) continue;
    tidy_unit_strides(nd, op->d, op->s);
    if (bf16) {
      thread_local std::vector<uint16_t> bufs[2];
      to_bf16(nd, *op, bufs[op == &A ? 0 : 1], !single && threads > 1);
    } else if (!gemm_friendly(nd, op->d, op->s)) {
      thread_local std::vector<float> bufs[2];
      materialise(nd, *op, bufs[op == &A ? 0 : 1]);
    }
  }
  std::copy(A.d, A.d + nd, key.ad);
  std::copy(A.s, A.s + nd, key.as);
  std::copy(B.d, B.d + nd, key.bd);
  std::copy(B.s, B.s + nd, key.bs);
  // oneDNN reads the thread count from OpenMP when it creates and when it runs a primitive.
  OmpThreadLimit limit(int(key.threads));
  MmEntry& e = lookup(key);
  if (!e.usable) return false;
  e.ma.set_data_handle(const_cast<void*>(A.ptr));
  e.mb.set_data_handle(const_cast<void*>(B.ptr));
  e.mc.set_data_handle(out);
  if (bias) e.mbias.set_data_handle(bias->data);
  e.prim.execute(dnnl_stream(), e.args);
  return true;
}

// A bf16 product rounds each operand into a buffer as large as the operand (kept for the next
// call): for the gradient of a [B T, V] logits matrix that is B T V 2 bytes beside the f32 one.
// So a product whose a or b is larger than this many elements runs in slices of out's rows (a
// is the larger) or columns (b is), each slice rounding only its part of that operand.
constexpr int64_t kBf16SliceElems = int64_t(1) << 21;  // 4 MiB of bf16

bool dnnl_matmul_bf16_sliced(Problem p, const float* a, const float* b, const TensorView* bias,
                             float* out) {
  // [n, M, K] @ [K, N] with a's batches back to back is one [n M, K] @ [K, N] (linear's x)
  if (p.nb == 1 && p.batch[0].sb == 0 && p.batch[0].sa == p.M * p.am) {
    p.M *= p.batch[0].n;
    p.nb = 0;
  }
  const int64_t a_el = p.batches() * p.M * p.K, b_el = p.batches() * p.K * p.N;
  if (p.nb != 0 || std::max(a_el, b_el) <= kBf16SliceElems) return dnnl_matmul(p, a, b, bias, out, true, p.N);
  const bool rows = a_el >= b_el;  // slice the larger operand: a by rows, b by columns
  // the other operand is rounded once, for every slice
  thread_local std::vector<uint16_t> shared_buf;
  DnnlOperand other;
  other.ptr = rows ? b : a;
  other.d[0] = rows ? p.K : p.M, other.d[1] = rows ? p.N : p.K;
  other.s[0] = rows ? p.bk : p.am, other.s[1] = rows ? p.bn : p.ak;
  tidy_unit_strides(2, other.d, other.s);
  to_bf16(2, other, shared_buf, omp_get_max_threads() > 1);
  const int64_t len = rows ? p.M : p.N;
  const int64_t want = std::max<int64_t>(1, kBf16SliceElems / std::max<int64_t>(p.K, 1));
  const int64_t slices = (len + want - 1) / want, size = (len + slices - 1) / slices;  // <= 2 shapes
  for (int64_t s0 = 0; s0 < len; s0 += size) {
    Problem q = p;
    const int64_t n = std::min(size, len - s0);
    bool ok;
    if (rows) {
      q.M = n;
      ok = dnnl_matmul(q, a + s0 * p.am, b, bias, out + s0 * p.N, true, p.N, nullptr, &other);
    } else {
      q.N = n;
      TensorView bs;
      if (bias) bs = *bias, bs.data = bias->ptr<float>() + s0;
      ok = dnnl_matmul(q, a, b + s0 * p.bn, bias ? &bs : nullptr, out + s0, true, p.N, &other, nullptr);
    }
    if (!ok) return false;  // the caller's fallback overwrites all of out
  }
  return true;
}

// x rounded to the nearest bf16 (to nearest even), as an f32.
inline float bf16_round(float x) {
  const uint32_t u = uint32_t(bf16_bits(x)) << 16;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// The f32 view v with every element rounded to bf16: a copy of the span of elements v covers,
// in `buf`, with v's strides (a broadcast dim, stride 0, is not expanded).
TensorView rounded_to_bf16(const TensorView& v, std::vector<float>& buf) {
  int64_t lo = 0, hi = 0;  // offsets of the lowest and highest element
  for (int d = 0; d < v.rank(); ++d) {
    const int64_t e = (v.shape[d] - 1) * v.strides[d];
    (e < 0 ? lo : hi) += e;
  }
  buf.resize(size_t(hi - lo + 1));
  const float* src = v.ptr<float>() + lo;
  const int64_t n = hi - lo + 1;
#pragma omp parallel for schedule(static) if (n >= kParallelMacs)
  for (int64_t i = 0; i < n; ++i) buf[size_t(i)] = bf16_round(src[i]);
  TensorView r = v;
  r.data = buf.data() - lo;
  return r;
}

// Shared driver: out = a @ b (+ bias over the last dim), in precision `prec` for f32.
void matmul_impl(const TensorView& a, const TensorView& b, const TensorView* bias,
                 const TensorView& out, Precision prec) {
  GRAFT_ASSERT(out.is_contiguous() && a.dtype == out.dtype && b.dtype == out.dtype);
  if (out.numel() == 0) return;
  const Problem p = describe(a, b, out);
  const bool bf16 = prec == Precision::bf16 && out.dtype == DType::f32 && p.K > 0;
  // f64, tiny products, K == 0 (out = bias) and strided biases take the own kernel.
  const bool dnnl_ok = use_onednn() && out.dtype == DType::f32 && p.K > 0 &&
                       p.batches() * p.M * p.N * p.K >= kTinyMacs &&
                       (!bias || bias->strides[bias->rank() - 1] == 1);
  if (dnnl_ok && (bf16 ? dnnl_matmul_bf16_sliced(p, a.ptr<float>(), b.ptr<float>(), bias, out.ptr<float>())
                      : dnnl_matmul(p, a.ptr<float>(), b.ptr<float>(), bias, out.ptr<float>(), false, p.N)))
    return;
  if (bf16) {
    // The own kernel on bf16-rounded copies (same strides, so p still describes them).
    thread_local std::vector<float> bufs[2];
    const TensorView ra = rounded_to_bf16(a, bufs[0]), rb = rounded_to_bf16(b, bufs[1]);
    gemm_batched<float>(p, ra.ptr<float>(), rb.ptr<float>(), out.ptr<float>());
    if (bias) add_bias<float>(out.ptr<float>(), *bias, out.numel() / p.N, p.N);
    return;
  }
  GRAFT_DISPATCH_FLOAT(out.dtype, "matmul", T, [&] {
    gemm_batched<T>(p, a.ptr<T>(), b.ptr<T>(), out.ptr<T>());
    if (bias) add_bias<T>(out.ptr<T>(), *bias, out.numel() / p.N, p.N);
  });
}

// w [O, I] seen as w^T [I, O] (a strided view, no copy).
TensorView transposed(const TensorView& w) {
  TensorView t = w;
  GRAFT_ASSERT(w.rank() == 2);
  std::swap(t.shape[0], t.shape[1]);
  std::swap(t.strides[0], t.strides[1]);
  return t;
}

}  // namespace

#ifndef GRAFT_KERNEL_ISA  // one definition, in the baseline copy
void set_use_onednn(bool on) { ops_context().onednn = on; }
bool use_onednn() { return ops_context().onednn; }
#endif

void matmul(const TensorView& a, const TensorView& b, const TensorView& out, Precision prec) {
  matmul_impl(a, b, nullptr, out, prec);
}

void linear(const TensorView& x, const TensorView& w, const TensorView& bias,
            const TensorView& out, Precision prec) {
  // x [..., I] @ w^T [I, O]: w^T is broadcast over x's leading dims (stride 0 in describe).
  matmul_impl(x, transposed(w), bias.data ? &bias : nullptr, out, prec);
}

// ------------------------------------------------------------------------------------------
// Reference kernels: the definition, one dot product per output element, in double.
namespace ref {
namespace {

// Offset of v's element [batch index..., i, j] where the batch index is out's (v may be
// broadcast: size-1 or missing batch dims contribute nothing).
int64_t ref_offset(const TensorView& v, const TensorView& out, const int64_t* bidx, int64_t i,
                   int64_t j) {
  int64_t off = i * v.strides[v.rank() - 2] + j * v.strides[v.rank() - 1];
  for (int d = 0; d < out.rank() - 2; ++d) {
    int vd = d - (out.rank() - v.rank());
    if (vd >= 0 && v.shape[vd] != 1) off += bidx[d] * v.strides[vd];
  }
  return off;
}

template <class T>
void ref_matmul(const TensorView& a, const TensorView& b, const TensorView* bias,
                const TensorView& out, Precision prec) {
  // bf16: each f32 operand element rounded to bf16 before the (exact, double) product
  const bool bf16 = std::is_same_v<T, float> && prec == Precision::bf16;
  auto in = [&](T x) { return bf16 ? double(bf16_round(float(x))) : double(x); };
  const int r = out.rank();
  const int64_t M = out.shape[r - 2], N = out.shape[r - 1], K = a.shape[a.rank() - 1];
  int64_t nbat = 1;
  for (int d = 0; d < r - 2; ++d) nbat *= out.shape[d];
  int64_t bidx[kMaxDims] = {};
  for (int64_t bi = 0; bi < nbat; ++bi) {
    int64_t rem = bi;
    for (int d = r - 3; d >= 0; --d) {
      bidx[d] = rem % out.shape[d];
      rem /= out.shape[d];
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = bias ? double(bias->ptr<T>()[j * bias->strides[0]]) : 0.0;
        for (int64_t k = 0; k < K; ++k)
          s += in(a.ptr<T>()[ref_offset(a, out, bidx, i, k)]) *
               in(b.ptr<T>()[ref_offset(b, out, bidx, k, j)]);
        out.ptr<T>()[ref_offset(out, out, bidx, i, j)] = T(s);
      }
  }
}

}  // namespace

void matmul(const TensorView& a, const TensorView& b, const TensorView& out, Precision prec) {
  GRAFT_DISPATCH_FLOAT(out.dtype, "matmul", T, [&] { ref_matmul<T>(a, b, nullptr, out, prec); });
}

void linear(const TensorView& x, const TensorView& w, const TensorView& bias,
            const TensorView& out, Precision prec) {
  const TensorView wt = transposed(w);
  const TensorView* bp = bias.data ? &bias : nullptr;
  GRAFT_DISPATCH_FLOAT(out.dtype, "linear", T, [&] { ref_matmul<T>(x, wt, bp, out, prec); });
}

}  // namespace ref
}  // namespace graft::cpu
