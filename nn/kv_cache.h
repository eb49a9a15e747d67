// nn::KVCache: the keys and values one attention layer has seen during incremental decoding.
//
//   nn::KVCache cache;
//   cache.capacity = 128;                          // positions to preallocate (the longest decode)
//   mha.forward(x_t, x_t, x_t, {.is_causal = true, .cache = &cache});   // one token at a time
//
// Self-attention: append() writes each call's keys and values in place into preallocated
// buffers [B, H, capacity, Dh] and `k`/`v` become views of their first length() positions, so a
// decoding step copies only its own new positions (no cat of the whole prefix). A buffer that
// fills up is reallocated at twice the size (amortised O(1) per position). Under autograd (new
// keys that require grad, with grad mode on) the cache concatenates instead, so gradients flow
// through the cached keys; in-place writes are not recorded by the tape.
// Cross-attention (`static_kv`): the first call stores the projected encoder memory, later calls
// reuse it.
#pragma once
#include <cstdint>

#include "autograd/tensor.h"

namespace graft::nn {

struct KVCache {
  Tensor k, v;             // [B, H, S_cached, head_dim]; undefined until the first call
  bool static_kv = false;  // cross-attention: project key/value once, then reuse
  int64_t capacity = 0;    // positions preallocated on the first append (0: 64)
  Tensor k_buf, v_buf;     // [B, H, capacity, head_dim] storage behind k and v (self-attention)
  Tensor k_alt, v_alt;     // spare buffers of the same size: reorder() writes into them and swaps

  int64_t length() const { return k.defined() ? k.size(2) : 0; }
  int64_t allocated() const { return k_buf.defined() ? k_buf.size(2) : 0; }
  void reset() { k = v = k_buf = v_buf = k_alt = v_alt = Tensor(); }
  // Appends k_new, v_new [B, H, L, Dh] (static_kv: stores them). graft::Error when the batch,
  // heads, head size, dtype or device differ from what the cache holds.
  void append(const Tensor& k_new, const Tensor& v_new);
  // Beam search: row i of the batch becomes row index[i] (index int64 [N]; N may differ from B).
  // In place (self-attention), the selected rows' first length() positions are copied once,
  // into the spare buffers, which then become the cache's.
  void reorder(const Tensor& index);
};

}  // namespace graft::nn
