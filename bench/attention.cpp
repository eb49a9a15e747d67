// Fused vs composite scaled dot-product attention, forward + backward, float32.
// For each shape (B, H, T = S, D) and implementation, a forked child process builds q, k, v,
// runs one warm-up and `reps` timed fwd+bwd passes, and reports the median time and the peak
// resident memory above what it held before the first pass (VmHWM - VmRSS, so each row's
// peak is its own). One JSON object per line:
//   {"name": "attention_fwd_bwd", "impl": "fused"|"composite", "B":8, "H":4, "T":512, "D":64,
//    "ms": median, "peak_extra_mib": MiB, "threads": n}
// then, per shape, {"name": "attention_fused_speedup", "value": composite ms / fused ms,
//   "mem_ratio": composite MiB / fused MiB}.
// Usage: bench_attention [--quick | --workloads]   (--quick: T = 128, 512 only, fewer reps;
// --workloads: the attention calls of the BERT-mini and Transformer benchmarks, dropout 0.1 and
// padding masks, timed in process CPU ms ("cpu_ms") as well as wall ms, since the machine is shared)
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ops/threads.h"
#include "autograd/attention.h"
#include "autograd/functions.h"
#include "bench/bench_util.h"

using namespace graft;

namespace {

double status_mib(const char* key) {  // VmRSS / VmHWM from /proc/self/status, in MiB
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::strlen(key))) / 1024.0;
  return 0;
}
void reset_hwm() {  // "5" resets VmHWM to the current RSS (Linux >= 4.0)
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

struct Shape4 {
  int64_t B, H, T, D;
  bool causal = true;
  bool pad_mask = false;  // key padding mask [B, 1, 1, S]: batch b masks its last b % 8 * S / 32 keys
  double dropout = 0.0;
};

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

void child(const Shape4& s, AttentionImpl impl, int reps) {
  Generator g(1);
  TensorOptions o = TensorOptions(DType::f32).requires_grad();
  Tensor q = randn({s.B, s.H, s.T, s.D}, o, &g), k = randn({s.B, s.H, s.T, s.D}, o, &g);
  Tensor v = randn({s.B, s.H, s.T, s.D}, o, &g);
  Tensor w = randn({s.B, s.H, s.T, s.D}, DType::f32, &g);
  AttentionOptions ao;
  ao.is_causal = s.causal;
  ao.impl = impl;
  ao.dropout_p = s.dropout;
  ao.generator = &g;
  if (s.pad_mask) {
    std::vector<double> keep(size_t(s.B * s.T), 1.0);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t j = s.T - b % 8 * s.T / 32; j < s.T; ++j) keep[size_t(b * s.T + j)] = 0.0;
    ao.attn_mask = from_vector(keep, {s.B, 1, 1, s.T}).to(DType::b8);
  }
  auto pass = [&] {
    q.set_grad({});
    k.set_grad({});
    v.set_grad({});
    Tensor out = scaled_dot_product_attention(q, k, v, ao);
    sum(out * w).backward();
  };
  const double base = status_mib("VmRSS:");
  reset_hwm();
  pass();
  std::vector<double> t, tc;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    pass();
    tc.push_back(cpu_ms() - c0);
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  std::sort(tc.begin(), tc.end());
  const double peak = status_mib("VmHWM:") - base;
  std::printf(
      "{\"name\": \"attention_fwd_bwd\", \"impl\": \"%s\", \"B\": %ld, \"H\": %ld, \"T\": %ld, "
      "\"D\": %ld, \"causal\": %s, \"pad_mask\": %s, \"dropout\": %.2f, \"ms\": %.2f, "
      "\"cpu_ms\": %.2f, \"peak_extra_mib\": %.1f, \"threads\": %d}\n",
      impl == AttentionImpl::fused ? "fused" : "composite", long(s.B), long(s.H), long(s.T),
      long(s.D), s.causal ? "true" : "false", s.pad_mask ? "true" : "false", s.dropout,
      t[t.size() / 2], tc[tc.size() / 2], peak, graft::requested_threads());
  std::fflush(stdout);
}

// Runs child() in a fresh process; returns its (ms, MiB) by re-reading its JSON line.
std::pair<double, double> measure(const Shape4& s, AttentionImpl impl, int reps) {
  int fd[2];
  if (pipe(fd) != 0) return {0, 0};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    child(s, impl, reps);
    _exit(0);
  }
  close(fd[1]);
  const std::string out = bench::read_to_end(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  auto field = [&](const char* key) {
    size_t p = out.find(key);
    return p == std::string::npos ? 0.0 : std::stod(out.substr(p + std::strlen(key)));
  };
  return {field("\"ms\": "), field("\"peak_extra_mib\": ")};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool quick = mode == "--quick", workloads = mode == "--workloads";
  std::vector<Shape4> shapes = {{8, 4, 128, 64}, {8, 4, 512, 64}, {8, 8, 512, 64}};
  if (!quick && !workloads) shapes.push_back({8, 4, 2048, 64});
  if (workloads)  // BERT-mini encoder self-attention; Transformer decoder causal self-attention
    shapes = {{16, 4, 128, 64, false, true, 0.1}, {32, 4, 64, 64, true, true, 0.1}};
  for (const Shape4& s : shapes) {
    const int reps = quick ? 3 : (s.T >= 2048 ? 3 : (workloads ? 9 : 5));
    auto [fms, fmem] = measure(s, AttentionImpl::fused, reps);
    auto [cms, cmem] = measure(s, AttentionImpl::composite, reps);
    std::printf(
        "{\"name\": \"attention_fused_speedup\", \"B\": %ld, \"H\": %ld, \"T\": %ld, \"value\": "
        "%.3f, \"unit\": \"x\", \"mem_ratio\": %.2f}\n",
        long(s.B), long(s.H), long(s.T), fms > 0 ? cms / fms : 0.0, fmem > 0 ? cmem / fmem : 0.0);
    std::fflush(stdout);
  }
  return 0;
}
