// Grad mode: whether new ops record themselves on the tape (per thread, like PyTorch). The flag
// is a field of the thread's AutogradContext (autograd/context.h); the guards are ContextGuards,
// so each restores the whole thread context when its scope ends.
#pragma once
#include "autograd/context.h"

namespace graft {

struct GradMode {
  static bool is_enabled() { return autograd_context().grad_enabled; }
  static void set_enabled(bool e) { autograd_context().grad_enabled = e; }
};

// Disables recording for its scope: `{ NoGradGuard g; w.add_(dw, -lr); }`.
class NoGradGuard : public ContextGuard {
 public:
  NoGradGuard() { GradMode::set_enabled(false); }
};

// Sets grad mode to `enabled` for its scope (the engine uses it for create_graph).
class GradModeGuard : public ContextGuard {
 public:
  explicit GradModeGuard(bool enabled) { GradMode::set_enabled(enabled); }
};

}  // namespace graft
