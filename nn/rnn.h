// Recurrent layers, PyTorch-style: RNNCell/LSTMCell/GRUCell (one step) and RNN/LSTM/GRU
// (multi-layer, bidirectional, inter-layer dropout, initial states, variable-length batches).
// Batch-first everywhere. Letters: B batch, T time, C input size, H hidden size, L layers,
// D directions (1 or 2).
//
//   nn::LSTM lstm(/*input_size=*/8, /*hidden_size=*/16, /*num_layers=*/2, /*bidirectional=*/true);
//   nn::RnnOutput r = lstm.forward(x, lengths);   // x [B, T, 8], lengths int64 [B]
//   r.output;    // [B, T, 2*16]; zero at padded steps (t >= lengths[b])
//   r.state.h;   // [2*2, B, 16]: index l*D + d, the state at each row's last valid step
//
// Math and parameter names are PyTorch's (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0,
// ..._reverse; gate order i, f, g, o for LSTM and r, z, n for GRU; every weight and bias
// ~ U(-1/sqrt(H), 1/sqrt(H))), so state dicts map one to one to torch.nn.LSTM's.
//
// Per step, the input projection of ALL steps is one matmul (x W_ih^T + b_ih: [B, T, G*H]);
// the step adds h W_hh^T + b_hh and runs the gate math. With use_fused (the default, CPU) the
// LSTM/GRU gate nonlinearities and state update are ONE fused tape node per step
// (lstm_cell_fused / gru_cell_fused in autograd/ops_rnn.h); use_fused = false runs the same math
// as plain tape ops (the composite path; the tests check that both agree).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"

namespace graft::nn {

// h, c: [L*D, B, H] for layers, [B, H] for cells; c is undefined for RNN and GRU.
struct RnnState {
  Tensor h;
  Tensor c;
};
// output [B, T, D*H]; state: the final state per layer and direction.
struct RnnOutput {
  Tensor output;
  RnnState state;
};

enum class RnnMode { rnn_tanh, rnn_relu, lstm, gru };
// Number of gate blocks in W_ih / W_hh: 1 (RNN), 4 (LSTM), 3 (GRU).
int64_t rnn_gate_count(RnnMode mode);
const char* rnn_mode_name(RnnMode mode);

// One step of a cell from the input projection xg = x W_ih^T + b_ih [B, G*H] and the previous
// state (h [B, H], c [B, H] for LSTM): adds h W_hh^T + b_hh and applies the gate math.
RnnState rnn_step(RnnMode mode, const Tensor& xg, const RnnState& prev, const Tensor& w_hh,
                  const Tensor& b_hh, bool fused);

// ---------------------------------------------------------------- cells: x [B, C] -> state [B, H]
class RNNCellBase : public Module {
 public:
  RNNCellBase(RnnMode mode, int64_t input_size, int64_t hidden_size, bool bias);
  // s = {} starts from zeros (and an LSTM cell's c from zeros when only h is given).
  RnnState forward(const Tensor& x, const RnnState& s = {});
  std::string repr() const override;
  void reset_parameters();

  const RnnMode mode;
  const int64_t input_size, hidden_size;
  const bool bias;
  bool use_fused = true;  // LSTM/GRU: one fused node for the gate math (CPU); else tape ops
  Tensor weight_ih;  // [G*H, C]
  Tensor weight_hh;  // [G*H, H]
  Tensor bias_ih;    // [G*H] (undefined without bias)
  Tensor bias_hh;    // [G*H]
};

// h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)
class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true, std::string nonlinearity = "tanh");
};
// i, f, g, o gates; c' = f c + i g, h' = o tanh(c')
class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true)
      : RNNCellBase(RnnMode::lstm, input_size, hidden_size, bias) {}
};
// r, z, n gates; n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h
class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true)
      : RNNCellBase(RnnMode::gru, input_size, hidden_size, bias) {}
};

// ---------------------------------------------------------------- layers: x [B, T, C]
class RNNBase : public Module {
 public:
  RNNBase(RnnMode mode, int64_t input_size, int64_t hidden_size, int64_t num_layers,
          bool bidirectional, double dropout, bool bias);
  // x [B, T, C]; lengths int64 [B] with values in [0, T] (undefined: all T). Padded steps
  // (t >= length) neither update the state nor leak into outputs (outputs there are 0); the
  // final state is the state at each row's last valid step; the reverse direction starts at
  // each row's own last valid step. h0: {h [L*D, B, H], c [L*D, B, H] (LSTM)}, zeros if undefined.
  RnnOutput forward(const Tensor& x, const Tensor& lengths = {}, const RnnState& h0 = {});
  std::string repr() const override;
  void reset_parameters();

  // Parameters of layer l, direction d (0 forward, 1 reverse): {w_ih, w_hh, b_ih, b_hh}.
  struct LayerParams {
    Tensor w_ih, w_hh, b_ih, b_hh;
  };
  const LayerParams& params(int64_t layer, int64_t direction) const;

  const RnnMode mode;
  const int64_t input_size, hidden_size, num_layers;
  const bool bidirectional;
  const double dropout;  // on the outputs of every layer but the last, in training mode
  const bool bias;
  bool use_fused = true;  // see RNNCellBase::use_fused

 private:
  std::vector<LayerParams> params_;  // index l*D + d
};

class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bidirectional = false,
      double dropout = 0.0, bool bias = true, std::string nonlinearity = "tanh");
};
class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bidirectional = false,
       double dropout = 0.0, bool bias = true)
      : RNNBase(RnnMode::lstm, input_size, hidden_size, num_layers, bidirectional, dropout, bias) {}
};
class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bidirectional = false,
      double dropout = 0.0, bool bias = true)
      : RNNBase(RnnMode::gru, input_size, hidden_size, num_layers, bidirectional, dropout, bias) {}
};

}  // namespace graft::nn
