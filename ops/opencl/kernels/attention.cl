// Fused scaled dot-product attention (the Backend entries of ops/cpu/attention.cpp) without the
// [B, H, T, S] score matrix. Forward: one work-item per query row (n = b H + h, i), an online
// softmax pass for the row max m and sum l, then out_i = sum_j p'_j v_j with p_j = e^(s_j - lse).
// Backward recomputes p from lse: one item per query row for dQ, one per key row for dK, dV.
//   s_ij = scale q_i.k_j + mask_ij   (-inf when causal and j > i + causal_offset)
// Dropout keeps score (n, i, j) iff philox_uniform(seed, offset + (n T + i) S + j) >= p, tested
// on the 53 random bits against thr = ceil(p 2^53): the CPU's decision, bit for bit.
// q [B,H,T,D], k [B,H,S,D], v [B,H,S,E], out/dout [B,H,T,E], lse [B,H,T]: contiguous.

// Matches AttnGeo in ops/opencl/backend_nn.cpp.
typedef struct {
  long nb, nh, nt, ns, nd, ne;  // B, H, T, S, D, E (T is the element-type macro)
  long ms[4];            // mask strides (broadcast dims 0)
  long causal, causal_offset;
  ulong seed, offset, thr;  // dropout stream and threshold (thr 0: no dropout)
} AttnGeo;

inline bool attn_keep(const AttnGeo* g, long n, long i, long j) {
  if (g->thr == 0) return true;
  const uint2 r = philox2(g->offset + (ulong)((n * g->nt + i) * g->ns + j), g->seed);
  const ulong bits = (((ulong)r.x << 21) ^ (ulong)r.y) & ((1UL << 53) - 1);
  return bits >= g->thr;
}

// The score s_ij, or -inf where the key is hidden.
inline T attn_score(const AttnGeo* g, T scale, const __global T* qi, const __global T* kj,
                    const __global T* mask, long n, long i, long j) {
  if (g->causal && j > i + g->causal_offset) return (T)(-INFINITY);
  T d = (T)0;
  for (long c = 0; c < g->nd; ++c) d += qi[c] * kj[c];
  T s = scale * d;
  if (mask) {
    const long b = n / g->nh, h = n % g->nh;
    s += mask[b * g->ms[0] + h * g->ms[1] + i * g->ms[2] + j * g->ms[3]];
  }
  return s;
}

// out_i = sum_j p'_ij v_j, lse_i = m + log l (a row with every key hidden: out 0, lse +inf)
__kernel void attn_fwd_k(AttnGeo g, T scale, T inv_keep, __global const T* q, long q0,
                         __global const T* k, long k0, __global const T* v, long v0,
                         __global const T* mask, long m0, __global T* out, long o0,
                         __global T* lse, long l0) {
  const long r = get_global_id(0);
  if (r >= g.nb * g.nh * g.nt) return;
  const long n = r / g.nt, i = r % g.nt;
  const __global T* qi = q + q0 + r * g.nd;
  const __global T* kn = k + k0 + n * g.ns * g.nd;
  const __global T* vn = v + v0 + n * g.ns * g.ne;
  const __global T* mp = mask ? mask + m0 : 0;
  __global T* oi = out + o0 + r * g.ne;
  T m = (T)(-INFINITY), l = (T)0;
  for (long j = 0; j < g.ns; ++j) {  // m' = max(m, s_j); l = l e^(m - m') + e^(s_j - m')
    const T s = attn_score(&g, scale, qi, kn + j * g.nd, mp, n, i, j);
    if (s == (T)(-INFINITY)) continue;
    const T m2 = s > m ? s : m;
    l = l * exp(m - m2) + exp(s - m2);
    m = m2;
  }
  for (long e = 0; e < g.ne; ++e) oi[e] = (T)0;
  if (m == (T)(-INFINITY)) {
    lse[l0 + r] = (T)INFINITY;
    return;
  }
  const T ls = m + log(l);
  lse[l0 + r] = ls;
  for (long j = 0; j < g.ns; ++j) {
    const T s = attn_score(&g, scale, qi, kn + j * g.nd, mp, n, i, j);
    if (s == (T)(-INFINITY) || !attn_keep(&g, n, i, j)) continue;
    const T p = exp(s - ls) * inv_keep;
    const __global T* vj = vn + j * g.ne;
    for (long e = 0; e < g.ne; ++e) oi[e] += p * vj[e];
  }
}

