// Training throughput of the encoder-decoder Transformer on the workload of
// ../shared/bench-ref/transformer.py: d_model 256, 4 heads, 3 + 3 post-norm layers, FFN 1024,
// vocab 8000, batch 32, length 64, dropout 0.1, Adam (lr 1e-4), random tokens with
// target = reversed source, causal target mask, untied output Linear. One JSON line:
//   {"name": "transformer", "step_ms": mean, "cpu_ms_per_step": process CPU time (all threads),
//    "tgt_tokens_per_s": B L / step, "peak_rss_mib": VmHWM,
//    "loss_first", "loss_last", "threads": n, "precision": "f32"|"bf16",
//    "model_gflop_per_step": matmul + attention FLOPs of forward + backward (counted below),
//    "model_gflops": that / step time}
// The PyTorch figure comes from running transformer.py on the same machine (bench/
// transformer_vs_torch.sh runs both, and bench_matmul, in one go).
// Usage: bench_transformer [--steps N] [--warmup N] [--threads N] [--batch B] [--bible-recipe] [--bf16]
//   --bf16: forward (and so each matmul's backward) under AutocastGuard(Precision::bf16)
//   --batch B: B sequence pairs per step (default 32: B x 64 target tokens)
//   --bible-recipe: the model of the Bible runs (pre-norm, tied output, label smoothing 0.1), to
//     compare with `graft train transformer --task bible --max-tokens N` at B x 64 = that run's
//     target tokens per step (--max-tokens 4096 batches hold ~3,200: --batch 50)
#include <omp.h>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ops/threads.h"
#include "bench/bench_util.h"
#include "autograd/autocast.h"
#include "models/transformer.h"
#include "nn/optim.h"

using namespace graft;

namespace {
using bench::cpu_ms;
using bench::vm_hwm_mib;
}  // namespace

int main(int argc, char** argv) {
  bench::DataParallel dp(&argc, &argv);  // under mpirun: each rank takes B / ranks rows
  int64_t steps = 10, warmup = 2, B = 32;
  bool bf16 = false, overlap = true, bible = false;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--bf16") == 0) {
      bf16 = true;
    } else if (std::strcmp(argv[i], "--dp-no-overlap") == 0) {
      overlap = false;
    } else if (has_value && std::strcmp(argv[i], "--steps") == 0) {
      steps = std::stoll(argv[++i]);
    } else if (has_value && std::strcmp(argv[i], "--warmup") == 0) {
      warmup = std::stoll(argv[++i]);
    } else if (has_value && std::strcmp(argv[i], "--threads") == 0) {
      omp_set_num_threads(std::stoi(argv[++i]));
    } else if (has_value && std::strcmp(argv[i], "--batch") == 0) {
      B = std::stoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--bible-recipe") == 0) {
      bible = true;
    } else {
      std::fprintf(stderr, "usage: bench_transformer [--steps N] [--warmup N] [--threads N] [--batch B] "
                   "[--bible-recipe] [--bf16] [--dp-no-overlap]\n");
      return 2;
    }
  }
  if (steps < 1 || warmup < 0 || B < 1) {
    std::fprintf(stderr, "bench_transformer: --steps and --batch must be >= 1 and --warmup >= 0\n");
    return 2;
  }
  const int64_t V = 8000, L = 64;
  manual_seed(0);
  models::Transformer model({.src_vocab = V, .tgt_vocab = V, .d_model = 256, .nhead = 4,
                             .num_encoder_layers = 3, .num_decoder_layers = 3,
                             .dim_feedforward = 1024, .dropout = 0.1, .norm_first = bible,
                             .tie_output = bible, .max_len = L});
  optim::Adam opt(model.parameters(), {.lr = 1e-4});
  Generator g(0);
  std::vector<std::vector<int64_t>> src(static_cast<size_t>(B)), tgt(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < L - 1; ++t)  // L - 1 tokens so that tgt_in (with <bos>) has L
      src[size_t(b)].push_back(4 + int64_t(philox_uniform(g.seed, g.advance(1)) * double(V - 4)));
    tgt[size_t(b)].assign(src[size_t(b)].rbegin(), src[size_t(b)].rend());
  }
  const dist::Range mine = dist::shard(B);  // all rows with one process
  src = {src.begin() + mine.begin, src.begin() + mine.begin + mine.count};
  tgt = {tgt.begin() + mine.begin, tgt.begin() + mine.begin + mine.count};
  data::Seq2SeqBatch batch = data::make_seq2seq_batch(src, tgt);
  dp.attach(model.parameters(), overlap);
  model.train();
  double first = 0, last = 0, total_ms = 0, total_cpu = 0;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    opt.zero_grad();
    models::TransformerLoss l = [&] {
      AutocastGuard ac(bf16 ? Precision::bf16 : Precision::f32);
      return model.loss(batch, bible ? 0.1 : 0.0);
    }();
    dp.before_backward();
    l.loss.backward();  // matmul backwards follow their forward's precision
    dp.after_backward();
    opt.step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s == 0) first = l.nll;
    last = l.nll;
    if (s >= warmup) total_ms += ms, total_cpu += cpu_ms() - c0;
  }
  const double step_ms = total_ms / double(steps);
  // FLOPs of one step: a linear layer with P weights costs 2 P per token forward and 4 P
  // backward (dx and dw); one attention costs 4 T S Dh per (batch, head) forward (QK^T and PV)
  // and 8 T S Dh + 2 T S Dh recomputation backward. Causal masking is not discounted.
  const double C = 256, F = 1024, Bd = double(B), Ld = double(L);
  const double enc_layer = 4 * C * C + 2 * C * F, dec_layer = 8 * C * C + 2 * C * F;
  const double lin = Bd * Ld * (3 * enc_layer + 3 * dec_layer + C * double(V));
  const double attn = 9 * Bd * Ld * Ld * C;  // 9 attentions, T S Dh H = L L C
  const double gflop = (6 * lin + 14 * attn) / 1e9;
  std::printf(
      "{\"name\": \"transformer\", \"step_ms\": %.1f, \"cpu_ms_per_step\": %.1f, \"tgt_tokens_per_s\": "
      "%.1f, \"peak_rss_mib\": %.0f, \"loss_first\": %.4f, \"loss_last\": %.4f, \"steps\": %ld, "
      "\"threads\": %d, \"ranks\": %d, \"dp_overlap\": %s, \"precision\": \"%s\", "
      "\"model_gflop_per_step\": %.1f, \"model_gflops\": %.1f}\n",
      step_ms, total_cpu / double(steps), double(B * L) / (step_ms / 1000.0), vm_hwm_mib(), first,
      last, long(steps),
      graft::requested_threads(), dist::world_size(), overlap ? "true" : "false", bf16 ? "bf16" : "f32",
      gflop, gflop / (step_ms / 1000.0));
  return 0;
}
