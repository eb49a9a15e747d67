// Training throughput of an LSTM encoder-decoder with Bahdanau attention on the workload of
// ../shared/bench-ref/lstm_seq2seq.py: vocab 1000, embedding 128, hidden 256, batch 32, source
// and target length 20, random tokens with target = reversed source (<bos> = 1 prefix),
// teacher forcing, cross-entropy, Adam (lr 1e-3), 3 warm-up + 20 timed steps.
//
// Two variants, each in its own process (so that peak RSS is its own):
//   exact  the reference script's model, built from graft's nn layers: Embedding -> LSTM
//          encoder; per decoder step additive attention v^T tanh(W s_{t-1} + U h_j) (U h
//          precomputed once per batch), LSTMCell([emb(y_{t-1}); ctx]), logits = Linear([s_t; ctx])
//          (2H -> V); the per-step [s_t; ctx] are stacked and projected in one matmul.
//   model  models::Seq2Seq (cell lstm, attention bahdanau, embed 128, hidden 256): the same
//          encoder, attention and cell, plus Luong's h~ = tanh(W_c [c; h]) before W_out (H -> V).
// One JSON line per (variant, threads):
//   {"name": "lstm_seq2seq", "variant", "threads", "step_ms_mean", "step_ms_median",
//    "step_ms_min", "cpu_ms_per_step", "tgt_tokens_per_s", "src_tgt_tokens_per_s",
//    "peak_rss_mib" (VmHWM), "params", "loss_first", "loss_last"}
// With --ref SCRIPT the PyTorch script runs too, in the same run, right after graft at each
// thread count (/usr/bin/python3 -B SCRIPT --threads N), its line is passed through, and a line
//   {"name": "lstm_seq2seq_vs_torch", "threads", "graft_ms_median", "torch_ms_median",
//    "speedup", "graft_cpu_ms_per_step", "torch_cpu_ms_per_step", "cpu_speedup",
//    "graft_rss_mib", "torch_rss_mib"}
// compares the exact variant with it (torch's CPU time per step comes from the difference
// with a second, 1-step run of the script).
// Usage: bench_lstm_seq2seq [--threads N (default: 1 then 2)] [--variant exact|model|both]
//                           [--steps 20] [--warmup 3] [--ref path/to/lstm_seq2seq.py]
#include <omp.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "ops/threads.h"
#include "bench/bench_util.h"
#include "autograd/functions.h"
#include "autograd/ops_rnn.h"
#include "models/seq2seq.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "nn/rnn.h"
#include "nn/rnn_attention.h"
#include "bench/timing.h"

extern char** environ;
using namespace graft;

