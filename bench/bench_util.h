// Small helpers shared by the training benchmarks (bench_*.cpp): process CPU time and peak RSS.
#pragma once

#include <ctime>
#include <fstream>
#include <string>

namespace graft::bench {

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

}  // namespace graft::bench
