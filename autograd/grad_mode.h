// Grad mode: whether new ops record themselves on the tape (thread-local, like PyTorch).
#pragma once

namespace graft {

struct GradMode {
  static bool is_enabled() { return enabled_; }
  static void set_enabled(bool e) { enabled_ = e; }

 private:
  // initial-exec: a plain TLS load instead of a __tls_get_addr call on every op
  static inline thread_local bool enabled_ __attribute__((tls_model("initial-exec"))) = true;
};

// Disables recording for its scope: `{ NoGradGuard g; w.add_(dw, -lr); }`.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Sets grad mode to `enabled` for its scope (the engine uses it for create_graph).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(GradMode::is_enabled()) {
    GradMode::set_enabled(enabled);
  }
  ~GradModeGuard() { GradMode::set_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace graft
