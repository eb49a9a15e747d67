// Small helpers shared by the training benchmarks (bench_*.cpp): process CPU time, peak RSS,
// a child process's output, and data parallelism under mpirun.
#pragma once

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "nn/distributed.h"

namespace graft::bench {

// Everything that can be read from `fd` (e.g. the read end of a child's stdout pipe) until end
// of file; then closes it.
inline std::string read_to_end(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  close(fd);
  return out;
}

// CPU time of the whole process (all threads), in ms: steadier than wall time on a busy host.
inline double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

// Peak resident set size so far (VmHWM in /proc/self/status), in MiB; 0 if unavailable.
inline double vm_hwm_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

// Under mpirun (bench/dp_scaling.sh): each rank trains on its share of the batch and the
// gradients are averaged by dist::GradReducer; one process: nothing happens. Usage:
//   bench::DataParallel dp(&argc, &argv);          // first thing in main
//   Range rows = dist::shard(B); ... dp.attach(model.parameters(), overlap);
//   dp.before_backward(); loss.backward(); dp.after_backward(); opt.step();
struct DataParallel {
  dist::Session session;
  std::unique_ptr<dist::GradReducer> reducer;
  DataParallel(int* argc, char*** argv) : session(argc, argv) {
    if (dist::rank() > 0 && !std::freopen("/dev/null", "w", stdout)) std::perror("freopen");
  }
  void attach(std::vector<Tensor> params, bool overlap) {
    if (dist::world_size() == 1) return;
    for (Tensor& p : params) {
      Tensor d = p.detach();
      dist::broadcast(d, 0);
    }
    reducer = std::make_unique<dist::GradReducer>(std::move(params), size_t(4) << 20, overlap);
  }
  void before_backward() {
    if (reducer) reducer->arm();
  }
  void after_backward() {
    if (reducer) reducer->finish();
  }
};

}  // namespace graft::bench
