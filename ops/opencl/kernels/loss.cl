// Cross-entropy over logits [N, V] (row strides given), targets int64 [N].
//   logp = x - lse;  loss = -(1 - ls) logp[t] - ls/V sum_v logp[v]   (0 where t == ignore)

__kernel void ce_fwd_k(long V, long ignore, T keep, T spread, __global const T* x, long x0,
                       long xs0, long xs1, __global const long* tg, long t0, long ts,
                       __global T* loss, long l0, long ls0, __global T* lp, long p0, long ps0,
                       long ps1) {
  const long n = get_group_id(0);
  const int l = get_local_id(0);
  __local T buf[WG];
  const __global T* xr = x + x0 + n * xs0;
  __global T* pr = lp + p0 + n * ps0;
  T m = (T)(-INFINITY);
  for (long v = l; v < V; v += WG) m = m < xr[v * xs1] ? xr[v * xs1] : m;
  m = wg_max(buf, m);
  T s = (T)0;
  for (long v = l; v < V; v += WG) s += exp(xr[v * xs1] - m);
  const T lse = m + log(wg_sum(buf, s));
  T sum = (T)0;
  for (long v = l; v < V; v += WG) {
    const T q = xr[v * xs1] - lse;
    pr[v * ps1] = q;
    sum += q;
  }
  sum = wg_sum(buf, sum);
  if (l == 0) {
    const long t = tg[t0 + n * ts];
    loss[l0 + n * ls0] =
        (t == ignore || t < 0 || t >= V) ? (T)0 : -keep * (xr[t * xs1] - lse) - spread * sum;
  }
}

// dlogits[n, v] = dloss[n] * (exp(logp[n, v]) - (1 - ls) [v == t] - ls/V), 0 for ignored rows
__kernel void ce_bwd_k(long N, long V, long ignore, T keep, T spread, __global const T* lp,
                       long p0, long ps0, long ps1, __global const long* tg, long t0, long ts,
                       __global const T* dl, long d0, long ds, __global T* dx, long x0, long xs0,
                       long xs1) {
  const long i = get_global_id(0);
  if (i >= N * V) return;
  const long n = i / V, v = i % V;
  const long t = tg[t0 + n * ts];
  T r = (T)0;
  if (t != ignore) {
    const T g = dl[d0 + n * ds];
    r = g * (exp(lp[p0 + n * ps0 + v * ps1]) - (v == t ? keep : (T)0) - spread);
  }
  dx[x0 + n * xs0 + v * xs1] = r;
}
