// 1-D convolution and pooling over sequences, forward and backward.
//
// graft::cpu (fast): float32 convolutions run on oneDNN convolution primitives (forward,
// backward-data, backward-weights) in plain layouts (ncw / oiw / goiw), cached per thread by
// problem geometry; float64, and any problem oneDNN only has its slow reference kernel for,
// take the scalar reference loops. Pooling: loops over rows (b, c), OpenMP over rows.
// graft::cpu::ref: plain scalar loops over any strides, accumulating in double: the definition
// the tests check the fast path against.
//
// Shapes: x [B, C_in, L], w [C_out, C_in/G, K], bias [C_out], out/dy [B, C_out, L_out];
// G = groups; output channel o belongs to group g = o / (C_out/G), which reads input channels
// [g C_in/G, (g+1) C_in/G). Tap k of output t reads x at l = t stride - pad_l + k dilation.
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/dnnl_cache.h"
#include "ops/error.h"

namespace GRAFT_CPU_NAMESPACE {
namespace {

// The sizes of one convolution, read from the views.
struct Geo {
  int64_t B, Cin, L, Cout, K, Lout, G, cin_g, cout_g;
};
Geo geo(const TensorView& x_or_dx, const TensorView& w, const TensorView& out_or_dy,
        const Conv1dArgs& a) {
  GRAFT_ASSERT(x_or_dx.rank() == 3 && w.rank() == 3 && out_or_dy.rank() == 3);
  Geo g{};
  g.B = x_or_dx.shape[0], g.Cin = x_or_dx.shape[1], g.L = x_or_dx.shape[2];
  g.Cout = w.shape[0], g.K = w.shape[2], g.Lout = out_or_dy.shape[2];
  g.G = a.groups, g.cin_g = g.Cin / a.groups, g.cout_g = g.Cout / a.groups;
  GRAFT_ASSERT(g.cin_g == w.shape[1] && out_or_dy.shape[1] == g.Cout &&
               out_or_dy.shape[0] == g.B);
  return g;
}

template <class T> T at3(const TensorView& v, int64_t i, int64_t j, int64_t k) {
  return v.ptr<T>()[i * v.strides[0] + j * v.strides[1] + k * v.strides[2]];
}

}  // namespace

// ================================================================ reference kernels
namespace ref {

void conv1d(const TensorView& x, const TensorView& w, const TensorView& bias, const Conv1dArgs& a,
            const TensorView& out) {
  const Geo g = geo(x, w, out, a);
  GRAFT_DISPATCH_FLOAT(out.dtype, "conv1d", T, [&] {
    T* y = out.ptr<T>();
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t o = 0; o < g.Cout; ++o) {
        const int64_t c0 = (o / g.cout_g) * g.cin_g;
        for (int64_t t = 0; t < g.Lout; ++t) {
          double s = bias.data ? double(bias.ptr<T>()[o * bias.strides[0]]) : 0.0;
          for (int64_t i = 0; i < g.cin_g; ++i)
            for (int64_t k = 0; k < g.K; ++k) {
              const int64_t l = t * a.stride - a.pad_l + k * a.dilation;
              if (l < 0 || l >= g.L) continue;  // zero padding
              s += double(at3<T>(w, o, i, k)) * double(at3<T>(x, b, c0 + i, l));
            }
          y[(b * g.Cout + o) * g.Lout + t] = T(s);
        }
      }
  });
}

void conv1d_backward_input(const TensorView& dy, const TensorView& w, const Conv1dArgs& a,
                           const TensorView& dx) {
  const Geo g = geo(dx, w, dy, a);
  GRAFT_DISPATCH_FLOAT(dx.dtype, "conv1d_backward_input", T, [&] {
    T* out = dx.ptr<T>();
    for (int64_t b = 0; b < g.B; ++b)
      for (int64_t c = 0; c < g.Cin; ++c) {
        const int64_t grp = c / g.cin_g, i = c % g.cin_g;
        for (int64_t l = 0; l < g.L; ++l) {
          // dx[b, c, l] = sum over (o, k) with l = t stride - pad_l + k dil of dy[b, o, t] w[o, i, k]
          double s = 0;
          for (int64_t o = grp * g.cout_g; o < (grp + 1) * g.cout_g; ++o)
            for (int64_t k = 0; k < g.K; ++k) {
              const int64_t num = l + a.pad_l - k * a.dilation;
              if (num < 0 || num % a.stride != 0) continue;
              const int64_t t = num / a.stride;
              if (t >= g.Lout) continue;
              s += double(at3<T>(dy, b, o, t)) * double(at3<T>(w, o, i, k));
            }
          out[(b * g.Cin + c) * g.L + l] = T(s);
        }
      }
  });
}

void conv1d_backward_weight(const TensorView& x, const TensorView& dy, const Conv1dArgs& a,
                            const TensorView& dw, const TensorView& dbias) {
  const Geo g = geo(x, dw, dy, a);
  GRAFT_DISPATCH_FLOAT(dw.dtype, "conv1d_backward_weight", T, [&] {
    T* out = dw.ptr<T>();
    for (int64_t o = 0; o < g.Cout; ++o) {
      const int64_t c0 = (o / g.cout_g) * g.cin_g;
      for (int64_t i = 0; i < g.cin_g; ++i)
        for (int64_t k = 0; k < g.K; ++k) {
          double s = 0;  // dw[o, i, k] = sum_{b, t} dy[b, o, t] x[b, c0 + i, t stride - pad_l + k dil]
          for (int64_t b = 0; b < g.B; ++b)
            for (int64_t t = 0; t < g.Lout; ++t) {
              const int64_t l = t * a.stride - a.pad_l + k * a.dilation;
              if (l < 0 || l >= g.L) continue;
              s += double(at3<T>(dy, b, o, t)) * double(at3<T>(x, b, c0 + i, l));
            }
          out[(o * g.cin_g + i) * g.K + k] = T(s);
        }
      if (dbias.data) {
        double s = 0;  // dbias[o] = sum_{b, t} dy[b, o, t]
        for (int64_t b = 0; b < g.B; ++b)
          for (int64_t t = 0; t < g.Lout; ++t) s += double(at3<T>(dy, b, o, t));
        dbias.ptr<T>()[o] = T(s);
      }
    }
  });
}

void pool1d(const TensorView& x, const Pool1dArgs& a, const TensorView& out,
            const TensorView& indices) {
  const int64_t B = x.shape[0], C = x.shape[1], L = x.shape[2], Lout = out.shape[2];
  GRAFT_DISPATCH_FLOAT(out.dtype, "pool1d", T, [&] {
    T* y = out.ptr<T>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t t = 0; t < Lout; ++t) {
          const int64_t o = (b * C + c) * Lout + t;
          if (a.kind == PoolKind::max) {
            double best = -std::numeric_limits<double>::infinity();
            int64_t arg = -1;
            for (int64_t k = 0; k < a.kernel; ++k) {
              const int64_t l = t * a.stride - a.pad_l + k * a.dilation;
              if (l < 0 || l >= L) continue;
              const double v = double(at3<T>(x, b, c, l));
              if (arg < 0 || v > best || std::isnan(v)) {
                best = v, arg = l;
                if (std::isnan(v)) break;  // NaN propagates, as in PyTorch
              }
            }
            y[o] = T(best);
            indices.ptr<int64_t>()[o] = arg;
          } else {
            double s = 0;
            int64_t n = 0;
            for (int64_t k = 0; k < a.kernel; ++k) {
              const int64_t l = t * a.stride - a.pad_l + k;
              if (l < 0 || l >= L) continue;
              s += double(at3<T>(x, b, c, l));
              ++n;
            }
            y[o] = T(s / double(a.count_include_pad ? a.kernel : std::max<int64_t>(n, 1)));
          }
        }
  });
}

