// Fused optimizer steps (contiguous, same numel); the same formulas as ops/cpu/optim.cpp.

// Adam / AdamW
__kernel void adam_k(long n, __global T* p, long p0, __global const T* g, long g0, __global T* m,
                     long m0, __global T* v, long v0, T decay, T wd, int decoupled, T omb1,
                     T omb2, T b2, T step_size, T bc2_sqrt, T eps) {
  const long i = get_global_id(0);
  if (i >= n) return;
  T pi = p[p0 + i], gi = g[g0 + i];
  if (decoupled) pi *= decay;                    // p *= 1 - lr wd
  else if (wd != (T)0) gi = fma(wd, pi, gi);     // g += wd p
  const T mi = fma(omb1, gi - m[m0 + i], m[m0 + i]);      // m = m + (1 - b1)(g - m)
  const T vi = fma(omb2, gi * gi, v[v0 + i] * b2);        // v = b2 v + (1 - b2) g^2
  const T denom = sqrt(vi) / bc2_sqrt + eps;              // sqrt(v) / sqrt(bc2) + eps
  m[m0 + i] = mi;
  v[v0 + i] = vi;
  p[p0 + i] = fma(-step_size, mi / denom, pi);            // p -= lr / bc1 * m / denom
}

// SGD with optional momentum / Nesterov
__kernel void sgd_k(long n, __global T* p, long p0, __global const T* g, long g0, __global T* b,
                    long b0, T lr, T wd, T mom, T omd, int nesterov, int first) {
  const long i = get_global_id(0);
  if (i >= n) return;
  T d = g[g0 + i];
  if (wd != (T)0) d = fma(wd, p[p0 + i], d);  // d = g + wd p
  if (mom != (T)0) {
    const T bi = first ? d : fma(omd, d, b[b0 + i] * mom);  // buf = mom buf + (1 - damp) d
    b[b0 + i] = bi;
    d = nesterov ? fma(mom, bi, d) : bi;
  }
  p[p0 + i] = fma(-lr, d, p[p0 + i]);  // p -= lr d
}

// Adagrad
__kernel void adagrad_k(long n, __global T* p, long p0, __global const T* g, long g0,
                        __global T* s, long s0, T lr, T wd, T eps) {
  const long i = get_global_id(0);
  if (i >= n) return;
  T gi = g[g0 + i];
  if (wd != (T)0) gi = fma(wd, p[p0 + i], gi);  // g = g + wd p
  const T si = fma(gi, gi, s[s0 + i]);           // sum += g^2
  s[s0 + i] = si;
  p[p0 + i] = fma(-lr, gi / (sqrt(si) + eps), p[p0 + i]);
}
