// 1-D convolution and pooling (the Backend entries of ops/cpu/conv.cpp), one work-item per
// output element. x [B, C_in, L], w [C_out, C_in/G, K], out/dy [B, C_out, L_out]; inputs any
// strides, outputs contiguous. Tap k of output t reads x at l = t stride - pad_l + k dil.

// The geometry of one convolution or pooling call (matches ConvGeo in ops/opencl/backend_nn.cpp).
typedef struct {
  long B, Cin, L, Cout, K, Lout, stride, pad_l, dil, cin_g, cout_g;
  long kind, count_include_pad;  // pooling: 0 max, 1 avg; avg divisor
  long xs[3], ws[3], ds[3];      // strides of x (or dx), w (or pooling indices), dy
} ConvGeo;

#define AT3(p, s, i, j, k) (p)[(i) * (s)[0] + (j) * (s)[1] + (k) * (s)[2]]

// out[b, o, t] = bias[o] + sum_{i, k} w[o, i, k] x[b, g C_in/G + i, t stride - pad_l + k dil]
__kernel void conv1d_k(ConvGeo g, __global const T* x, long x0, __global const T* w, long w0,
                       __global const T* bias, long b0, long bs, __global T* out, long o0) {
  const long id = get_global_id(0);
  if (id >= g.B * g.Cout * g.Lout) return;
  const long t = id % g.Lout, o = (id / g.Lout) % g.Cout, b = id / (g.Lout * g.Cout);
  const long c0 = (o / g.cout_g) * g.cin_g;
  const __global T* xp = x + x0;
  const __global T* wp = w + w0;
  T s = bias ? bias[b0 + o * bs] : (T)0;
  for (long i = 0; i < g.cin_g; ++i)
    for (long k = 0; k < g.K; ++k) {
      const long l = t * g.stride - g.pad_l + k * g.dil;
      if (l >= 0 && l < g.L) s += AT3(wp, g.ws, o, i, k) * AT3(xp, g.xs, b, c0 + i, l);
    }
  out[o0 + id] = s;
}

// dx[b, c, l] = sum over (o, k) with l = t stride - pad_l + k dil of dy[b, o, t] w[o, i, k]
__kernel void conv1d_bwd_input_k(ConvGeo g, __global const T* dy, long dy0, __global const T* w,
                                 long w0, __global T* dx, long dx0) {
  const long id = get_global_id(0);
  if (id >= g.B * g.Cin * g.L) return;
  const long l = id % g.L, c = (id / g.L) % g.Cin, b = id / (g.L * g.Cin);
  const long grp = c / g.cin_g, i = c % g.cin_g;
  const __global T* gp = dy + dy0;
  const __global T* wp = w + w0;
  T s = (T)0;
  for (long o = grp * g.cout_g; o < (grp + 1) * g.cout_g; ++o)
    for (long k = 0; k < g.K; ++k) {
      const long num = l + g.pad_l - k * g.dil;
      if (num < 0 || num % g.stride != 0) continue;
      const long t = num / g.stride;
      if (t < g.Lout) s += AT3(gp, g.ds, b, o, t) * AT3(wp, g.ws, o, i, k);
    }
  dx[dx0 + id] = s;
}

// dw[o, i, k] = sum_{b, t} dy[b, o, t] x[b, c0 + i, t stride - pad_l + k dil]
__kernel void conv1d_bwd_weight_k(ConvGeo g, __global const T* x, long x0, __global const T* dy,
                                  long dy0, __global T* dw, long dw0) {
  const long id = get_global_id(0);
  if (id >= g.Cout * g.cin_g * g.K) return;
  const long k = id % g.K, i = (id / g.K) % g.cin_g, o = id / (g.K * g.cin_g);
  const long c0 = (o / g.cout_g) * g.cin_g;
  const __global T* xp = x + x0;
  const __global T* gp = dy + dy0;
  T s = (T)0;
  for (long b = 0; b < g.B; ++b)
    for (long t = 0; t < g.Lout; ++t) {
      const long l = t * g.stride - g.pad_l + k * g.dil;
      if (l >= 0 && l < g.L) s += AT3(gp, g.ds, b, o, t) * AT3(xp, g.xs, b, c0 + i, l);
    }
  dw[dw0 + id] = s;
}

