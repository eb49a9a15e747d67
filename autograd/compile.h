// graft::compile — traced step graphs.
//
// A function of tensors (a training step: forward, loss, backward; or inference) is run once per
// input signature with a *recording* kernel table installed (ops/kernels.h: while tracing,
// backend_for(cpu) returns it). Every kernel call is recorded — which kernel, every TensorView
// argument as (buffer, byte offset, shape, strides, dtype), the scalars — and executed, so the
// tracing call computes the eager results. The recorded kernel list is then optimised:
//
//   1. dead-code elimination: kernels whose outputs nobody reads and that write nothing that
//      outlives the call are dropped;
//   2. elementwise fusion: runs of consecutive elementwise kernels over same-size contiguous
//      buffers execute tile by tile (a few KB per tile), so a chain stays in L1/L2;
//   3. in-place reuse: an elementwise kernel's output takes the buffer of an input that dies there;
//   4. liveness and one arena: each buffer made inside the function lives from its first to its
//      last use; an offline best-fit layout packs them into one 64-byte aligned arena.
//
// Replaying the plan runs the kernel list on the arena with no heap allocation at all.
//
//   graft::CompiledFunction step = graft::compile(
//       [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
//         Tensor loss = cross_entropy(model.forward(in[0]), in[1]);
//         loss.backward();
//         return {loss};
//       },
//       model.parameters());            // the state the function reads and writes
//   for (...) { const Tensor& loss = step({x, y})[0]; opt.step(); }   // optimiser outside
//
// Rules (each broken rule is a graft::Error, never a silently wrong plan):
//  * Buffers are one of: made inside the function (arena, or pinned when they outlive it), part
//    of an input (rebound by position on every call), or part of the declared `state` tensors
//    and their .grad (fixed addresses, kept alive by the plan). Any other tensor the function
//    captures must be passed as an input or declared as state.
//  * Data-dependent host code is reported: reading on the host (data<T>(), item(), to_vector())
//    a value computed inside the trace, or a floating input/parameter, raises
//    "compile: data-dependent ...". Integer inputs may be read (ops validate class indices);
//    cross_entropy's mean divides by the number of non-ignored targets, so the plan checks that
//    count on every call and traces a new plan when it changes.
//  * Random kernels (dropout) draw a fresh offset from their generator on every replay, so masks
//    differ per step exactly as in eager mode. The generator must outlive the compiled function.
//  * The returned tensors, and .grad tensors the trace created, are handles owned by the plan and
//    refreshed in place by each replay (copy them to keep a value across calls).
//  * Keep the optimiser update (changing lr, bias corrections) outside the traced function: its
//    scalars would be frozen. zero_grad(set_to_none) between calls is fine: a plan traced with
//    no .grad re-attaches its gradient tensors after each replay.
//  * A new input shape (or dtype-equal, differently strided input) traces and caches a new plan;
//    the input count and dtypes are fixed by the first call. So do new plan modes (PlanModes in
//    autograd/context.h: autocast precision, grad mode, reference kernels): a plan traced in f32
//    is not replayed under AutocastGuard(Precision::bf16), which traces its own.
//  * Autocast behaves as in eager mode: each matmul's precision is an argument of its kernel
//    (decided by the autograd op), recorded and replayed with or without oneDNN.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "ops/kernels.h"

namespace graft {

class CompiledFunction_;  // implementation detail (compile.cpp)

namespace trace {

// The recorded kernels: every kernel of ops/kernel_list.h (its roles column says which
// TensorView arguments each one reads and writes).
enum class Kernel : uint8_t {
#define GRAFT_KERNEL(k, roles, devices, params) k,
#include "ops/kernel_list.h"
};
const char* kernel_name(Kernel k);

enum class BufferKind : uint8_t {
  internal,  // made during the trace and dead when it returned: placed in the arena
  input,     // (part of) input number `input`: rebound on every call
  state,     // a declared state tensor's storage or its .grad: fixed address
  constant,  // made during the trace and filled on the host (from_vector): copied into the plan
  pinned,    // made during the trace and alive after it (outputs, new .grad): owned by the plan
};
const char* buffer_kind_name(BufferKind k);

struct Buffer {
  BufferKind kind = BufferKind::internal;
  size_t nbytes = 0;
  int input = -1;                // for inputs
  int first = -1, last = -1;     // steps of first and last use (internal buffers)
  int slot = -1;                 // arena slot (in-place reuse shares a slot)
  int64_t arena_offset = -1;     // bytes from the arena start (internal buffers)
  char* fixed = nullptr;         // state / pinned / constant: where it lives
};

// One TensorView argument of a recorded kernel.
struct ArgRef {
  int buffer = -1;  // -1: a null view (an absent bias, dgamma, ...)
  int64_t byte_offset = 0;
  DType dtype = DType::f32;
  Shape shape;
  Strides strides;
  char role = 'R';  // R, W or M
  int64_t numel() const { return shape.numel(); }
};

// Runs one recorded kernel on resolved views (defined in compile_record.cpp).
struct KernelCall {
  virtual ~KernelCall() = default;
  virtual void run(const Backend& real, const TensorView* views, Generator* gen) const = 0;
};

struct Op {
  Kernel kernel;
  std::string label;             // "unary tanh", "binary add", "matmul", ...
  std::vector<ArgRef> args;      // TensorView arguments in order
  bool backward = false;         // recorded in the trailing no-grad part (the backward pass)
  bool dead = false;             // removed by dead-code elimination
  int group = -1;                // fused group, or -1
  bool in_place = false;         // its output took the buffer of a dying input
  Generator* gen = nullptr;      // random kernels: the generator to draw from on replay
  int64_t ignored_targets = -1;  // cross_entropy on an input target: the count it was traced with
  int64_t ignore_index = 0;
  std::shared_ptr<const KernelCall> call;
};

// A run of consecutive elementwise kernels executed tile by tile.
struct Group {
  std::vector<int> ops;
  int64_t numel = 0;
  int64_t tile = 0;  // elements per tile
};

struct GraphStats {
  int recorded = 0;       // kernels recorded during the trace
  int dead = 0;           // removed by dead-code elimination
  int live = 0;           // kernels the plan runs
  int fused_groups = 0;
  int fused_ops = 0;      // kernels inside fused groups
  int in_place = 0;       // outputs that took an input's buffer
  size_t arena_bytes = 0;         // the arena (every internal buffer, reused)
  size_t intermediate_bytes = 0;  // sum of the internal buffers' sizes (eager allocates each)
  size_t pinned_bytes = 0;        // outputs and created .grad, outside the arena
  size_t constant_bytes = 0;
  std::map<std::string, int> kernel_counts;  // live kernels by name
};

// A traced and optimised function for one input signature, with its memory plan. Its fields
// are public for tests, tools and readers; CompiledFunction builds and runs it.
struct Graph {
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  // Graphviz DOT: forward and backward kernels as clusters, fused groups as nested clusters,
  // edges labelled with the dtype and shape of the buffer that flows.
  std::string to_dot() const;
  // A one-screen text summary (what `graft compile-info` prints).
  std::string summary() const;

