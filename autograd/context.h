// graft::ThreadContext: every per-thread mode of the library, saved and restored as one unit.
//
// Two small structs, one per layer, because ops/ knows nothing of autograd:
//
//   OpsContext (ops/context.h)   reference kernels, CPU table override, oneDNN on/off, storage
//                                observer, the generator that drew last
//   AutogradContext (here)       grad mode, autocast precision, and graft::compile's tracing
//                                hooks (the tracer, the host-access hook of Tensor::data)
//
// A ThreadContext is both, by value. Every scoped switch is a ContextGuard: it snapshots the
// whole context when it is made and puts the whole snapshot back when it goes (also when an
// exception leaves the scope), so no switch can leak out of a scope, whichever ones the scope
// changed. NoGradGuard, GradModeGuard (grad_mode.h), AutocastGuard (autocast.h) and
// graft::compile (which installs its tracing hooks and its oneDNN setting) are all ContextGuards.
//
//   { NoGradGuard g; ... }          // grad mode off here, everything as before after
//   { ContextGuard g; ops_context().reference_kernels = true; ... }   // any field, scoped
//
// The modes that change what a traced plan computes (plan_modes) are part of graft::compile's
// plan key: a plan traced in f32 is never replayed under autocast, nor one traced with the
// reference kernels on the fast ones.
#pragma once
#include "ops/context.h"
#include "ops/dtype.h"

namespace graft {

class Tensor;
namespace trace {
class Tracer;
}  // namespace trace

struct AutogradContext {
  // ops record themselves on the tape (graft::GradMode).
  bool grad_enabled = true;
  // the precision CPU float32 matmul / linear run in (graft::AutocastGuard).
  Precision autocast = Precision::f32;
  // set while graft::compile traces: told about every Tensor::data<T>() access, so that a host
  // read of a value computed inside the trace is reported instead of frozen into the plan.
  void (*host_access)(const Tensor&) = nullptr;
  // the tracer of the compiled function being traced on this thread (nullptr: none).
  trace::Tracer* tracer = nullptr;

  bool operator==(const AutogradContext&) const = default;
};

namespace detail {
inline thread_local AutogradContext t_autograd_context __attribute__((tls_model("initial-exec")));
}  // namespace detail

// This thread's autograd modes (read and written in place).
inline AutogradContext& autograd_context() { return detail::t_autograd_context; }

// Both layers' modes of the calling thread, by value.
struct ThreadContext {
  OpsContext ops;
  AutogradContext autograd;

  static ThreadContext current() { return {ops_context(), autograd_context()}; }
  // Makes this the calling thread's context.
  void install() const {
    ops_context() = ops;
    autograd_context() = autograd;
  }
  bool operator==(const ThreadContext&) const = default;
};

// The modes a traced plan depends on (graft::compile keys its plans by them). oneDNN is not
// here: a compiled function sets it from its CompileOptions for every call.
struct PlanModes {
  Precision autocast;
  bool grad_enabled;
  bool reference_kernels;
  bool operator==(const PlanModes&) const = default;
};
inline PlanModes plan_modes(const ThreadContext& c) {
  return {c.autograd.autocast, c.autograd.grad_enabled, c.ops.reference_kernels};
}

// Saves the whole context; restores it on destruction. Change any field inside its scope.
class ContextGuard {
 public:
  ContextGuard() : saved_(ThreadContext::current()) {}
  ~ContextGuard() { saved_.install(); }
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;
  // The context as it was when the guard was made.
  const ThreadContext& saved() const { return saved_; }

 private:
  ThreadContext saved_;
};

}  // namespace graft
