// graft::nn interrupts — one Ctrl-C policy for every phase of a command (training, evaluation,
// decoding, saving).
//
//   int main() {
//     nn::InterruptHandler on_ctrl_c;           // SIGINT/SIGTERM for the whole command
//     try { ... nn::check_interrupt(); ... }    // at safe points: per batch, per sentence
//     catch (const nn::Interrupted&) { return 130; }
//   }
//
// The first SIGINT or SIGTERM only sets a flag (and prints one fixed line): the code polls it at
// its safe points. nn::Trainer finishes the current step, saves a checkpoint and returns with
// StopReason::interrupted; decoding and evaluation loops call check_interrupt(), which throws
// nn::Interrupted. A second signal restores the default action and re-raises it: the process
// quits at once (exit status 128 + signal number, as the shell reports it).
//
// Without an InterruptHandler in scope, nn::Trainer installs one for the length of fit().
#pragma once
#include <string>

#include "ops/error.h"

namespace graft::nn {

// Thrown by check_interrupt(): the user asked the command to stop. Derives from graft::Error
// so that code that cleans up on errors cleans up here too; catch it first to exit with 130.
class Interrupted : public Error {
 public:
  explicit Interrupted(const std::string& where);
};

// Installs the handler for SIGINT and SIGTERM for its lifetime (nestable: only the outermost
// one installs and restores), and clears any earlier request.
class InterruptHandler {
 public:
  InterruptHandler();
  ~InterruptHandler();
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;
  // True while some InterruptHandler is alive.
  static bool active();
};

// The signal number of the first pending SIGINT/SIGTERM, or 0.
int interrupt_signal();
inline bool interrupt_requested() { return interrupt_signal() != 0; }
// Throws Interrupted("where") when a signal is pending.
void check_interrupt(const char* where);
// For tests: pretend a signal arrived (0 clears).
void set_interrupt_for_testing(int sig);

}  // namespace graft::nn