void pool1d_backward(const TensorView& dy, const TensorView& indices, const Pool1dArgs& a,
                     const TensorView& dx) {
  const int64_t B = dx.shape[0], C = dx.shape[1], L = dx.shape[2], Lout = dy.shape[2];
  GRAFT_DISPATCH_FLOAT(dx.dtype, "pool1d_backward", T, [&] {
    std::vector<double> acc(static_cast<size_t>(L));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t t = 0; t < Lout; ++t) {
          const double g = double(at3<T>(dy, b, c, t));
          if (a.kind == PoolKind::max) {
            const int64_t l = at3<int64_t>(indices, b, c, t);  // dx[idx] += dy
            if (l >= 0 && l < L) acc[size_t(l)] += g;
            continue;
          }
          int64_t n = 0;
          for (int64_t k = 0; k < a.kernel; ++k) {
            const int64_t l = t * a.stride - a.pad_l + k;
            n += l >= 0 && l < L;
          }
          const double share = g / double(a.count_include_pad ? a.kernel : std::max<int64_t>(n, 1));
          for (int64_t k = 0; k < a.kernel; ++k) {  // dx[l] += dy / divisor over the window
            const int64_t l = t * a.stride - a.pad_l + k;
            if (l >= 0 && l < L) acc[size_t(l)] += share;
          }
        }
        T* out = dx.ptr<T>() + (b * C + c) * L;
        for (int64_t l = 0; l < L; ++l) out[l] = T(acc[size_t(l)]);
      }
  });
}

}  // namespace ref

