// Counter-based random fills, the Philox-4x32-10 stream of ops/random.h: element i (row-major)
// of out is draw(seed, offset + i), so results depend neither on the work-group layout nor on
// the device. With fp64 the float conversion is the CPU's, bit for bit.

inline uint2 philox2(ulong counter, ulong key) {
  uint c0 = (uint)counter, c1 = (uint)(counter >> 32), c2 = 0, c3 = 0;
  uint k0 = (uint)key, k1 = (uint)(key >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint lo0 = 0xD2511F53u * c0, hi0 = mul_hi(0xD2511F53u, c0);
    const uint lo1 = 0xCD9E8D57u * c2, hi1 = mul_hi(0xCD9E8D57u, c2);
    const uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return (uint2)(c0, c1);
}

__kernel void uniform_k(Layout L, long n, ulong seed, ulong offset, __global T* out, long o0) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long o[4];
  offs(&L, i, o);
  const uint2 r = philox2(offset + (ulong)i, seed);
  const ulong bits = (((ulong)r.x << 21) ^ (ulong)r.y) & ((1UL << 53) - 1);
#ifdef HAVE_FP64
  const double u = (double)bits * (1.0 / 9007199254740992.0);
#if T_IS_F32
  const float f = (float)u;
  out[o0 + o[0]] = f < 1.0f ? f : 0x1.fffffep-1f;
#else
  out[o0 + o[0]] = u;
#endif
#else
  const float f = (float)(bits >> 29) * (1.0f / 16777216.0f);
  out[o0 + o[0]] = f;
#endif
}

__kernel void normal_k(Layout L, long n, ulong seed, ulong offset, __global T* out, long o0) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long o[4];
  offs(&L, i, o);
  const uint2 r = philox2(offset + (ulong)i, seed);
#ifdef HAVE_FP64
  const double u1 = ((double)r.x + 1.0) * (1.0 / 4294967297.0);
  const double u2 = (double)r.y * (1.0 / 4294967296.0);
  out[o0 + o[0]] = (T)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
#else
  const float u1 = ((float)r.x + 1.0f) * (1.0f / 4294967296.0f);
  const float u2 = (float)r.y * (1.0f / 4294967296.0f);
  out[o0 + o[0]] = sqrt(-2.0f * log(u1)) * cos(6.2831853f * u2);
#endif
}
