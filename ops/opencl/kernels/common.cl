// Shared definitions of every graft OpenCL program. The host prepends
//   #define T <float|double|long|uchar>, IS_FLOAT, T_IS_F32, T_IS_F64, T_IS_B8
// and compiles one program per element type (ops/opencl/runtime.cpp).
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define HAVE_FP64 1
#endif
#ifdef cl_khr_int64_base_atomics
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
#endif

#define MAXD 8
// A flattened strided loop: shape and the strides (in elements) of up to 4 operands.
typedef struct {
  int rank;
  int pad;
  long shape[MAXD];
  long st[4][MAXD];
} Layout;

// Element offsets of row-major index i for the 4 operands of L.
inline void offs(const Layout* L, long i, long* o) {
  o[0] = o[1] = o[2] = o[3] = 0;
  for (int d = L->rank - 1; d >= 0; --d) {
    const long n = L->shape[d];
    const long c = i % n;
    i /= n;
    o[0] += c * L->st[0][d];
    o[1] += c * L->st[1][d];
    o[2] += c * L->st[2][d];
    o[3] += c * L->st[3][d];
  }
}

// Conversion to T, with C++'s bool semantics (x != 0) for T = uchar (bool).
#if T_IS_B8
#define CVT(x) ((T)((x) != 0))
#else
#define CVT(x) ((T)(x))
#endif

// Work-group size of the row / tree-reduction kernels (the host launches with this).
#define WG 64

#if IS_FLOAT
// Tree reductions over one work-group of WG items; every item must call them.
inline T wg_sum(__local T* buf, T v) {
  const int l = get_local_id(0);
  buf[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (l < s) buf[l] += buf[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const T r = buf[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
inline T wg_max(__local T* buf, T v) {
  const int l = get_local_id(0);
  buf[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (l < s && buf[l] < buf[l + s]) buf[l] = buf[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const T r = buf[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

// *p += v atomically (compare-and-swap on the bit pattern).
inline void atomic_add_T(volatile __global T* p, T v) {
#if T_IS_F32
  union { uint u; float f; } old, nw;
  do {
    old.f = *p;
    nw.f = old.f + v;
  } while (atomic_cmpxchg((volatile __global uint*)p, old.u, nw.u) != old.u);
#else
  union { ulong u; double f; } old, nw;
  do {
    old.f = *p;
    nw.f = old.f + v;
  } while (atom_cmpxchg((volatile __global ulong*)p, old.u, nw.u) != old.u);
#endif
}
#endif