  std::vector<Op> ops;          // every recorded kernel, dead ones included (marked)
  std::vector<Buffer> buffers;
  std::vector<Group> groups;
  std::vector<int> steps;       // what replay runs: >= 0 an op index, < 0 group -(s + 1)
  GraphStats stats;
  const Backend* real = nullptr;  // the kernel table that runs (fast or reference)
  char* arena = nullptr;
  std::vector<StoragePtr> keep;  // state, pinned and constant storages stay alive
  struct Constant {              // a host-filled buffer: its contents as traced
    int buffer;
    std::vector<char> bytes;
    bool rewritten = false;      // some kernel modifies it: restored before each replay
  };
  std::vector<Constant> constants;
  std::vector<std::vector<TensorView>> views;  // resolved views per op (inputs patched per call)
  struct InputPatch {
    int op, arg, input;
    int64_t byte_offset;
  };
  std::vector<InputPatch> input_patches;
  std::vector<Tensor> outputs;  // plan-owned handles refreshed by each replay
  struct GradBinding {          // a .grad the trace created: re-attached after each replay
    int state;
    std::shared_ptr<TensorImpl> grad;
  };
  std::vector<GradBinding> grad_bindings;

  // Points the input views at `inputs` and checks the value guards (cross_entropy's count of
  // ignored targets); false when this plan does not apply.
  bool bind(const std::vector<Tensor>& inputs);
  // Runs the steps (after bind), then re-attaches created .grad tensors to `state`.
  void execute(const std::vector<Tensor>& state);
};

struct CompileOptions;

// Runs fn(inputs) eagerly with the recording kernel table installed (compile_record.cpp) and
// fills g.ops, g.buffers, g.outputs and what the plan must keep; graft::Error if the function
// cannot be traced (data-dependent host code, unknown tensors, ...).
void record(Graph& g, const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
            const std::vector<Tensor>& inputs, const std::vector<Tensor>& state);
bool tracing();
// The passes (compile_plan.cpp), run in this order after a trace.
void eliminate_dead_code(Graph& g);
void fuse_elementwise(Graph& g, int64_t tile_bytes);
void plan_memory(Graph& g, bool in_place, bool reuse);

}  // namespace trace

struct CompileOptions {
  bool dce = true;            // dead-code elimination
  bool fuse = true;           // elementwise fusion (tile by tile)
  bool in_place = true;       // outputs take dying inputs' buffers
  bool reuse = true;          // buffers with disjoint lifetimes share arena bytes
  int64_t tile_bytes = 8192;  // bytes per buffer per fused tile
  // f32 matmuls through oneDNN while tracing and replaying. Off by default: oneDNN's execute
  // allocates on every call, so replay would not be allocation-free; graft's own kernel runs
  // instead (f32 results then differ from eager's oneDNN ones by rounding, ~1e-7 relative).
  bool onednn = false;
};

using StepFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// A compiled function: call it like the original. The first call with a new input signature
// traces (runs the function eagerly, recording), later calls replay the cached plan.
class CompiledFunction {
 public:
  CompiledFunction(StepFunction fn, std::vector<Tensor> state, CompileOptions options = {});
  ~CompiledFunction();
  CompiledFunction(CompiledFunction&&) noexcept;
  CompiledFunction& operator=(CompiledFunction&&) noexcept;

  // Runs the function (traced or replayed). The returned tensors belong to the plan.
  const std::vector<Tensor>& operator()(const std::vector<Tensor>& inputs);
  // The plan a call with these inputs would replay (nullptr if none is cached yet).
  const trace::Graph* plan_for(const std::vector<Tensor>& inputs) const;
  int traces() const;   // how many times the function was traced
  int replays() const;  // how many calls replayed a plan
  size_t num_plans() const;

 private:
  std::unique_ptr<CompiledFunction_> impl_;
};

// compile(fn, state): `state` lists the pre-existing tensors the function uses (typically
// model.parameters()); their .grad tensors are included automatically.
CompiledFunction compile(StepFunction fn, std::vector<Tensor> state = {},
                         CompileOptions options = {});

// True while the calling thread is tracing a compiled function.
bool is_tracing();

}  // namespace graft