// ================================================================ oneDNN path (float32)
namespace {

// Problems below this many multiply-adds run on one thread (fork/join costs more).
constexpr int64_t kParallelMacs = int64_t(1) << 18;

enum class Pass : int64_t { forward, backward_input, backward_weight };

// Plain old data, zero-initialised: hashed and compared as bytes (ops/cpu/dnnl_cache.h).
struct ConvKey {
  int64_t pass, B, Cin, L, Cout, K, Lout, stride, pad_l, pad_r, dilation, groups, bias, threads;
  bool operator==(const ConvKey& o) const { return pod_equal(*this, o); }
};

struct ConvEntry {
  bool usable = false;  // false: oneDNN refused, or has only its slow reference kernel
  dnnl::primitive prim;
  // memory objects, re-pointed at the caller's buffers on every call
  dnnl::memory src, wei, bias, dst;
  std::unordered_map<int, dnnl::memory> args;
};

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

ConvEntry build(const ConvKey& k) {
  ConvEntry e;
  dnnl::memory::desc src_md({k.B, k.Cin, k.L}, dt::f32, tag::ncw);
  dnnl::memory::desc wei_md =
      k.groups == 1 ? dnnl::memory::desc({k.Cout, k.Cin, k.K}, dt::f32, tag::oiw)
                    : dnnl::memory::desc({k.groups, k.Cout / k.groups, k.Cin / k.groups, k.K},
                                         dt::f32, tag::goiw);
  dnnl::memory::desc bias_md({k.Cout}, dt::f32, tag::x);
  dnnl::memory::desc dst_md({k.B, k.Cout, k.Lout}, dt::f32, tag::ncw);
  const dnnl::memory::dims strides{k.stride}, dil{k.dilation - 1}, pl{k.pad_l}, pr{k.pad_r};
  const auto algo = dnnl::algorithm::convolution_direct;
  const auto fwd_desc =
      k.bias && k.pass == int64_t(Pass::forward)
          ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, src_md,
                                            wei_md, bias_md, dst_md, strides, dil, pl, pr)
          : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, src_md,
                                            wei_md, dst_md, strides, dil, pl, pr);
  const dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, dnnl_engine());
  const char* impl = nullptr;
  auto& eng = dnnl_engine();
  switch (Pass(k.pass)) {
    case Pass::forward: {
      impl = fwd_pd.impl_info_str();
      e.prim = dnnl::convolution_forward(fwd_pd);
      e.src = dnnl::memory(src_md, eng, nullptr);
      e.wei = dnnl::memory(wei_md, eng, nullptr);
      e.dst = dnnl::memory(dst_md, eng, nullptr);
      e.args = {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_WEIGHTS, e.wei}, {DNNL_ARG_DST, e.dst}};
      if (k.bias) {
        e.bias = dnnl::memory(bias_md, eng, nullptr);
        e.args[DNNL_ARG_BIAS] = e.bias;
      }
      break;
    }
    case Pass::backward_input: {
      const dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(algo, src_md, wei_md, dst_md, strides, dil, pl,
                                                pr),
          eng, fwd_pd);
      impl = pd.impl_info_str();
      e.prim = dnnl::convolution_backward_data(pd);
      e.src = dnnl::memory(src_md, eng, nullptr);  // diff_src
      e.wei = dnnl::memory(wei_md, eng, nullptr);
      e.dst = dnnl::memory(dst_md, eng, nullptr);  // diff_dst
      e.args = {{DNNL_ARG_DIFF_SRC, e.src}, {DNNL_ARG_WEIGHTS, e.wei}, {DNNL_ARG_DIFF_DST, e.dst}};
      break;
    }
    case Pass::backward_weight: {
      const auto desc =
          k.bias ? dnnl::convolution_backward_weights::desc(algo, src_md, wei_md, bias_md, dst_md,
                                                            strides, dil, pl, pr)
                 : dnnl::convolution_backward_weights::desc(algo, src_md, wei_md, dst_md, strides,
                                                            dil, pl, pr);
      const dnnl::convolution_backward_weights::primitive_desc pd(desc, eng, fwd_pd);
      impl = pd.impl_info_str();
      e.prim = dnnl::convolution_backward_weights(pd);
      e.src = dnnl::memory(src_md, eng, nullptr);
      e.wei = dnnl::memory(wei_md, eng, nullptr);  // diff_weights
      e.dst = dnnl::memory(dst_md, eng, nullptr);  // diff_dst
      e.args = {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_DIFF_WEIGHTS, e.wei}, {DNNL_ARG_DIFF_DST, e.dst}};
      if (k.bias) {
        e.bias = dnnl::memory(bias_md, eng, nullptr);
        e.args[DNNL_ARG_DIFF_BIAS] = e.bias;
      }
      break;
    }
  }
  e.usable = impl && std::strncmp(impl, "ref", 3) != 0;  // oneDNN's ref kernel: ours instead
  return e;
}

