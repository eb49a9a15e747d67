// Recurrent cells and layers (see nn/rnn.h for the math, shapes and names).
#include "nn/rnn.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops_rnn.h"
#include "nn/init.h"
#include "ops/error.h"

namespace graft::nn {

int64_t rnn_gate_count(RnnMode mode) {
  switch (mode) {
    case RnnMode::lstm: return 4;
    case RnnMode::gru: return 3;
    default: return 1;
  }
}

const char* rnn_mode_name(RnnMode mode) {
  switch (mode) {
    case RnnMode::rnn_tanh: return "RNN";
    case RnnMode::rnn_relu: return "RNN";
    case RnnMode::lstm: return "LSTM";
    default: return "GRU";
  }
}

namespace {

RnnMode parse_nonlinearity(const std::string& s) {
  if (s == "tanh") return RnnMode::rnn_tanh;
  if (s == "relu") return RnnMode::rnn_relu;
  throw Error(fmt::format("RNN: unknown nonlinearity '{}'; hint: use \"tanh\" or \"relu\"", s));
}

void check_sizes(const char* what, int64_t input_size, int64_t hidden_size) {
  GRAFT_CHECK(input_size > 0 && hidden_size > 0,
              "{}: input_size and hidden_size must be positive, got {} and {}", what, input_size,
              hidden_size);
}

// PyTorch's init for every RNN weight and bias: U(-1/sqrt(H), 1/sqrt(H)).
void init_uniform(const Tensor& t, int64_t hidden_size) {
  if (!t.defined()) return;
  double k = 1.0 / std::sqrt(double(hidden_size));
  init::uniform_(t, -k, k);
}

// The gate math after the matmuls, as plain tape ops (the composite path).
RnnState lstm_composite(const Tensor& gates, const Tensor& c) {
  auto p = chunk(gates, 4, 1);
  Tensor cn = sigmoid(p[1]) * c + sigmoid(p[0]) * tanh(p[2]);  // c' = f c + i g
  return {sigmoid(p[3]) * tanh(cn), cn};                       // h' = o tanh(c')
}
Tensor gru_composite(const Tensor& xg, const Tensor& hg, const Tensor& h) {
  auto a = chunk(xg, 3, 1), b = chunk(hg, 3, 1);
  Tensor r = sigmoid(a[0] + b[0]), z = sigmoid(a[1] + b[1]);
  Tensor n = tanh(a[2] + r * b[2]);
  return n + z * (h - n);  // (1 - z) n + z h
}

bool fused_ok(bool fused, const Tensor& t) {
  return fused && t.device().is_cpu() && (t.dtype() == DType::f32 || t.dtype() == DType::f64);
}

}  // namespace

RnnState rnn_step(RnnMode mode, const Tensor& xg, const RnnState& prev, const Tensor& w_hh,
                  const Tensor& b_hh, bool fused) {
  Tensor hg = linear(prev.h, w_hh, b_hh);  // [B, G*H]
  switch (mode) {
    case RnnMode::rnn_tanh: return {tanh(xg + hg), Tensor()};
    case RnnMode::rnn_relu: return {relu(xg + hg), Tensor()};
    case RnnMode::lstm: {
      Tensor gates = xg + hg;
      if (!fused_ok(fused, gates)) return lstm_composite(gates, prev.c);
      auto [h, c] = lstm_cell_fused(gates, prev.c);
      return {h, c};
    }
    default:
      if (!fused_ok(fused, xg)) return {gru_composite(xg, hg, prev.h), Tensor()};
      return {gru_cell_fused(xg, hg, prev.h), Tensor()};
  }
}

// ---------------------------------------------------------------- cells
RNNCellBase::RNNCellBase(RnnMode mode_, int64_t input_size_, int64_t hidden_size_, bool bias_)
    : mode(mode_), input_size(input_size_), hidden_size(hidden_size_), bias(bias_) {
  check_sizes(rnn_mode_name(mode) == std::string("RNN") ? "RNNCell" : mode == RnnMode::lstm ? "LSTMCell" : "GRUCell",
              input_size, hidden_size);
  const int64_t G = rnn_gate_count(mode) * hidden_size;
  weight_ih = register_parameter("weight_ih", empty({G, input_size}));
  weight_hh = register_parameter("weight_hh", empty({G, hidden_size}));
  if (bias) {
    bias_ih = register_parameter("bias_ih", empty({G}));
    bias_hh = register_parameter("bias_hh", empty({G}));
  }
  reset_parameters();
}

void RNNCellBase::reset_parameters() {
  for (const Tensor& p : {weight_ih, weight_hh, bias_ih, bias_hh}) init_uniform(p, hidden_size);
}

std::string RNNCellBase::repr() const {
  std::string extra = mode == RnnMode::rnn_relu ? ", nonlinearity=relu" : "";
  return fmt::format("{}Cell({}, {}, bias={}{})", rnn_mode_name(mode), input_size, hidden_size, bias, extra);
}

RnnState RNNCellBase::forward(const Tensor& x, const RnnState& s) {
  std::string op = std::string(rnn_mode_name(mode)) + "Cell";
  check_defined(x, op.c_str());
  GRAFT_CHECK(x.dim() == 2 && x.size(1) == input_size,
              "{}: expected input [B, {}], got {}; hint: cells take one time step, layers take "
              "[B, T, C]", op, input_size, x.shape());
  const int64_t B = x.size(0);
  const Shape hs{B, hidden_size};
  RnnState prev = s;
  if (!prev.h.defined()) prev.h = zeros(hs, x.options());
  GRAFT_CHECK(prev.h.shape() == hs, "{}: expected h [{}, {}], got {}", op, B, hidden_size, prev.h.shape());
  if (mode == RnnMode::lstm) {
    if (!prev.c.defined()) prev.c = zeros(hs, x.options());
    GRAFT_CHECK(prev.c.shape() == hs, "{}: expected c [{}, {}], got {}", op, B, hidden_size, prev.c.shape());
  }
  return rnn_step(mode, linear(x, weight_ih, bias_ih), prev, weight_hh, bias_hh, use_fused);
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, bool bias, std::string nonlinearity)
    : RNNCellBase(parse_nonlinearity(nonlinearity), input_size, hidden_size, bias) {}

// ---------------------------------------------------------------- layers
RNNBase::RNNBase(RnnMode mode_, int64_t input_size_, int64_t hidden_size_, int64_t num_layers_,
                 bool bidirectional_, double dropout_, bool bias_)
    : mode(mode_), input_size(input_size_), hidden_size(hidden_size_), num_layers(num_layers_),
      bidirectional(bidirectional_), dropout(dropout_), bias(bias_) {
  const char* name = rnn_mode_name(mode);
  check_sizes(name, input_size, hidden_size);
  GRAFT_CHECK(num_layers >= 1, "{}: num_layers must be at least 1, got {}", name, num_layers);
  GRAFT_CHECK(dropout >= 0 && dropout < 1, "{}: dropout must be in [0, 1), got {}", name, dropout);
  const int64_t G = rnn_gate_count(mode) * hidden_size, D = bidirectional ? 2 : 1;
  for (int64_t l = 0; l < num_layers; ++l) {
    const int64_t in = l == 0 ? input_size : D * hidden_size;
    for (int64_t d = 0; d < D; ++d) {
      std::string sfx = fmt::format("_l{}{}", l, d == 1 ? "_reverse" : "");
      LayerParams p;
      p.w_ih = register_parameter("weight_ih" + sfx, empty({G, in}));
      p.w_hh = register_parameter("weight_hh" + sfx, empty({G, hidden_size}));
      if (bias) {
        p.b_ih = register_parameter("bias_ih" + sfx, empty({G}));
        p.b_hh = register_parameter("bias_hh" + sfx, empty({G}));
      }
      params_.push_back(p);
    }
  }
  reset_parameters();
}

void RNNBase::reset_parameters() {
  for (const LayerParams& p : params_)
    for (const Tensor& t : {p.w_ih, p.w_hh, p.b_ih, p.b_hh}) init_uniform(t, hidden_size);
}

const RNNBase::LayerParams& RNNBase::params(int64_t layer, int64_t direction) const {
  const int64_t D = bidirectional ? 2 : 1;
  GRAFT_CHECK(layer >= 0 && layer < num_layers && direction >= 0 && direction < D,
              "{}: no parameters for layer {} direction {} (layers: {}, directions: {})",
              rnn_mode_name(mode), layer, direction, num_layers, D);
  return params_[size_t(layer * D + direction)];
}

std::string RNNBase::repr() const {
  std::string extra = mode == RnnMode::rnn_relu ? ", nonlinearity=relu" : "";
  return fmt::format("{}({}, {}, num_layers={}, bidirectional={}, dropout={}, bias={}{})",
                     rnn_mode_name(mode), input_size, hidden_size, num_layers, bidirectional, dropout,
                     bias, extra);
}

RnnOutput RNNBase::forward(const Tensor& x, const Tensor& lengths, const RnnState& h0) {
  const char* op = rnn_mode_name(mode);
  check_defined(x, op);
  GRAFT_CHECK(x.dim() == 3 && x.size(2) == input_size,
              "{}: expected input [B, T, {}] (batch first), got {}; hint: a single step goes to "
              "the {}Cell", op, input_size, x.shape(), op);
  GRAFT_CHECK(is_floating(x.dtype()), "{}: expected a floating input, got {}", op, x.dtype());
  const int64_t B = x.size(0), T = x.size(1), H = hidden_size, D = bidirectional ? 2 : 1;
  GRAFT_CHECK(T >= 1 && B >= 1, "{}: expected at least one row and one time step, got {}", op, x.shape());
  const TensorOptions opt = x.options();

  // ---- lengths -> per-step validity masks (only for steps where some row is padded)
  std::vector<int64_t> len(size_t(B), T);
  if (lengths.defined()) {
    GRAFT_CHECK(lengths.dtype() == DType::i64 && lengths.dim() == 1 && lengths.size(0) == B,
                "{}: lengths must be int64 [{}], got {} {}", op, B, lengths.dtype(), lengths.shape());
    len = lengths.to_vector<int64_t>();
    for (int64_t b = 0; b < B; ++b)
      GRAFT_CHECK(len[size_t(b)] >= 0 && len[size_t(b)] <= T,
                  "{}: lengths[{}] = {} is outside [0, T = {}]", op, b, len[size_t(b)], T);
  }
  std::vector<int> n_valid(size_t(T), 0);  // rows valid at step t
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) n_valid[size_t(t)] += t < len[size_t(b)];
  auto valid_mask = [&](int64_t t) {  // bool [B, 1]: t < lengths[b]
    std::vector<double> v(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) v[size_t(b)] = t < len[size_t(b)];
    return ne(from_vector(v, {B, 1}, DType::f64), zeros({}, DType::f64)).to(x.device());
  };

