// BERT-mini pretraining step (MLM + NSP) on the workload of
// ../shared/bench-ref/bert_mlm.py --mlm-gather 1: 4 post-norm GELU layers, hidden 256, 4 heads,
// FFN 1024, vocab 30522, 512 positions, batch 16 x length 128, dropout 0.1, AdamW (lr 1e-4,
// weight decay 0.01); one fixed batch of random word ids (>= 999) with [CLS] at 0 and [SEP] at
// L/2 - 1 and L - 1, segments 0 | 1, 15% of the non-special tokens chosen (80% [MASK], 10% a
// random word, 10% unchanged), MLM logits only at the chosen positions, random NSP labels.
// 2 warm-up steps, then 10 timed. One JSON line with the reference script's field names:
//   {"bench": "bert_mlm", "impl": "graft", "threads", "step_ms_mean", "step_ms_median",
//    "step_ms_min", "tokens_per_step", "tokens_per_s", "rss_peak_mib" (VmHWM), "cpu_ms_per_step",
//    "masked_tokens", "params", "loss_first", "loss_last"}
// bench/bert_mlm_vs_torch.sh runs it and the PyTorch script side by side (same threads).
// Usage: bench_bert_mlm [--threads N] [--steps N] [--warmup N] [--seed N] [--dropout P] [--bf16]
//   --bf16: the forward (and so each matmul's backward) under AutocastGuard(Precision::bf16):
//   bf16 matmul operands, f32 accumulation, weights, gradients and optimizer state.
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ops/threads.h"
#include "bench/bench_util.h"
#include "autograd/autocast.h"
#include "models/bert.h"
#include "nn/optim.h"
#include "ops/random.h"

using namespace graft;

namespace {

using bench::cpu_ms;
using bench::vm_hwm_mib;

struct Batch {
  Tensor ids, types, labels, nsp;
  int64_t masked = 0;
};

// The reference script's batch recipe (bert-base-uncased ids), drawn from graft's Philox stream.
Batch make_batch(int64_t B, int64_t L, int64_t V, uint64_t seed) {
  constexpr int64_t CLS = 101, SEP = 102, MASK = 103, FIRST_WORD = 999;
  uint64_t counter = 0;
  auto uniform = [&] { return philox_uniform(seed, counter++); };
  auto word = [&] { return FIRST_WORD + std::min(V - FIRST_WORD - 1, int64_t(uniform() * double(V - FIRST_WORD))); };
  const size_t n = size_t(B * L);
  std::vector<int64_t> ids(n), types(n), labels(n, -100), nsp(static_cast<size_t>(B));
  Batch out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t) {
      const size_t k = size_t(b * L + t);
      const bool special = t == 0 || t == L / 2 - 1 || t == L - 1;
      ids[k] = t == 0 ? CLS : special ? SEP : word();
      types[k] = t >= L / 2 ? 1 : 0;
      if (special || uniform() >= 0.15) continue;
      labels[k] = ids[k];
      ++out.masked;
      const double r = uniform();
      if (r < 0.8) ids[k] = MASK;
      else if (r < 0.9) ids[k] = word();
    }
  for (auto& y : nsp) y = uniform() < 0.5 ? 0 : 1;
  const Shape s = {B, L};
  out.ids = from_vector(ids, s);
  out.types = from_vector(types, s);
  out.labels = from_vector(labels, s);
  out.nsp = from_vector(nsp, {B});
  return out;
}

bool parse_int(const char* s, int64_t lo, int64_t& v) {
  char* end = nullptr;
  const long long x = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || x < lo) return false;
  v = x;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bench::DataParallel dp(&argc, &argv);  // under mpirun: each rank takes B / ranks rows
  int64_t steps = 10, warmup = 2, threads = 0, seed = 0;
  double dropout = 0.1;
  bool bf16 = false, overlap = true;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--bf16" || flag == "--dp-no-overlap") {
      (flag == "--bf16" ? bf16 : overlap) = flag == "--bf16";
      --i;  // no value
      continue;
    }
    if (flag == "--dropout" && i + 1 < argc) {  // as the reference's --dropout (diagnostics)
      char* end = nullptr;
      dropout = std::strtod(argv[i + 1], &end);
      if (end != argv[i + 1] && *end == '\0' && dropout >= 0 && dropout < 1) continue;
    }
    int64_t* target = flag == "--steps" ? &steps : flag == "--warmup" ? &warmup
                    : flag == "--threads" ? &threads : flag == "--seed" ? &seed : nullptr;
    if (!target || i + 1 >= argc || !parse_int(argv[i + 1], flag == "--steps" || flag == "--threads" ? 1 : 0, *target)) {
      std::fprintf(stderr, "bench_bert_mlm: bad argument '%s'\nusage: bench_bert_mlm [--threads N>=1] "
                   "[--steps N>=1] [--warmup N>=0] [--seed N>=0] [--dropout P in [0, 1)] [--bf16] [--dp-no-overlap]\n", argv[i]);
      return 2;
    }
  }
  if (threads > 0) omp_set_num_threads(int(threads));
  const int64_t V = 30522, B = 16, L = 128;
  manual_seed(uint64_t(seed));
  models::BertConfig c = models::BertConfig::named("mini", V);  // 4 layers of width 256, 4 heads
  c.dropout = dropout;
  models::BertForPreTraining model(c);
  optim::AdamW opt(model.parameters(), {.lr = 1e-4, .weight_decay = 0.01});
  Batch batch = make_batch(B, L, V, uint64_t(seed) + 1);
  const dist::Range mine = dist::shard(B);  // all rows with one process
  for (Tensor* t : {&batch.ids, &batch.types, &batch.labels, &batch.nsp})
    *t = t->narrow(0, mine.begin, mine.count).contiguous();
  dp.attach(model.parameters(), overlap);
  model.train();
  std::vector<double> ms;
  double first = 0, last = 0, cpu = 0;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    opt.zero_grad();
    models::BertPretrainingOutput out;
    {
      AutocastGuard ac(bf16 ? Precision::bf16 : Precision::f32);
      out = model.loss(batch.ids, batch.types, batch.labels, batch.nsp);
    }
    dp.before_backward();
    out.loss.backward();
    dp.after_backward();
    opt.step();
    const double loss = out.loss.item<double>();  // as loss.item() in the reference: a sync point
    const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s == 0) first = loss;
    last = loss;
    if (s >= warmup) ms.push_back(dt), cpu += cpu_ms() - c0;
  }
  double mean = 0;
  for (double x : ms) mean += x / double(ms.size());
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  std::printf(
      "{\"bench\": \"bert_mlm\", \"impl\": \"graft\", \"precision\": \"%s\", \"threads\": %d, \"step_ms_mean\": %.2f, "
      "\"step_ms_median\": %.2f, \"step_ms_min\": %.2f, \"tokens_per_step\": %ld, "
      "\"tokens_per_s\": %.1f, \"rss_peak_mib\": %.1f, \"cpu_ms_per_step\": %.1f, "
      "\"masked_tokens\": %ld, \"params\": %ld, \"loss_first\": %.4f, \"loss_last\": %.4f, "
      "\"dropout\": %g, \"warmup\": %ld, \"steps\": %ld, \"seed\": %ld, \"ranks\": %d}\n",
      bf16 ? "bf16" : "f32", graft::requested_threads(), mean, median, sorted.front(), long(B * L),
      double(B * L) / (mean / 1000.0), vm_hwm_mib(), cpu / double(n), long(batch.masked),
      long(model.num_parameters()), first, last, dropout, long(warmup), long(steps), long(seed),
      dist::world_size());
  return 0;
}