ConvEntry& lookup(const ConvKey& key) {
  thread_local std::unordered_map<ConvKey, ConvEntry, PodHash<ConvKey>> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 256) cache.clear();  // many distinct shapes: start over rather than grow
  ConvEntry e;
  try {
    e = build(key);
  } catch (const dnnl::error&) {
    e.usable = false;
  }
  return cache.emplace(key, std::move(e)).first->second;
}

// A dense (row-major) float pointer for v: v's own data when contiguous, else a copy in buf.
const float* dense(const TensorView& v, std::vector<float>& buf) {
  if (v.is_contiguous()) return v.ptr<float>();
  buf.resize(size_t(v.numel()));
  const float* src = v.ptr<float>();
  float* dst = buf.data();
  for_each_offset(v.shape, v.strides, [&](int64_t i, int64_t off) { dst[i] = src[off]; });
  return dst;
}

// Runs one pass through oneDNN; false when oneDNN cannot do it well (caller falls back).
// io[0..3] = src, wei, bias, dst (in the pass's sense: diff_* where the pass writes them).
bool run_dnnl(Pass pass, const Geo& g, const Conv1dArgs& a, bool has_bias, float* src,
              float* wei, float* bias, float* dst) {
  const int64_t macs = g.B * g.Cout * g.Lout * g.cin_g * g.K;
  if (macs == 0) return false;
  ConvKey key;
  std::memset(&key, 0, sizeof key);
  key = {int64_t(pass), g.B,       g.Cin,      g.L,      g.Cout,   g.K,      g.Lout,
         a.stride,      a.pad_l,   a.pad_r,    a.dilation, a.groups, int64_t(has_bias),
         macs < kParallelMacs ? 1 : int64_t(omp_get_max_threads())};
  OmpThreadLimit limit(int(key.threads));
  ConvEntry& e = lookup(key);
  if (!e.usable) return false;
  e.src.set_data_handle(src);
  e.wei.set_data_handle(wei);
  e.dst.set_data_handle(dst);
  if (has_bias) e.bias.set_data_handle(bias);
  e.prim.execute(dnnl_stream(), e.args);
  return true;
}