// dQ_i = scale sum_j dS_ij k_j with dS_ij = p_ij (dO_i.v_j keep_ij / (1 - p) - dO_i.O_i)
__kernel void attn_bwd_q_k(AttnGeo g, T scale, T inv_keep, __global const T* q, long q0,
                           __global const T* k, long k0, __global const T* v, long v0,
                           __global const T* mask, long m0, __global const T* out, long o0,
                           __global const T* lse, long l0, __global const T* dout, long g0,
                           __global T* dq, long dq0) {
  const long r = get_global_id(0);
  if (r >= g.nb * g.nh * g.nt) return;
  const long n = r / g.nt, i = r % g.nt;
  const __global T* qi = q + q0 + r * g.nd;
  const __global T* kn = k + k0 + n * g.ns * g.nd;
  const __global T* vn = v + v0 + n * g.ns * g.ne;
  const __global T* mp = mask ? mask + m0 : 0;
  const __global T* oi = out + o0 + r * g.ne;
  const __global T* gi = dout + g0 + r * g.ne;
  __global T* dqi = dq + dq0 + r * g.nd;
  for (long c = 0; c < g.nd; ++c) dqi[c] = (T)0;
  const T li = lse[l0 + r];
  if (li == (T)INFINITY) return;
  T delta = (T)0;  // dO_i . O_i
  for (long e = 0; e < g.ne; ++e) delta += gi[e] * oi[e];
  for (long j = 0; j < g.ns; ++j) {
    const T s = attn_score(&g, scale, qi, kn + j * g.nd, mp, n, i, j);
    if (s == (T)(-INFINITY)) continue;
    const T p = exp(s - li);
    const T kf = attn_keep(&g, n, i, j) ? inv_keep : (T)0;
    const __global T* vj = vn + j * g.ne;
    T dpd = (T)0;  // dP'_ij = dO_i . v_j
    for (long e = 0; e < g.ne; ++e) dpd += gi[e] * vj[e];
    const T ds = scale * p * (dpd * kf - delta);
    const __global T* kj = kn + j * g.nd;
    for (long c = 0; c < g.nd; ++c) dqi[c] += ds * kj[c];
  }
}

// dV_j = sum_i p'_ij dO_i;  dK_j = scale sum_i dS_ij q_i
__kernel void attn_bwd_kv_k(AttnGeo g, T scale, T inv_keep, __global const T* q, long q0,
                            __global const T* k, long k0, __global const T* v, long v0,
                            __global const T* mask, long m0, __global const T* out, long o0,
                            __global const T* lse, long l0, __global const T* dout, long g0,
                            __global T* dk, long dk0, __global T* dv, long dv0) {
  const long r = get_global_id(0);
  if (r >= g.nb * g.nh * g.ns) return;
  const long n = r / g.ns, j = r % g.ns;
  const __global T* kj = k + k0 + r * g.nd;
  const __global T* vj = v + v0 + r * g.ne;
  const __global T* mp = mask ? mask + m0 : 0;
  __global T* dkj = dk + dk0 + r * g.nd;
  __global T* dvj = dv + dv0 + r * g.ne;
  for (long c = 0; c < g.nd; ++c) dkj[c] = (T)0;
  for (long e = 0; e < g.ne; ++e) dvj[e] = (T)0;
  for (long i = 0; i < g.nt; ++i) {
    const long ri = n * g.nt + i;
    const T li = lse[l0 + ri];
    if (li == (T)INFINITY) continue;
    const __global T* qi = q + q0 + ri * g.nd;
    const T s = attn_score(&g, scale, qi, kj, mp, n, i, j);
    if (s == (T)(-INFINITY)) continue;
    const T p = exp(s - li);
    const T kf = attn_keep(&g, n, i, j) ? inv_keep : (T)0;
    const __global T* oi = out + o0 + ri * g.ne;
    const __global T* gi = dout + g0 + ri * g.ne;
    T delta = (T)0, dpd = (T)0;
    for (long e = 0; e < g.ne; ++e) {
      delta += gi[e] * oi[e];
      dpd += gi[e] * vj[e];
    }
    const T ds = scale * p * (dpd * kf - delta);
    for (long e = 0; e < g.ne; ++e) dvj[e] += p * kf * gi[e];
    for (long c = 0; c < g.nd; ++c) dkj[c] += ds * qi[c];
  }
}
