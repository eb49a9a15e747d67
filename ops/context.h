// The kernel layer's per-thread modes, in one struct.
//
// Everything ops/ decides per thread lives here, and nowhere else: which CPU kernel table
// backend_for(cpu) returns, whether f32 products may call oneDNN, who watches storages being
// made and freed, and which generator drew last. The layer above (autograd/context.h) adds its
// own modes (grad mode, autocast precision, the tracing hooks) and saves and restores both
// structs as one graft::ThreadContext; ops/ never sees those.
//
// A kernel's numerical choices are its arguments, not modes: the precision of a matmul is the
// `prec` parameter of the matmul kernel (ops/kernel_list.h), decided by the autograd op.
#pragma once

namespace graft {

struct Backend;
struct StorageObserver;
struct Generator;

struct OpsContext {
  // backend_for(cpu) returns the scalar reference kernels (tests compare the two tables).
  bool reference_kernels = false;
  // f32 matmul / linear may call oneDNN; off: graft's own kernel (graft::compile replays with
  // it off, since oneDNN's execute allocates).
  bool onednn = true;
  // non-null: backend_for(cpu) returns this table (graft::compile's recording table).
  const Backend* cpu_override = nullptr;
  // told about every CPU storage made or freed on this thread (graft::compile, benchmarks).
  StorageObserver* storage_observer = nullptr;
  // the generator that advanced last on this thread (graft::compile ties each traced random
  // kernel to it). State rather than a mode, kept here so that one snapshot holds all of it.
  Generator* last_generator = nullptr;

  bool operator==(const OpsContext&) const = default;
};

namespace detail {
// initial-exec: a plain TLS load (no __tls_get_addr call) on the per-op paths that read it.
inline thread_local OpsContext t_ops_context __attribute__((tls_model("initial-exec")));
}  // namespace detail

// This thread's kernel-layer modes (read and written in place).
inline OpsContext& ops_context() { return detail::t_ops_context; }

}  // namespace graft