  // ---- initial states
  const Shape state_shape{num_layers * D, B, H};
  for (const Tensor* s : {&h0.h, &h0.c})
    if (s->defined())
      GRAFT_CHECK(s->shape() == state_shape, "{}: expected an initial state [{}, {}, {}] "
                  "(num_layers * directions, B, H), got {}", op, num_layers * D, B, H, s->shape());
  GRAFT_CHECK(!(h0.c.defined() && mode != RnnMode::lstm), "{}: only LSTM takes an initial c", op);

  std::vector<Tensor> final_h, final_c;
  Tensor seq = x;  // input of the current layer [B, T, C_in]
  for (int64_t l = 0; l < num_layers; ++l) {
    std::vector<Tensor> dir_out;
    for (int64_t d = 0; d < D; ++d) {
      const LayerParams& p = params_[size_t(l * D + d)];
      const int64_t k = l * D + d;
      RnnState s{h0.h.defined() ? h0.h.select(0, k) : zeros({B, H}, opt), Tensor()};
      if (mode == RnnMode::lstm) s.c = h0.c.defined() ? h0.c.select(0, k) : zeros({B, H}, opt);
      std::vector<Tensor> xs = unstack(linear(seq, p.w_ih, p.b_ih), 1);  // T x [B, G*H]
      std::vector<Tensor> outs(static_cast<size_t>(T));
      for (int64_t i = 0; i < T; ++i) {
        const int64_t t = d == 0 ? i : T - 1 - i;
        const int nv = n_valid[size_t(t)];
        if (nv == 0) {  // every row is padded here: nothing changes
          outs[size_t(t)] = zeros({B, H}, opt);
          continue;
        }
        RnnState n = rnn_step(mode, xs[size_t(t)], s, p.w_hh, p.b_hh, use_fused);
        if (nv == B) {
          s = n;
          outs[size_t(t)] = n.h;
          continue;
        }
        Tensor m = valid_mask(t);  // padded rows keep their state and output 0
        s.h = where(m, n.h, s.h);
        if (mode == RnnMode::lstm) s.c = where(m, n.c, s.c);
        outs[size_t(t)] = where(m, n.h, zeros({}, opt));
      }
      dir_out.push_back(stack(outs, 1));  // [B, T, H]
      final_h.push_back(s.h);
      if (mode == RnnMode::lstm) final_c.push_back(s.c);
    }
    seq = D == 1 ? dir_out[0] : cat(dir_out, 2);
    if (l + 1 < num_layers && dropout > 0 && is_training()) seq = graft::dropout(seq, dropout, true);
  }
  RnnOutput r;
  r.output = seq;
  r.state.h = stack(final_h, 0);
  if (mode == RnnMode::lstm) r.state.c = stack(final_c, 0);
  return r;
}

RNN::RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bidirectional,
         double dropout, bool bias, std::string nonlinearity)
    : RNNBase(parse_nonlinearity(nonlinearity), input_size, hidden_size, num_layers, bidirectional,
              dropout, bias) {}

}  // namespace graft::nn
