// Recurrent layers, forward + backward (sum of outputs), fused gate nodes vs the composite path
// (the same math as tape ops): nn::LSTM and nn::GRU, B = 32, T = 20, C = 128, H = 256, float32.
// JSON lines: name, value (tokens/s = B*T per fwd+bwd), unit, reference (composite), ratio.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <omp.h>

#include "ops/threads.h"
#include "autograd/node.h"
#include "bench/timing.h"
#include "nn/rnn.h"

using namespace graft;

namespace {

template <class M> void run(const char* name, M& m, const Tensor& x) {
  auto step = [&] {
    Tensor y = m.forward(x).output;
    auto g = grad({sum(y)}, m.parameters());
    (void)g;
  };
  double fused = 0, comp = 0;  // alternating rounds, best of each (the machine's load varies)
  for (int round = 0; round < 3; ++round) {
    m.use_fused = true;
    fused = std::max(fused, bench::per_second(step, 0.5));
    m.use_fused = false;
    comp = std::max(comp, bench::per_second(step, 0.5));
  }
  const double tokens = double(x.size(0) * x.size(1));
  fmt::print("{{\"name\": \"{}\", \"value\": {:.0f}, \"unit\": \"tokens/s (fwd+bwd)\", \"reference\": {:.0f}, "
             "\"reference_source\": \"composite gate math (tape ops)\", \"ratio\": {:.2f}, \"B\": {}, \"T\": {}, "
             "\"C\": {}, \"H\": {}, \"threads\": {}}}\n",
             name, fused * tokens, comp * tokens, fused / comp, x.size(0), x.size(1), x.size(2),
             m.hidden_size, graft::requested_threads());
}
}  // namespace

int main() {
  manual_seed(0);
  Tensor x = randn({32, 20, 128});
  nn::LSTM lstm(128, 256);
  run("rnn_lstm_layer", lstm, x);
  nn::GRU gru(128, 256);
  run("rnn_gru_layer", gru, x);
  return 0;
}
