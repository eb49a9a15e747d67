// Ctrl-C handling shared by nn::Trainer and the CLI: see nn/interrupt.h.
#include "nn/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <fmt/format.h>

namespace graft::nn {

namespace {

// The handler only touches these (lock-free atomics) and write(2): async-signal-safe.
std::atomic<int> g_signal{0};
std::atomic<int> g_depth{0};  // live InterruptHandler objects
static_assert(std::atomic<int>::is_always_lock_free, "the signal flag must be lock-free");
struct sigaction g_old_int {}, g_old_term {};

void on_signal(int sig) {
  if (g_signal.exchange(sig) != 0) {
    // The second signal: restore the default action and re-raise it. The signal stays blocked
    // while this handler runs, so it is delivered, and kills the process, as soon as we return.
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
    raise(sig);
    return;
  }
  static const char msg[] =
      "\ngraft: interrupted; stopping at the next safe point (a training run finishes its step "
      "and saves a checkpoint); press Ctrl-C again to quit at once\n";
  ssize_t r = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)r;
}

}  // namespace

Interrupted::Interrupted(const std::string& where)
    : Error(fmt::format("interrupted{}{}", where.empty() ? "" : " during ", where)) {}

InterruptHandler::InterruptHandler() {
  if (g_depth.fetch_add(1) != 0) return;
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptHandler::~InterruptHandler() {
  if (g_depth.fetch_sub(1) != 1) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

bool InterruptHandler::active() { return g_depth.load() > 0; }

int interrupt_signal() { return g_signal.load(); }

void check_interrupt(const char* where) {
  if (g_signal.load() != 0) throw Interrupted(where ? where : "");
}

void set_interrupt_for_testing(int sig) { g_signal.store(sig); }

}  // namespace graft::nn
