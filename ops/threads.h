// OpenMP team size on a shared machine.
//
// libgomp's default wait policy spins between parallel regions. On an idle machine that is what
// makes many small regions cheap, but when another process keeps a core busy the spinning
// thread and that process take turns on the core, and every region waits for the descheduled
// thread: 2 threads then run a step 2-3x slower than 1 thread. A passive wait policy fixes the
// busy case but doubles the idle step time (each region pays a futex wake-up), and the policy
// can only be chosen before libgomp starts (environment variables read at load time).
//
// So graft keeps the spinning policy and sizes its team from the machine's load instead: every
// `interval_s` (0.25 s) the thread that runs backward() compares the CPU time the whole machine
// used (/proc/stat) with the CPU time this process used (/proc/self/stat). What others used is
// a number of busy CPUs; graft's team becomes round(cpus - others), between 1 and the count
// the user asked for (OMP_NUM_THREADS, --threads or omp_set_num_threads), and is raised again
// when the others stop. GRAFT_ADAPT_THREADS=0 turns it off.
#pragma once

#include <cstdint>

namespace graft {

// One reading of the CPU clocks, in clock ticks (USER_HZ).
struct CpuSample {
  double wall_s = 0;        // steady clock, seconds
  int64_t machine_busy = 0; // all CPUs' non-idle ticks (/proc/stat "cpu" line)
  int64_t self_busy = 0;    // this process's user + system ticks (/proc/self/stat)
};

// The team size for `requested` threads on `cpus` CPUs of which `others` (a count of CPUs,
// fractional) are busy with other processes' work.
int threads_for_load(int requested, int cpus, double others);

class ThreadGovernor {
 public:
  // `cpus`: the CPUs this process may run on, of `machine_cpus` that /proc/stat counts;
  // `ticks_per_s`: the unit of CpuSample's ticks.
  ThreadGovernor(int cpus, int machine_cpus, double ticks_per_s, double interval_s = 0.25);
  // Takes a sample; returns the team size to use, or 0 while less than interval_s has passed
  // since the last decision (and for the first sample). `current` is the team size in force.
  int update(const CpuSample& s, int current);
  double others() const { return others_; }
  // the user's team size as last seen (0 before the first update)
  int requested() const { return requested_; }

 private:
  int cpus_, machine_cpus_;
  double ticks_per_s_, interval_s_;
  CpuSample last_{};
  bool have_last_ = false;
  int requested_ = 0, last_set_ = 0;
  double others_ = 0;
};

// Reads the clocks of this machine and process (false where /proc is not readable).
bool read_cpu_sample(CpuSample& out);

// Applies the governor to this thread's OpenMP team; cheap enough to call once per step (a clock
// read, and two small /proc reads every interval). Does nothing inside a parallel region.
void adapt_threads_to_load();

// This thread's team size as the user set it (what the governor lowers, never raises past);
// omp_get_max_threads() when the governor has not changed it. For reports ("threads": N).
int requested_threads();

}  // namespace graft
