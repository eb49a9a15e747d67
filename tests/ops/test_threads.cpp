// The OpenMP team governor (ops/threads.h): its rule, its reaction to samples, the /proc reader.
#include <doctest/doctest.h>

#include <chrono>

#include "ops/threads.h"

using namespace graft;

TEST_CASE("threads_for_load leaves the CPUs others use") {
  CHECK(threads_for_load(2, 2, 0.0) == 2);
  CHECK(threads_for_load(2, 2, 0.3) == 2);   // noise: the user's count stands
  CHECK(threads_for_load(2, 2, 0.6) == 1);   // a core mostly taken
  CHECK(threads_for_load(2, 2, 1.0) == 1);
  CHECK(threads_for_load(2, 2, 3.0) == 1);   // never below 1
  CHECK(threads_for_load(8, 8, 2.2) == 6);
  CHECK(threads_for_load(4, 8, 2.0) == 4);   // never above the user's count
  CHECK(threads_for_load(4, 2, 0.0) == 4);   // an idle machine keeps an oversubscribed request
  CHECK(threads_for_load(0, 2, 0.0) == 1);
}

TEST_CASE("ThreadGovernor follows others' load and the user's cap") {
  // 2 CPUs, 100 ticks a second, a decision every 0.5 s
  ThreadGovernor gov(2, 2, 100.0, 0.5);
  CpuSample s{0.0, 1000, 200};
  CHECK(gov.update(s, 2) == 0);               // the first sample only starts the clock
  s = {0.2, 1040, 230};
  CHECK(gov.update(s, 2) == 0);               // too soon
  // 1 s later: the machine used 200 ticks, this process 100 -> others 1 CPU
  s = {1.0, 1200, 300};
  CHECK(gov.update(s, 2) == 1);
  CHECK(gov.others() == doctest::Approx(1.0));
  // others stop: back to the 2 the user asked for
  s = {2.0, 1300, 400};
  CHECK(gov.update(s, 1) == 2);
  CHECK(gov.others() == doctest::Approx(0.0));
  // the user lowers the team to 1: it stays 1 on an idle machine
  s = {3.0, 1400, 500};
  CHECK(gov.update(s, 1) == 1);
  // a process on a machine with more CPUs than it may use: others' work there does not count
  ThreadGovernor pinned(2, 4, 100.0, 0.5);
  CHECK(pinned.update({0.0, 0, 0}, 2) == 0);
  CHECK(pinned.update({1.0, 200, 0}, 2) == 2);   // 2 CPUs busy elsewhere: on the other 2
  CHECK(pinned.update({2.0, 500, 0}, 2) == 1);   // 3 CPUs busy: one of them is ours
}

TEST_CASE("read_cpu_sample sees this process's CPU time grow") {
  CpuSample a, b;
  REQUIRE(read_cpu_sample(a));
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < until) x = x + 1.0;
  REQUIRE(read_cpu_sample(b));
  CHECK(b.self_busy > a.self_busy);
  CHECK(b.machine_busy >= a.machine_busy + (b.self_busy - a.self_busy) / 2);
  CHECK(b.wall_s - a.wall_s >= 0.15);
}