// oneDNN computes L_out with the same floor formula as PyTorch, so any padding we accept is
// one it accepts; only float32 has oneDNN kernels here.
bool dnnl_ok(const TensorView& out) { return out.dtype == DType::f32; }

// ---- fast pooling: per (b, c) row, OpenMP over rows
template <class T>
void pool_rows(const TensorView& x, const Pool1dArgs& a, const TensorView& out,
               const TensorView& indices) {
  const int64_t B = x.shape[0], C = x.shape[1], L = x.shape[2], Lout = out.shape[2];
  const int64_t sb = x.strides[0], sc = x.strides[1], sl = x.strides[2];
  const T* xp = x.ptr<T>();
  T* yp = out.ptr<T>();
  int64_t* ip = a.kind == PoolKind::max ? indices.ptr<int64_t>() : nullptr;
#pragma omp parallel for schedule(static) if (B * C * Lout * a.kernel >= kParallelGrain)
  for (int64_t r = 0; r < B * C; ++r) {
    const T* row = xp + (r / C) * sb + (r % C) * sc;
    for (int64_t t = 0; t < Lout; ++t) {
      const int64_t start = t * a.stride - a.pad_l;
      if (a.kind == PoolKind::max) {
        T best = -std::numeric_limits<T>::infinity();
        int64_t arg = -1;
        for (int64_t k = 0; k < a.kernel; ++k) {
          const int64_t l = start + k * a.dilation;
          if (l < 0 || l >= L) continue;
          const T v = row[l * sl];
          if (arg < 0 || v > best || std::isnan(v)) {
            best = v, arg = l;
            if (std::isnan(v)) break;
          }
        }
        yp[r * Lout + t] = best;
        ip[r * Lout + t] = arg;
      } else {
        const int64_t lo = std::max<int64_t>(start, 0), hi = std::min(start + a.kernel, L);
        T s = 0;
        for (int64_t l = lo; l < hi; ++l) s += row[l * sl];
        const int64_t n = std::max<int64_t>(hi - lo, 1);
        yp[r * Lout + t] = s / T(a.count_include_pad ? a.kernel : n);
      }
    }
  }
}

template <class T>
void pool_rows_backward(const TensorView& dy, const TensorView& indices, const Pool1dArgs& a,
                        const TensorView& dx) {
  const int64_t B = dx.shape[0], C = dx.shape[1], L = dx.shape[2], Lout = dy.shape[2];
  const int64_t sb = dy.strides[0], sc = dy.strides[1], st = dy.strides[2];
  const T* gp = dy.ptr<T>();
  T* dp = dx.ptr<T>();
#pragma omp parallel for schedule(static) if (B * C * Lout * a.kernel >= kParallelGrain)
  for (int64_t r = 0; r < B * C; ++r) {
    const T* g = gp + (r / C) * sb + (r % C) * sc;
    T* d = dp + r * L;
    std::fill(d, d + L, T(0));
    if (a.kind == PoolKind::max) {
      const int64_t* idx = indices.ptr<int64_t>();
      const int64_t ib = indices.strides[0], ic = indices.strides[1], it = indices.strides[2];
      const int64_t* irow = idx + (r / C) * ib + (r % C) * ic;
      for (int64_t t = 0; t < Lout; ++t) {
        const int64_t l = irow[t * it];
        if (l >= 0 && l < L) d[l] += g[t * st];  // dx[idx] += dy
      }
      continue;
    }
    for (int64_t t = 0; t < Lout; ++t) {  // dx[window] += dy / divisor
      const int64_t start = t * a.stride - a.pad_l;
      const int64_t lo = std::max<int64_t>(start, 0), hi = std::min(start + a.kernel, L);
      const T share = g[t * st] / T(a.count_include_pad ? a.kernel : std::max<int64_t>(hi - lo, 1));
      for (int64_t l = lo; l < hi; ++l) d[l] += share;
    }
  }
}

}  // namespace