namespace {

constexpr int64_t V = 1000, E = 128, H = 256, B = 32, S = 20, T = 20, kBos = 1;

using bench::cpu_ms;
using bench::vm_hwm_mib;

// The reference script's model, in graft's nn layers (see the header comment).
struct ExactModel : nn::Module {
  ExactModel() {
    src_emb = register_module("src_emb", std::make_shared<nn::Embedding>(V, E));
    tgt_emb = register_module("tgt_emb", std::make_shared<nn::Embedding>(V, E));
    encoder = register_module("encoder", std::make_shared<nn::LSTM>(E, H));
    att = register_module("att", std::make_shared<nn::BahdanauAttention>(H, H, H));
    cell = register_module("cell", std::make_shared<nn::LSTMCell>(E + H, H));
    out = register_module("out", std::make_shared<nn::Linear>(2 * H, V));
  }
  Tensor logits(const Tensor& src, const Tensor& tgt_in) {  // [B, S], [B, T] -> [B, T, V]
    nn::RnnOutput r = encoder->forward(src_emb->forward(src));  // enc [B, S, H]
    const Tensor& enc = r.output;
    att->precompute(enc);  // U h_j once for all decoder steps
    nn::RnnState s{r.state.h.select(0, 0), r.state.c.select(0, 0)};
    std::vector<Tensor> emb = unstack(tgt_emb->forward(tgt_in), 1);  // T x [B, E]
    std::vector<Tensor> feats;
    for (int64_t t = 0; t < tgt_in.size(1); ++t) {
      nn::AttentionOutput a = att->attend(s.h, enc, Tensor(), t);  // ctx [B, H]
      s = cell->forward(cat({emb[size_t(t)], a.context}, 1), s);
      feats.push_back(cat({s.h, a.context}, 1));  // [B, 2H]
    }
    return out->forward(stack(feats, 1));  // [B, T, 2H] -> [B, T, V]
  }
  std::shared_ptr<nn::Embedding> src_emb, tgt_emb;
  std::shared_ptr<nn::LSTM> encoder;
  std::shared_ptr<nn::BahdanauAttention> att;
  std::shared_ptr<nn::LSTMCell> cell;
  std::shared_ptr<nn::Linear> out;
};

struct Result {
  std::vector<double> ms;
  double cpu_ms_per_step = 0, loss_first = 0, loss_last = 0;
  int64_t params = 0;
};

using graft::bench::median;

bench::DataParallel* g_dp = nullptr;  // under mpirun (one-measurement mode): this rank's share
bool g_dp_overlap = true;             // --dp-no-overlap: all-reduce after backward

// Runs warmup + steps training steps of one variant in this process.
Result run_variant(const std::string& variant, int64_t warmup, int64_t steps) {
  manual_seed(0);
  Generator g(0);
  std::vector<std::vector<int64_t>> src(static_cast<size_t>(B)), tgt(static_cast<size_t>(B));
  std::vector<int64_t> src_flat, tgt_flat, tin_flat;  // [B, S], [B, T]
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < S; ++j)
      src[size_t(b)].push_back(2 + int64_t(philox_uniform(g.seed, g.advance(1)) * double(V - 2)));
    tgt[size_t(b)].assign(src[size_t(b)].rbegin(), src[size_t(b)].rbegin() + T);
    src_flat.insert(src_flat.end(), src[size_t(b)].begin(), src[size_t(b)].end());
    tgt_flat.insert(tgt_flat.end(), tgt[size_t(b)].begin(), tgt[size_t(b)].end());
    tin_flat.push_back(kBos);
    tin_flat.insert(tin_flat.end(), tgt[size_t(b)].begin(), tgt[size_t(b)].end() - 1);
  }
  // under mpirun each rank trains on its rows [begin, begin + n) of the batch
  const dist::Range mine = dist::shard(B);
  const int64_t n = mine.count;
  src = {src.begin() + mine.begin, src.begin() + mine.begin + n};
  tgt = {tgt.begin() + mine.begin, tgt.begin() + mine.begin + n};
  Result res;
  std::unique_ptr<ExactModel> exact;
  std::unique_ptr<models::Seq2Seq> model;
  data::Seq2SeqBatch batch;
  Tensor src_t = from_vector(src_flat, {B, S}).narrow(0, mine.begin, n).contiguous(),
         tin_t = from_vector(tin_flat, {B, T}).narrow(0, mine.begin, n).contiguous(),
         tgt_t = from_vector(tgt_flat, {B * T}).narrow(0, mine.begin * T, n * T).contiguous();
  std::vector<Tensor> params;
  if (variant == "exact") {
    exact = std::make_unique<ExactModel>();
    params = exact->parameters();
  } else {
    // the model's <eos> makes the target one longer: feed T - 1 tokens so tgt_in has T
    for (auto& t : tgt) t.pop_back();
    batch = data::make_seq2seq_batch(src, tgt);
    model = std::make_unique<models::Seq2Seq>(models::Seq2SeqOptions{
        .src_vocab = V, .tgt_vocab = V, .embed = E, .hidden = H, .cell = "lstm", .attention = "bahdanau"});
    model->train();
    params = model->parameters();
  }
  for (const Tensor& p : params) res.params += p.numel();
  if (g_dp) g_dp->attach(params, g_dp_overlap);
  optim::Adam opt(params, {.lr = 1e-3});
  double cpu_total = 0;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    opt.zero_grad();
    Tensor loss;
    if (exact)
      loss = cross_entropy(exact->logits(src_t, tin_t).reshape({n * T, V}), tgt_t);
    else
      loss = model->loss(batch).loss;
    if (g_dp) g_dp->before_backward();
    loss.backward();
    if (g_dp) g_dp->after_backward();
    opt.step();
    const double l = loss.item();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s == 0) res.loss_first = l;
    res.loss_last = l;
    if (s >= warmup) res.ms.push_back(ms), cpu_total += cpu_ms() - c0;
  }
  res.cpu_ms_per_step = cpu_total / double(steps);
  return res;
}

// Runs argv as a child process; returns its stdout (echoed unless quiet) and adds the child's
// CPU time (user + system, all threads, ms) to *cpu_ms if given.
std::string run_child(const std::vector<std::string>& args, double* cpu_ms = nullptr, bool quiet = false) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return {};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pipefd[0]);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  const std::string out = bench::read_to_end(pipefd[0]);
  if (rc != 0) {
    std::fprintf(stderr, "bench_lstm_seq2seq: cannot start %s\n", argv[0]);
    return {};
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  if (cpu_ms)
    *cpu_ms += double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
               double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-3;
  if (!quiet) std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return out;
}

