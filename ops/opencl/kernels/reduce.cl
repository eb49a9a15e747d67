// Reductions: out[r] = op over j of x[kept(r) + reduced(j)]. Lo spans the kept dims (st[0] x,
// st[1] out), Li the reduced dims (st[0] x). op: 0 sum, 1 max, 2 min.

inline T red_init(int op) { return op == 0 ? (T)0 : op == 1 ? (T)(-INFINITY) : (T)INFINITY; }
inline T red_step(int op, T acc, T v) {
  return op == 0 ? acc + v : op == 1 ? (acc < v ? v : acc) : (v < acc ? v : acc);
}

// One work-group of WG items per output: strided partial results, then a tree in local memory.
__kernel void reduce_wg(Layout Lo, Layout Li, long R, int op, __global const T* x, long x0,
                        __global T* out, long out0) {
  const long r = get_group_id(0);
  const int l = get_local_id(0);
  __local T buf[WG];
  long o[4];
  offs(&Lo, r, o);
  const long base = x0 + o[0], obase = out0 + o[1];
  T acc = red_init(op);
  for (long j = l; j < R; j += WG) {
    long q[4];
    offs(&Li, j, q);
    acc = red_step(op, acc, x[base + q[0]]);
  }
  buf[l] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (l < s) buf[l] = red_step(op, buf[l], buf[l + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) out[obase] = buf[0];
}

// One work item per output, for short reductions.
__kernel void reduce_seq(Layout Lo, Layout Li, long n_out, long R, int op, __global const T* x,
                         long x0, __global T* out, long out0) {
  const long r = get_global_id(0);
  if (r >= n_out) return;
  long o[4];
  offs(&Lo, r, o);
  T acc = red_init(op);
  for (long j = 0; j < R; ++j) {
    long q[4];
    offs(&Li, j, q);
    acc = red_step(op, acc, x[x0 + o[0] + q[0]]);
  }
  out[out0 + o[1]] = acc;
}

// Running sum along one dim: one work item per line. L spans the other dims (st[0] x, st[1]
// out); sx, so are the dim's strides; rev sums from the end (the backward of cumsum).
__kernel void cumsum_k(Layout L, long lines, long N, long sx, long so, int rev,
                       __global const T* x, long x0, __global T* out, long out0) {
  const long r = get_global_id(0);
  if (r >= lines) return;
  long o[4];
  offs(&L, r, o);
  T acc = (T)0;
  for (long k = 0; k < N; ++k) {
    const long j = rev ? N - 1 - k : k;
    acc += x[x0 + o[0] + j * sx];
    out[out0 + o[1] + j * so] = acc;
  }
}
