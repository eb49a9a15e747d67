// Row kernels over the last dim, one work-group of WG items per row (x contiguous [N, C]).

// y = softmax(x) or log_softmax(x); the row max is subtracted first.
__kernel void softmax_k(long C, int lg, __global const T* x, long x0, __global T* y, long y0) {
  const long row = get_group_id(0);
  const int l = get_local_id(0);
  __local T buf[WG];
  const __global T* xr = x + x0 + row * C;
  __global T* yr = y + y0 + row * C;
  T m = (T)(-INFINITY);
  for (long j = l; j < C; j += WG) m = m < xr[j] ? xr[j] : m;
  m = wg_max(buf, m);
  T s = (T)0;
  for (long j = l; j < C; j += WG) s += exp(xr[j] - m);
  s = wg_sum(buf, s);
  const T lse = m + log(s), inv = (T)1 / s;
  for (long j = l; j < C; j += WG) yr[j] = lg ? xr[j] - lse : exp(xr[j] - m) * inv;
}

// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy)
__kernel void softmax_bw_k(long C, int lg, __global const T* y, long y0, __global const T* dy,
                           long dy0, __global T* dx, long dx0) {
  const long row = get_group_id(0);
  const int l = get_local_id(0);
  __local T buf[WG];
  const __global T* yr = y + y0 + row * C;
  const __global T* gr = dy + dy0 + row * C;
  __global T* dr = dx + dx0 + row * C;
  T s = (T)0;
  for (long j = l; j < C; j += WG) s += lg ? gr[j] : gr[j] * yr[j];
  s = wg_sum(buf, s);
  for (long j = l; j < C; j += WG) dr[j] = lg ? gr[j] - exp(yr[j]) * s : yr[j] * (gr[j] - s);
}

// y = (x - mean) * rstd * gamma + beta (two-pass variance); mean, rstd [N] saved.
__kernel void layer_norm_k(long C, T eps, __global const T* x, long x0, __global const T* g,
                           long g0, __global const T* b, long b0, __global T* y, long y0,
                           __global T* mean, long m0, __global T* rstd, long r0) {
  const long row = get_group_id(0);
  const int l = get_local_id(0);
  __local T buf[WG];
  const __global T* xr = x + x0 + row * C;
  __global T* yr = y + y0 + row * C;
  T s = (T)0;
  for (long j = l; j < C; j += WG) s += xr[j];
  const T mu = wg_sum(buf, s) / (T)C;
  T v = (T)0;
  for (long j = l; j < C; j += WG) v += (xr[j] - mu) * (xr[j] - mu);
  const T rs = (T)1 / sqrt(wg_sum(buf, v) / (T)C + eps);
  if (l == 0) {
    mean[m0 + row] = mu;
    rstd[r0 + row] = rs;
  }
  for (long j = l; j < C; j += WG) {
    T h = (xr[j] - mu) * rs;
    if (g) h *= g[g0 + j];
    if (b) h += b[b0 + j];
    yr[j] = h;
  }
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * gamma
__kernel void layer_norm_bw_k(long C, __global const T* x, long x0, __global const T* g, long g0,
                              __global const T* mean, long m0, __global const T* rstd, long r0,
                              __global const T* dy, long dy0, __global T* dx, long dx0) {
  const long row = get_group_id(0);
  const int l = get_local_id(0);
  __local T buf[WG];
  const __global T* xr = x + x0 + row * C;
  const __global T* gr = dy + dy0 + row * C;
  __global T* dr = dx + dx0 + row * C;
  const T mu = mean[m0 + row], rs = rstd[r0 + row];
  T s1 = (T)0, s2 = (T)0;
  for (long j = l; j < C; j += WG) {
    const T dh = g ? gr[j] * g[g0 + j] : gr[j];
    s1 += dh;
    s2 += dh * (xr[j] - mu) * rs;
  }
  const T m1 = wg_sum(buf, s1) / (T)C;
  const T m2 = wg_sum(buf, s2) / (T)C;
  for (long j = l; j < C; j += WG) {
    const T dh = g ? gr[j] * g[g0 + j] : gr[j];
    dr[j] = rs * (dh - m1 - (xr[j] - mu) * rs * m2);
  }
}

// dgamma[j] = sum_n dy[n, j] * xhat[n, j], dbeta[j] = sum_n dy[n, j]: one item per column.
__kernel void layer_norm_params_k(long N, long C, __global const T* x, long x0,
                                  __global const T* mean, long m0, __global const T* rstd,
                                  long r0, __global const T* dy, long dy0, __global T* dg,
                                  long dg0, __global T* db, long db0) {
  const long j = get_global_id(0);
  if (j >= C) return;
  T sg = (T)0, sb = (T)0;
  for (long n = 0; n < N; ++n) {
    const T d = dy[dy0 + n * C + j];
    sg += d * (x[x0 + n * C + j] - mean[m0 + n]) * rstd[r0 + n];
    sb += d;
  }
  if (dg) dg[dg0 + j] = sg;
  if (db) db[db0 + j] = sb;
}