// ================================================================ fast kernels
void conv1d(const TensorView& x, const TensorView& w, const TensorView& bias, const Conv1dArgs& a,
            const TensorView& out) {
  if (out.numel() == 0) return;
  if (dnnl_ok(out)) {
    const Geo g = geo(x, w, out, a);
    thread_local std::vector<float> bx, bw, bb;
    float* bias_p = nullptr;
    if (bias.data) {
      TensorView bv = bias;
      bias_p = const_cast<float*>(dense(bv, bb));
    }
    if (run_dnnl(Pass::forward, g, a, bias.data != nullptr, const_cast<float*>(dense(x, bx)),
                 const_cast<float*>(dense(w, bw)), bias_p, out.ptr<float>()))
      return;
  }
  ref::conv1d(x, w, bias, a, out);
}

void conv1d_backward_input(const TensorView& dy, const TensorView& w, const Conv1dArgs& a,
                           const TensorView& dx) {
  if (dx.numel() == 0) return;
  if (dnnl_ok(dx)) {
    const Geo g = geo(dx, w, dy, a);
    if (g.B * g.Cout * g.Lout == 0 || g.K == 0) {  // nothing reaches dx
      std::fill(dx.ptr<float>(), dx.ptr<float>() + dx.numel(), 0.0f);
      return;
    }
    thread_local std::vector<float> bdy, bw;
    if (run_dnnl(Pass::backward_input, g, a, false, dx.ptr<float>(),
                 const_cast<float*>(dense(w, bw)), nullptr, const_cast<float*>(dense(dy, bdy))))
      return;
  }
  ref::conv1d_backward_input(dy, w, a, dx);
}

void conv1d_backward_weight(const TensorView& x, const TensorView& dy, const Conv1dArgs& a,
                            const TensorView& dw, const TensorView& dbias) {
  if (dnnl_ok(dw) && dw.numel() > 0) {
    const Geo g = geo(x, dw, dy, a);
    thread_local std::vector<float> bx, bdy;
    if (run_dnnl(Pass::backward_weight, g, a, dbias.data != nullptr,
                 const_cast<float*>(dense(x, bx)), dw.ptr<float>(), dbias.ptr<float>(),
                 const_cast<float*>(dense(dy, bdy))))
      return;
  }
  ref::conv1d_backward_weight(x, dy, a, dw, dbias);
}

void pool1d(const TensorView& x, const Pool1dArgs& a, const TensorView& out,
            const TensorView& indices) {
  if (out.numel() == 0) return;
  GRAFT_DISPATCH_FLOAT(out.dtype, "pool1d", T, [&] { pool_rows<T>(x, a, out, indices); });
}

void pool1d_backward(const TensorView& dy, const TensorView& indices, const Pool1dArgs& a,
                     const TensorView& dx) {
  if (dx.numel() == 0) return;
  GRAFT_DISPATCH_FLOAT(dx.dtype, "pool1d_backward", T,
                       [&] { pool_rows_backward<T>(dy, indices, a, dx); });
}

}  // namespace graft::cpu
