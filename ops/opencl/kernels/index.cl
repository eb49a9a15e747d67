// Indexing kernels (index int64). Layout operand roles are given per kernel; `dim` is never
// merged away (the host builds these layouts without coalescing). Indices were validated by
// the caller; an out-of-range one is skipped here (a last guard against bad memory access).

// index_select / index_add: element i of L has offset *walked under st[0] and *selected under
// st[1] with its coordinate along dim replaced by idx[i0 + c * is]. False when that index is
// outside [0, size) (then taken as 0).
inline bool walk_selected(const Layout* L, long i, int dim, long size, __global const long* idx,
                          long i0, long is, long* walked, long* selected) {
  long r = i, w = 0, x = 0;
  bool ok = true;
  for (int d = L->rank - 1; d >= 0; --d) {
    long c = r % L->shape[d];
    r /= L->shape[d];
    w += c * L->st[0][d];
    if (d == dim) {
      c = idx[i0 + c * is];
      if (c < 0 || c >= size) {
        c = 0;
        ok = false;
      }
    }
    x += c * L->st[1][d];
  }
  *walked = w;
  *selected = x;
  return ok;
}

// gather / scatter_add: the coordinate along dim of row-major index i of L.
inline long coord_along(const Layout* L, long i, int dim) {
  long r = i, c = 0;
  for (int d = L->rank - 1; d >= dim; --d) {
    c = r % L->shape[d];
    r /= L->shape[d];
  }
  return c;
}

// out = src.index_select(dim, index): L over out; st[0] out, st[1] src.
__kernel void index_select_k(Layout L, long n, int dim, long src_dim, __global const T* src,
                             long s0, __global const long* idx, long i0, long is,
                             __global T* out, long out0) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long oo, so;
  walk_selected(&L, i, dim, src_dim, idx, i0, is, &oo, &so);  // a bad index reads row 0
  out[out0 + oo] = src[s0 + so];
}

// out[i][j] = src[i][index[i][j]] along dim: L over index; st[0] index, st[1] out, st[2] src.
__kernel void gather_k(Layout L, long n, int dim, long src_dim, __global const T* src, long s0,
                       __global const long* idx, long i0, __global T* out, long out0) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long o[4];
  offs(&L, i, o);
  const long v = idx[i0 + o[0]];
  if (v < 0 || v >= src_dim) {
    out[out0 + o[1]] = (T)0;
    return;
  }
  // src offset: o[2] counts dim `dim` with the index's coordinate; replace it by v.
  out[out0 + o[1]] = src[s0 + o[2] + (v - coord_along(&L, i, dim)) * L.st[2][dim]];
}

#if IS_FLOAT
// dst.index_add_(dim, index, src): L over src; st[0] src, st[1] dst. Atomic adds.
__kernel void index_add_k(Layout L, long n, int dim, long dst_dim, __global T* dst, long d0,
                          __global const long* idx, long i0, long is, __global const T* src,
                          long s0) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long so, dof;
  if (!walk_selected(&L, i, dim, dst_dim, idx, i0, is, &so, &dof)) return;  // a bad index: skip
  atomic_add_T(dst + d0 + dof, src[s0 + so]);
}

// dst[i][index[i][j]] += src[i][j] along dim: L over index; st[0] index, st[1] src, st[2] dst.
__kernel void scatter_add_k(Layout L, long n, int dim, long dst_dim, __global T* dst, long d0,
                            __global const long* idx, long i0, __global const T* src, long s0) {
  const long i = get_global_id(0);
  if (i >= n) return;
  long o[4];
  offs(&L, i, o);
  const long v = idx[i0 + o[0]];
  if (v < 0 || v >= dst_dim) return;
  atomic_add_T(dst + d0 + o[2] + (v - coord_along(&L, i, dim)) * L.st[2][dim], src[s0 + o[1]]);
}
#endif
