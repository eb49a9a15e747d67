// The OpenMP team governor (ops/threads.h): the decision rule, the /proc readers, the hook.
#include "ops/threads.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace graft {

int threads_for_load(int requested, int cpus, double others) {
  requested = std::max(1, requested);
  // less than half a CPU of others' work: the user's count stands (even above `cpus`)
  if (std::lround(std::max(0.0, others)) == 0) return requested;
  // else the CPUs left to this process, rounded: 0.6 CPUs of others' work on 2 CPUs leaves 1
  int free_cpus = int(std::lround(double(cpus) - others));
  return std::clamp(free_cpus, 1, requested);
}

ThreadGovernor::ThreadGovernor(int cpus, int machine_cpus, double ticks_per_s, double interval_s)
    : cpus_(std::max(1, cpus)), machine_cpus_(std::max(cpus_, machine_cpus)),
      ticks_per_s_(ticks_per_s), interval_s_(interval_s) {}

int ThreadGovernor::update(const CpuSample& s, int current) {
  // a team size that is not the one set last was chosen by the user: it is the new cap
  if (requested_ == 0 || current != last_set_) requested_ = current;
  if (!have_last_) {
    last_ = s;
    have_last_ = true;
    last_set_ = current;
    return 0;
  }
  double dt = s.wall_s - last_.wall_s;
  if (dt < interval_s_) return 0;
  // others' CPU time / wall time = CPUs busy with others' work, on the whole machine
  double others_all = double((s.machine_busy - last_.machine_busy) - (s.self_busy - last_.self_busy)) /
                      (ticks_per_s_ * dt);
  // the share of it that can fall outside this process's CPUs does not compete with it
  others_ = std::max(0.0, others_all - double(machine_cpus_ - cpus_));
  last_ = s;
  last_set_ = threads_for_load(requested_, cpus_, others_);
  return last_set_;
}

namespace {

// Reads a whole small /proc file into buf (NUL-terminated); false on failure.
bool read_small_file(const char* path, char* buf, size_t cap) {
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  size_t n = std::fread(buf, 1, cap - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  return n > 0;
}

}  // namespace

bool read_cpu_sample(CpuSample& out) {
  char buf[4096];
  // /proc/stat: "cpu  user nice system idle iowait irq softirq steal ..."
  if (!read_small_file("/proc/stat", buf, sizeof buf)) return false;
  long long v[8] = {};
  if (std::sscanf(buf, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3],
                  &v[4], &v[5], &v[6], &v[7]) < 4)
    return false;
  out.machine_busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // all but idle and iowait
  // /proc/self/stat: "pid (comm) state ..."; utime and stime are fields 14 and 15, the 12th
  // and 13th after the parenthesis that ends comm (comm may itself hold spaces and parentheses)
  if (!read_small_file("/proc/self/stat", buf, sizeof buf)) return false;
  const char* p = std::strrchr(buf, ')');
  if (!p) return false;
  long long utime = 0, stime = 0;
  if (std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &utime,
                  &stime) != 2)
    return false;
  out.self_busy = utime + stime;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return true;
}

namespace {

int affinity_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return int(sysconf(_SC_NPROCESSORS_ONLN));
  return CPU_COUNT(&set);
}

bool governor_enabled() {
  const char* e = std::getenv("GRAFT_ADAPT_THREADS");
  return !(e && std::strcmp(e, "0") == 0);
}

// one governor per thread: each thread's team size is its own OpenMP setting
ThreadGovernor& this_thread_governor() {
  thread_local ThreadGovernor gov(affinity_cpus(), int(sysconf(_SC_NPROCESSORS_ONLN)),
                                  double(sysconf(_SC_CLK_TCK)));
  return gov;
}
thread_local int t_last_set = 0;  // the team size adapt_threads_to_load set last on this thread

}  // namespace

int requested_threads() {
  int current = omp_get_max_threads();
  // the user changed it since the governor's last change, or the governor never changed it
  if (t_last_set == 0 || current != t_last_set) return current;
  return std::max(current, this_thread_governor().requested());
}

void adapt_threads_to_load() {
  static const bool enabled = governor_enabled();
  if (!enabled || omp_in_parallel()) return;
  ThreadGovernor& gov = this_thread_governor();
  thread_local double next_s = 0;
  double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now < next_s) return;
  next_s = now + 0.1;  // the /proc reads at most 10 times a second
  CpuSample s;
  if (!read_cpu_sample(s)) return;
  int current = omp_get_max_threads();
  int n = gov.update(s, current);
  if (n > 0 && n != current) {
    omp_set_num_threads(n);
    t_last_set = n;
  }
}

}  // namespace graft
