// Differentiable ops for recurrent layers (defined in autograd/ops_rnn.cpp, registered in the op
// table with float64 gradcheck cases). Letters: B batch, H hidden size, T time steps.
//
//   auto [h, c] = lstm_cell_fused(gates, c_prev);   // one fused tape node, two outputs
//   Tensor h = gru_cell_fused(gi, gh, h_prev);       // one fused tape node
//   std::vector<Tensor> steps = unstack(x, 1);       // x [B, T, C] -> T x [B, C], one node
//
// The fused cells evaluate the gate nonlinearities and the state update in one SIMD loop
// forward and one backward (autograd/fuse_multi.h), writing the gate gradients straight into one
// [B, 4H] (LSTM) or [B, 3H] (GRU) buffer. CPU only. Double backward (create_graph) falls back to
// the same math written with tape ops, so higher derivatives work too.
#pragma once
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace graft {

// LSTM state update, PyTorch's math and gate order (i, f, g, o):
//   gates [B, 4H] = x W_ih^T + b_ih + h W_hh^T + b_hh (pre-activations), c_prev [B, H]
//   c = sigmoid(f) c_prev + sigmoid(i) tanh(g);  h = sigmoid(o) tanh(c)
// Returns {h, c}.
std::pair<Tensor, Tensor> lstm_cell_fused(const Tensor& gates, const Tensor& c_prev);

// GRU state update, PyTorch's math and gate order (r, z, n):
//   gi [B, 3H] = x W_ih^T + b_ih, gh [B, 3H] = h W_hh^T + b_hh, h_prev [B, H]
//   r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r gh_n)
//   h = (1 - z) n + z h_prev
Tensor gru_cell_fused(const Tensor& gi, const Tensor& gh, const Tensor& h_prev);

// Additive (Bahdanau / concat) attention scores, one fused node:
//   uh [B, S, A] (key projection, e.g. U h_s + b), wq [B, A] (query projection W s), v [A]
//   e [B, S] = sum_a v[a] tanh(uh[b, s, a] + wq[b, a])
// Forward is one pass that also saves tanh(.) [B, S, A]; backward one pass writing d uh,
// d wq and a matrix-vector product for d v. CPU: the fused loops (float32/float64); other
// devices: the same math as tape ops.
Tensor additive_attention_score(const Tensor& uh, const Tensor& wq, const Tensor& v);

// The slices x.select(dim, t) for every t, as one tape node whose backward writes all the
// slices' gradients into one tensor (a select per step would allocate a full-size gradient
// per step). Like torch.unbind / tf.unstack. Outputs are views of x.
std::vector<Tensor> unstack(const Tensor& x, int64_t dim = 0);

}  // namespace graft
