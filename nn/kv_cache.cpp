// nn::KVCache (nn/kv_cache.h): preallocated in-place key/value storage for incremental decoding.
#include "nn/kv_cache.h"

#include <algorithm>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "ops/error.h"

namespace graft::nn {

namespace {
constexpr int64_t kDefaultCapacity = 64;

// A new [B, H, cap, Dh] buffer like `x` whose first x.size(2) positions hold x.
Tensor grown(const Tensor& x, int64_t cap) {
  Tensor buf = empty({x.size(0), x.size(1), cap, x.size(3)}, x.options());
  if (x.size(2) > 0) buf.narrow(2, 0, x.size(2)).copy_(x);
  return buf;
}
}  // namespace

void KVCache::append(const Tensor& kn, const Tensor& vn) {
  check_defined(kn, "KVCache");
  check_defined(vn, "KVCache");
  GRAFT_CHECK(kn.dim() == 4 && vn.dim() == 4 && kn.size(0) == vn.size(0) &&
                  kn.size(1) == vn.size(1) && kn.size(2) == vn.size(2),
              "KVCache: keys and values must be [B, H, L, Dh] with the same B, H, L, got {} and {}",
              kn.shape(), vn.shape());
  if (static_kv || !k.defined()) {
    if (!static_kv && !(GradMode::is_enabled() && (kn.requires_grad() || vn.requires_grad()))) {
      const int64_t cap = std::max(capacity > 0 ? capacity : kDefaultCapacity, kn.size(2));
      k_buf = grown(kn, cap);
      v_buf = grown(vn, cap);
      k = k_buf.narrow(2, 0, kn.size(2));
      v = v_buf.narrow(2, 0, vn.size(2));
      return;
    }
    k = kn;
    v = vn;
    return;
  }
  GRAFT_CHECK(kn.size(0) == k.size(0),
              "KVCache: the cache holds batch {} but the new keys have batch {}; hint: reset() the "
              "cache between sequences",
              k.size(0), kn.size(0));
  GRAFT_CHECK(kn.size(1) == k.size(1) && kn.size(3) == k.size(3) && vn.size(3) == v.size(3),
              "KVCache: new keys {} / values {} do not match the cached {} / {} (heads, head size)",
              kn.shape(), vn.shape(), k.shape(), v.shape());
  GRAFT_CHECK(kn.dtype() == k.dtype() && kn.device() == k.device(),
              "KVCache: new keys are {} on {} but the cache holds {} on {}", kn.dtype(),
              kn.device().str(), k.dtype(), k.device().str());
  if (GradMode::is_enabled() && (kn.requires_grad() || vn.requires_grad())) {
    k = cat({k, kn}, 2);  // differentiable: [B, H, S_cached + L, Dh]
    v = cat({v, vn}, 2);
    k_buf = v_buf = Tensor();
    return;
  }
  const int64_t S = length(), L = kn.size(2);
  if (S + L > allocated()) {  // full: reallocate, doubled (or the first in-place use after a cat)
    const int64_t cap = allocated() > 0 ? std::max(S + L, 2 * allocated())
                                        : std::max(S + L, capacity > 0 ? capacity : kDefaultCapacity);
    k_buf = grown(k, cap);
    v_buf = grown(v, cap);
  }
  k_buf.narrow(2, S, L).copy_(kn);  // write in place: only the new positions move
  v_buf.narrow(2, S, L).copy_(vn);
  k = k_buf.narrow(2, 0, S + L);
  v = v_buf.narrow(2, 0, S + L);
}

void KVCache::reorder(const Tensor& index) {
  if (!k.defined()) return;
  if (!k_buf.defined()) {  // cross-attention, or a differentiable (concatenated) cache
    k = index_select(k, 0, index);  // [N, H, S, Dh]
    v = index_select(v, 0, index);
    return;
  }
  const int64_t N = index.numel(), S = length();
  if (!k_alt.defined() || k_alt.size(0) != N || k_alt.size(2) != allocated()) {
    k_alt = empty({N, k_buf.size(1), allocated(), k_buf.size(3)}, k_buf.options());
    v_alt = empty({N, v_buf.size(1), allocated(), v_buf.size(3)}, v_buf.options());
  }
  Tensor ka = k_alt.narrow(2, 0, S), va = v_alt.narrow(2, 0, S);
  index_select_out(ka, k, 0, index);  // [N, H, S, Dh] of the spare buffers
  index_select_out(va, v, 0, index);
  std::swap(k_buf, k_alt);
  std::swap(v_buf, v_alt);
  k = k_buf.narrow(2, 0, S);
  v = v_buf.narrow(2, 0, S);
}

}  // namespace graft::nn
