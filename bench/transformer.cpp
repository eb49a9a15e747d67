// Training throughput of the encoder-decoder Transformer on the workload of
// ../shared/bench-ref/transformer.py: d_model 256, 4 heads, 3 + 3 post-norm layers, FFN 1024,
// vocab 8000, batch 32, length 64, dropout 0.1, Adam (lr 1e-4), random tokens with
// target = reversed source, causal target mask, untied output Linear. One JSON line:
//   {"name": "transformer", "step_ms": mean, "cpu_ms_per_step": process CPU time (all threads),
//    "tgt_tokens_per_s": B L / step, "peak_rss_mib": VmHWM,
//    "loss_first", "loss_last", "threads": n}
// The PyTorch figure comes from running transformer.py on the same machine (it is not run
// here). Usage: bench_transformer [--steps N] [--warmup N]
#include <omp.h>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "models/transformer.h"
#include "nn/optim.h"

using namespace graft;

namespace {
double cpu_ms() {  // CPU time of the whole process (all threads): steadier than wall time on a busy host
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}
double vm_hwm_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 10, warmup = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::stoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--warmup") == 0) warmup = std::stoll(argv[i + 1]);
  }
  const int64_t V = 8000, B = 32, L = 64;
  manual_seed(0);
  models::Transformer model({.src_vocab = V, .tgt_vocab = V, .d_model = 256, .nhead = 4,
                             .num_encoder_layers = 3, .num_decoder_layers = 3,
                             .dim_feedforward = 1024, .dropout = 0.1, .tie_output = false,
                             .max_len = L});
  optim::Adam opt(model.parameters(), {.lr = 1e-4});
  Generator g(0);
  std::vector<std::vector<int64_t>> src(static_cast<size_t>(B)), tgt(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < L - 1; ++t)  // L - 1 tokens so that tgt_in (with <bos>) has L
      src[size_t(b)].push_back(4 + int64_t(philox_uniform(g.seed, g.advance(1)) * double(V - 4)));
    tgt[size_t(b)].assign(src[size_t(b)].rbegin(), src[size_t(b)].rend());
  }
  data::Seq2SeqBatch batch = data::make_seq2seq_batch(src, tgt);
  model.train();
  double first = 0, last = 0, total_ms = 0, total_cpu = 0;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    opt.zero_grad();
    models::TransformerLoss l = model.loss(batch, 0.0);
    l.loss.backward();
    opt.step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s == 0) first = l.nll;
    last = l.nll;
    if (s >= warmup) total_ms += ms, total_cpu += cpu_ms() - c0;
  }
  const double step_ms = total_ms / double(steps);
  std::printf(
      "{\"name\": \"transformer\", \"step_ms\": %.1f, \"cpu_ms_per_step\": %.1f, \"tgt_tokens_per_s\": "
      "%.1f, \"peak_rss_mib\": %.0f, \"loss_first\": %.4f, \"loss_last\": %.4f, \"steps\": %ld, "
      "\"threads\": %d}\n",
      step_ms, total_cpu / double(steps), double(B * L) / (step_ms / 1000.0), vm_hwm_mib(), first,
      last, long(steps),
      omp_get_max_threads());
  return 0;
}
