// Memory and elementwise kernels over strided layouts (Layout, common.cl): fill, copy with
// dtype conversion, compare, where; and for float programs the unary / binary kernels whose
// functions (unf_*, undf_*, binf_*) are generated from ops/functors.h.

__kernel void fill_k(Layout L, long n, __global T* d, long d0, T v) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long o[4];
  offs(&L, i, o);
  d[d0 + o[0]] = v;
}

#define COPY_FROM(S, SN)                                                                   \
  __kernel void copy_from_##SN(Layout L, long n, __global T* d, long d0, __global const S* s, \
                               long s0) {                                                   \
    const long i = get_global_id(0);                                                        \
    if (i >= n) return;                                                                     \
    long o[4];                                                                              \
    offs(&L, i, o);                                                                         \
    d[d0 + o[0]] = CVT(s[s0 + o[1]]);                                                       \
  }
COPY_FROM(float, f32)
COPY_FROM(long, i64)
COPY_FROM(uchar, b8)
#ifdef HAVE_FP64
COPY_FROM(double, f64)
#endif

// out (bool) = a <op> b
#define COMPARE_KERNEL(name, op)                                                            \
  __kernel void cmp_##name(Layout L, long n, __global const T* a, long a0, __global const T* b, \
                           long b0, __global uchar* out, long out0) {                        \
    const long i = get_global_id(0);                                                         \
    if (i >= n) return;                                                                      \
    long o[4];                                                                               \
    offs(&L, i, o);                                                                          \
    out[out0 + o[2]] = (a[a0 + o[0]] op b[b0 + o[1]]) ? 1 : 0;                               \
  }

// out = cond ? a : b
__kernel void where_k(Layout L, long n, __global const uchar* c, long c0, __global const T* a,
                      long a0, __global const T* b, long b0, __global T* out, long out0) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long o[4];
  offs(&L, i, o);
  out[out0 + o[3]] = c[c0 + o[0]] ? a[a0 + o[1]] : b[b0 + o[2]];
}

#if IS_FLOAT
// y = f(x, a) and dx = df(x, y, dy, a); operands 0..3 of L are x, y, dy, dx.
#define UNARY_KERNELS(name)                                                                  \
  __kernel void unary_##name(Layout L, long n, __global const T* x, long x0, __global T* y,   \
                             long y0, T a) {                                                  \
    const long i = get_global_id(0);                                                          \
    if (i >= n) return;                                                                       \
    long o[4];                                                                                \
    offs(&L, i, o);                                                                           \
    y[y0 + o[1]] = unf_##name(x[x0 + o[0]], a);                                               \
  }                                                                                           \
  __kernel void unary_bw_##name(Layout L, long n, __global const T* x, long x0,               \
                                __global const T* y, long y0, __global const T* dy, long dy0,  \
                                __global T* dx, long dx0, T a) {                              \
    const long i = get_global_id(0);                                                          \
    if (i >= n) return;                                                                       \
    long o[4];                                                                                \
    offs(&L, i, o);                                                                           \
    dx[dx0 + o[3]] = undf_##name(x[x0 + o[0]], y[y0 + o[1]], dy[dy0 + o[2]], a);              \
  }
// out = f(a, b); operands 0..2 are a, b, out.
#define BINARY_KERNEL(name)                                                                  \
  __kernel void binary_##name(Layout L, long n, __global const T* a, long a0,                 \
                              __global const T* b, long b0, __global T* out, long out0) {     \
    const long i = get_global_id(0);                                                          \
    if (i >= n) return;                                                                       \
    long o[4];                                                                                \
    offs(&L, i, o);                                                                           \
    out[out0 + o[2]] = binf_##name(a[a0 + o[0]], b[b0 + o[1]]);                               \
  }
#endif