// dbias[o] = sum_{b, t} dy[b, o, t]
__kernel void conv1d_bwd_bias_k(ConvGeo g, __global const T* dy, long dy0, __global T* db,
                                long db0) {
  const long o = get_global_id(0);
  if (o >= g.Cout) return;
  const __global T* gp = dy + dy0;
  T s = (T)0;
  for (long b = 0; b < g.B; ++b)
    for (long t = 0; t < g.Lout; ++t) s += AT3(gp, g.ds, b, o, t);
  db[db0 + o] = s;
}

// out[b, c, t] = max (first on ties, NaN propagates) or mean of the window; indices get the
// position of each maximum. Here Cout == Cin == C, K = the window, dil = the max-pool dilation.
__kernel void pool1d_k(ConvGeo g, __global const T* x, long x0, __global T* out, long o0,
                       __global long* idx, long i0) {
  const long id = get_global_id(0);
  if (id >= g.B * g.Cin * g.Lout) return;
  const long t = id % g.Lout, c = (id / g.Lout) % g.Cin, b = id / (g.Lout * g.Cin);
  const __global T* xp = x + x0;
  if (g.kind == 0) {
    T best = (T)(-INFINITY);
    long arg = -1;
    for (long k = 0; k < g.K; ++k) {
      const long l = t * g.stride - g.pad_l + k * g.dil;
      if (l < 0 || l >= g.L) continue;
      const T v = AT3(xp, g.xs, b, c, l);
      if (arg < 0 || v > best || isnan(v)) {
        best = v;
        arg = l;
        if (isnan(v)) break;
      }
    }
    out[o0 + id] = best;
    if (idx) idx[i0 + id] = arg;
  } else {
    T s = (T)0;
    long n = 0;
    for (long k = 0; k < g.K; ++k) {
      const long l = t * g.stride - g.pad_l + k;
      if (l < 0 || l >= g.L) continue;
      s += AT3(xp, g.xs, b, c, l);
      ++n;
    }
    out[o0 + id] = s / (T)(g.count_include_pad ? g.K : max(n, 1L));
  }
}

// dx[b, c, l] (written): max: sum of dy[t] over the windows whose argmax is l; avg: sum over
// the windows covering l of dy[t] / divisor. avg visits only the windows that can cover l; max
// reads every index (any index tensor is accepted, as on the CPU).
__kernel void pool1d_bwd_k(ConvGeo g, __global const T* dy, long dy0, __global const long* idx,
                           long i0, __global T* dx, long dx0) {
  const long id = get_global_id(0);
  if (id >= g.B * g.Cin * g.L) return;
  const long l = id % g.L, c = (id / g.L) % g.Cin, b = id / (g.L * g.Cin);
  const long lo_num = l + g.pad_l - (g.K - 1);
  const long hi_num = l + g.pad_l;
  long t_lo = lo_num <= 0 ? 0 : (lo_num + g.stride - 1) / g.stride;
  long t_hi = hi_num < 0 ? -1 : hi_num / g.stride;
  if (t_hi > g.Lout - 1) t_hi = g.Lout - 1;
  if (g.kind == 0) t_lo = 0, t_hi = g.Lout - 1;
  const __global T* gp = dy + dy0;
  T s = (T)0;
  for (long t = t_lo; t <= t_hi; ++t) {
    if (g.kind == 0) {
      if (AT3(idx + i0, g.ws, b, c, t) == l) s += AT3(gp, g.ds, b, c, t);  // dx[idx] += dy
      continue;
    }
    const long k = l - t * g.stride + g.pad_l;
    if (k < 0 || k >= g.K) continue;
    long n = 0;
    for (long kk = 0; kk < g.K; ++kk) {
      const long ll = t * g.stride - g.pad_l + kk;
      n += ll >= 0 && ll < g.L;
    }
    s += AT3(gp, g.ds, b, c, t) / (T)(g.count_include_pad ? g.K : max(n, 1L));
  }
  dx[dx0 + id] = s;
}