// The number after "key": in a JSON line (0 if absent).
double json_number(const std::string& line, const std::string& key) {
  size_t p = line.find("\"" + key + "\":");
  return p == std::string::npos ? 0.0 : std::atof(line.c_str() + p + key.size() + 3);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 20, warmup = 3, threads = 0;
  std::string variant = "both", ref;
  for (int i = 1; i < argc; i += 2) {
    if (std::strcmp(argv[i], "--dp-no-overlap") == 0) {
      g_dp_overlap = false;
      --i;  // no value
      continue;
    }
    if (i + 1 >= argc) break;
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::max<int64_t>(1, std::stoll(argv[i + 1]));
    else if (std::strcmp(argv[i], "--warmup") == 0) warmup = std::max<int64_t>(0, std::stoll(argv[i + 1]));
    else if (std::strcmp(argv[i], "--threads") == 0) threads = std::stoll(argv[i + 1]);
    else if (std::strcmp(argv[i], "--variant") == 0) variant = argv[i + 1];
    else if (std::strcmp(argv[i], "--ref") == 0) ref = argv[i + 1];
  }
  if (threads > 0 && variant != "both") {  // one measurement in this process
    bench::DataParallel dp(&argc, &argv);  // under mpirun: the batch split over the ranks
    g_dp = &dp;
    omp_set_num_threads(int(threads));
    Result r = run_variant(variant, warmup, steps);
    const double mean = std::accumulate(r.ms.begin(), r.ms.end(), 0.0) / double(r.ms.size());
    std::printf(
        "{\"name\": \"lstm_seq2seq\", \"variant\": \"%s\", \"threads\": %d, \"step_ms_mean\": %.2f, "
        "\"step_ms_median\": %.2f, \"step_ms_min\": %.2f, \"cpu_ms_per_step\": %.1f, "
        "\"tgt_tokens_per_s\": %.1f, \"src_tgt_tokens_per_s\": %.1f, \"peak_rss_mib\": %.1f, "
        "\"params\": %ld, \"loss_first\": %.4f, \"loss_last\": %.4f, \"steps\": %ld, \"ranks\": %d}\n",
        variant.c_str(), graft::requested_threads(), mean, median(r.ms),
        *std::min_element(r.ms.begin(), r.ms.end()), r.cpu_ms_per_step, double(B * T) / (mean / 1e3),
        double(B * (S + T)) / (mean / 1e3), vm_hwm_mib(), long(r.params), r.loss_first, r.loss_last,
        long(steps), dist::world_size());
    g_dp = nullptr;
    return 0;
  }
  // Driver: one child process per (threads, variant), then the reference script.
  char exe[4096] = {};
  if (readlink("/proc/self/exe", exe, sizeof exe - 1) <= 0) std::strcpy(exe, argv[0]);
  const std::string self = exe;
  std::vector<int64_t> thread_list = threads > 0 ? std::vector<int64_t>{threads} : std::vector<int64_t>{1, 2};
  std::vector<std::string> variants = variant == "both" ? std::vector<std::string>{"exact", "model"}
                                                        : std::vector<std::string>{variant};
  for (int64_t n : thread_list) {
    std::string exact_line;
    for (const std::string& v : variants) {
      std::string line = run_child({self, "--threads", std::to_string(n), "--variant", v, "--steps",
                                    std::to_string(steps), "--warmup", std::to_string(warmup)});
      if (v == "exact") exact_line = line;
    }
    if (ref.empty()) continue;
    // torch's CPU time per step: (CPU of this run - CPU of a 1-step run) / the extra steps
    // (the import and model setup cancel out); steadier than wall time on a loaded machine
    double cpu_full = 0, cpu_one = 0;
    std::string tl = run_child({"/usr/bin/python3", "-B", ref, "--threads", std::to_string(n),
                                "--warmup", std::to_string(warmup), "--steps", std::to_string(steps)},
                               &cpu_full);
    run_child({"/usr/bin/python3", "-B", ref, "--threads", std::to_string(n), "--warmup", "0",
               "--steps", "1"}, &cpu_one, true);
    if (exact_line.empty() || tl.empty()) continue;
    const double gm = json_number(exact_line, "step_ms_median"), tm = json_number(tl, "step_ms_median");
    const double gc = json_number(exact_line, "cpu_ms_per_step"),
                 tc = (cpu_full - cpu_one) / double(warmup + steps - 1);
    std::printf("{\"name\": \"lstm_seq2seq_vs_torch\", \"threads\": %ld, \"graft_ms_median\": %.2f, "
                "\"torch_ms_median\": %.2f, \"speedup\": %.2f, \"graft_cpu_ms_per_step\": %.1f, "
                "\"torch_cpu_ms_per_step\": %.1f, \"cpu_speedup\": %.2f, \"graft_rss_mib\": %.1f, "
                "\"torch_rss_mib\": %.1f}\n",
                long(n), gm, tm, gm > 0 ? tm / gm : 0.0, gc, tc, gc > 0 ? tc / gc : 0.0,
                json_number(exact_line, "peak_rss_mib"), json_number(tl, "rss_peak_mib"));
    std::fflush(stdout);
  }
  return 0;
}
