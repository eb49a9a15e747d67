// Matrix products out[b, M, N] = a[b, M, K] @ b[b, K, N] (+ bias[N]); any strides for a and
// b (am, ak, bk, bn), out contiguous per batch (row stride N). B spans the batch dims with
// st[0] a, st[1] b, st[2] out; bias may be NULL (has_bias = 0).

// The naive kernel: one work item per output element (the benchmark's baseline).
__kernel void matmul_naive(Layout B, long M, long N, long K, __global const T* a, long a0,
                           long am, long ak, __global const T* b, long b0, long bk, long bn,
                           __global T* c, long c0, __global const T* bias, long bias0,
                           long bias_s, int has_bias) {
  const long j = get_global_id(0), i = get_global_id(1), z = get_global_id(2);
  if (i >= M || j >= N) return;
  long o[4];
  offs(&B, z, o);
  const __global T* ap = a + a0 + o[0] + i * am;
  const __global T* bp = b + b0 + o[1] + j * bn;
  T s = has_bias ? bias[bias0 + j * bias_s] : (T)0;
  for (long k = 0; k < K; ++k) s += ap[k * ak] * bp[k * bk];
  c[c0 + o[2] + i * N + j] = s;
}

// Tiled: a work-group of TW x TW items computes a TS x TS block of out (TS = TW * RB), each item
// an RB x RB register block; K advances in steps of TK through local-memory tiles of a and b.
#ifndef TW
#define TW 16
#endif
#ifndef RB
#define RB 4
#endif
#ifndef TK
#define TK 16
#endif
#define TS (TW * RB)

__kernel __attribute__((reqd_work_group_size(TW, TW, 1))) void matmul_tiled(
    Layout B, long M, long N, long K, __global const T* a, long a0, long am, long ak,
    __global const T* b, long b0, long bk, long bn, __global T* c, long c0,
    __global const T* bias, long bias0, long bias_s, int has_bias) {
  const int tx = get_local_id(0), ty = get_local_id(1);
  const long j0 = get_group_id(0) * TS, i0 = get_group_id(1) * TS;
  long o[4];
  offs(&B, get_group_id(2), o);
  const __global T* ap = a + a0 + o[0];
  const __global T* bp = b + b0 + o[1];
  __local T As[TK][TS];  // As[k][i] = a[i0 + i, k0 + k]
  __local T Bs[TK][TS];  // Bs[k][j] = b[k0 + k, j0 + j]
  T acc[RB][RB];
  for (int r = 0; r < RB; ++r)
    for (int q = 0; q < RB; ++q) acc[r][q] = (T)0;
  const int lid = ty * TW + tx;
  for (long k0 = 0; k0 < K; k0 += TK) {
    for (int e = lid; e < TS * TK; e += TW * TW) {
      const int ii = e / TK, kk = e % TK;
      const long gi = i0 + ii, gk = k0 + kk;
      As[kk][ii] = (gi < M && gk < K) ? ap[gi * am + gk * ak] : (T)0;
    }
    for (int e = lid; e < TS * TK; e += TW * TW) {
      const int kk = e / TS, jj = e % TS;
      const long gk = k0 + kk, gj = j0 + jj;
      Bs[kk][jj] = (gk < K && gj < N) ? bp[gk * bk + gj * bn] : (T)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TK; ++kk) {
      T ar[RB], br[RB];
      for (int r = 0; r < RB; ++r) ar[r] = As[kk][ty + TW * r];
      for (int q = 0; q < RB; ++q) br[q] = Bs[kk][tx + TW * q];
      for (int r = 0; r < RB; ++r)
        for (int q = 0; q < RB; ++q) acc[r][q] += ar[r] * br[q];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int r = 0; r < RB; ++r) {
    const long i = i0 + ty + TW * r;
    if (i >= M) continue;
    for (int q = 0; q < RB; ++q) {
      const long j = j0 + tx + TW * q;
      if (j >= N) continue;
      c[c0 + o[2] + i * N + j] = acc[r][q] + (has_bias ? bias[bias0 + j * bias_s] : (T)0);
    }
  }
}

// Register-blocked for CPU devices (PoCL): each item computes VR rows x 16 columns of out as
// VR vector accumulators (float16 / double16: one AVX-512 register each), streaming a[i, k]
// scalars against b's row vector b[k, j:j+16]; the CPU caches play the part of local memory.
// Needs unit column stride in b (bn == 1); the host picks matmul_tiled otherwise.
#define GRAFT_CAT_(a, b) a##b
#define GRAFT_CAT(a, b) GRAFT_CAT_(a, b)
#define VT GRAFT_CAT(T, 16)
#define VR 8
__kernel void matmul_vec(Layout B, long M, long N, long K, __global const T* a, long a0, long am,
                         long ak, __global const T* b, long b0, long bk, long bn,
                         __global T* c, long c0, __global const T* bias, long bias0,
                         long bias_s, int has_bias) {
  // dim 0 runs over row blocks: neighbouring items share b's column panel in the cache
  const long i0 = get_global_id(0) * VR, j0 = get_global_id(1) * 16;
  if (i0 >= M || j0 >= N) return;
  long o[4];
  offs(&B, get_global_id(2), o);
  const __global T* ap = a + a0 + o[0];
  const __global T* bp = b + b0 + o[1] + j0;
  const bool full = j0 + 16 <= N;
  long rows[VR];
  for (int r = 0; r < VR; ++r) rows[r] = min(i0 + r, M - 1) * am;  // clamped: no reads past M
  VT acc[VR];
  for (int r = 0; r < VR; ++r) acc[r] = (VT)(0);
  for (long k = 0; k < K; ++k) {
    VT bv;
    if (full) {
      bv = vload16(0, bp + k * bk);
    } else {
      T tmp[16];
      for (int q = 0; q < 16; ++q) tmp[q] = j0 + q < N ? bp[k * bk + q] : (T)0;
      bv = vload16(0, tmp);
    }
    const long kk = k * ak;
    for (int r = 0; r < VR; ++r) acc[r] += ap[rows[r] + kk] * bv;
  }
  for (int r = 0; r < VR; ++r) {
    const long i = i0 + r;
    if (i >= M) break;
    T out[16];
    vstore16(acc[r], 0, out);
    for (int q = 0; q < 16 && j0 + q < N; ++q)
      c[c0 + o[2] + i * N + j0 + q] = out[q] + (has_bias ? bias[bias0 + (j0 + q) * bias_s] : (T)0);
  }
}
