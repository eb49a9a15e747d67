// graft::compile: the plan cache, replay, and the printouts (DOT, summary).
#include "autograd/compile.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace graft {

namespace trace {

Graph::~Graph() { std::free(arena); }

// ------------------------------------------------------------------ replay
bool Graph::bind(const std::vector<Tensor>& inputs) {
  for (const InputPatch& p : input_patches) {
    const Tensor& t = inputs[size_t(p.input)];
    char* base = static_cast<char*>(t.storage()->data()) + t.offset() * int64_t(dtype_size(t.dtype()));
    views[size_t(p.op)][size_t(p.arg)].data = base + p.byte_offset;
  }
  // Value guards: cross_entropy's mean divides by the number of targets not ignored.
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.dead || op.ignored_targets < 0) continue;
    const TensorView& t = views[i][1];
    const int64_t* p = t.ptr<int64_t>();
    int64_t n = 0;
    for_each_offset(t.shape, t.strides, [&](int64_t, int64_t off) { n += p[off] == op.ignore_index; });
    if (n != op.ignored_targets) return false;
  }
  return true;
}

void Graph::execute(const std::vector<Tensor>& state) {
  for (const Constant& c : constants)
    if (c.rewritten) std::memcpy(buffers[size_t(c.buffer)].fixed, c.bytes.data(), c.bytes.size());
  for (int s : steps) {
    if (s >= 0) {
      ops[size_t(s)].call->run(*real, views[size_t(s)].data(), ops[size_t(s)].gen);
      continue;
    }
    // A fused group: every op on elements [start, start + len) before the next tile.
    const Group& grp = groups[size_t(-s - 1)];
    for (int64_t start = 0; start < grp.numel; start += grp.tile) {
      const int64_t len = std::min(grp.tile, grp.numel - start);
      for (int i : grp.ops) {
        const std::vector<TensorView>& full = views[size_t(i)];
        TensorView tile[8];
        for (size_t k = 0; k < full.size(); ++k) {
          tile[k] = full[k];
          // a broadcast scalar: one element, or all strides 0 (e.g. the expanded grad of a sum)
          const bool scalar = full[k].numel() != grp.numel || !full[k].is_contiguous();
          tile[k].shape = Shape{len};
          tile[k].strides = Shape{scalar ? 0 : 1};
          if (!scalar)
            tile[k].data = static_cast<char*>(full[k].data) + start * int64_t(dtype_size(full[k].dtype));
        }
        ops[size_t(i)].call->run(*real, tile, ops[size_t(i)].gen);
      }
    }
  }
  for (const GradBinding& b : grad_bindings) state[size_t(b.state)].impl()->grad = b.grad;
}

// ------------------------------------------------------------------ printouts
namespace {

std::string view_text(const ArgRef& a) { return fmt::format("{}{}", dtype_name(a.dtype), a.shape.str()); }

std::string human_bytes(size_t n) {
  if (n >= (size_t(1) << 20)) return fmt::format("{:.2f} MiB", double(n) / double(1 << 20));
  if (n >= 1024) return fmt::format("{:.1f} KiB", double(n) / 1024.0);
  return fmt::format("{} B", n);
}

}  // namespace

std::string Graph::to_dot() const {
  std::string s = "digraph traced_step {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  auto node = [&](size_t i) {
    const Op& op = ops[i];
    std::string outs;
    for (const ArgRef& a : op.args)
      if (a.role != 'R') outs += (outs.empty() ? "" : ", ") + view_text(a);
    const char* style = op.dead ? ", style=dashed, color=gray, fontcolor=gray" : op.in_place ? ", style=bold" : "";
    return fmt::format("    op{} [label=\"#{} {}\\n-> {}{}{}\"{}];\n", i, i, op.label, outs,
                       op.dead ? "\\n(dead)" : "", op.in_place ? "\\n(in place)" : "", style);
  };
  for (int phase = 0; phase < 2; ++phase) {
    s += fmt::format("  subgraph cluster_{} {{\n    label=\"{}\";\n", phase ? "backward" : "forward",
                     phase ? "backward" : "forward");
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.backward != bool(phase)) continue;
      if (op.group >= 0) {
        const Group& grp = groups[size_t(op.group)];
        if (grp.ops.front() != int(i)) continue;
        s += fmt::format("    subgraph cluster_group{} {{\n    label=\"fused group {} ({} elements, "
                         "tiles of {})\";\n    style=filled; color=lightblue;\n",
                         op.group, op.group, grp.numel, grp.tile);
        for (int j : grp.ops) s += node(size_t(j));
        s += "    }\n";
      } else {
        s += node(i);
      }
    }
    s += "  }\n";
  }
  // Edges: from the last writer of a buffer to each later reader; buffers from outside as nodes.
  std::vector<int> writer(buffers.size(), -1);
  std::vector<char> shown(buffers.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    for (const ArgRef& a : op.args) {
      if (a.buffer < 0 || a.role == 'W') continue;
      const Buffer& b = buffers[size_t(a.buffer)];
      std::string from;
      if (writer[size_t(a.buffer)] >= 0) {
        from = fmt::format("op{}", writer[size_t(a.buffer)]);
      } else {
        from = fmt::format("buf{}", a.buffer);
        if (!shown[size_t(a.buffer)]) {
          shown[size_t(a.buffer)] = 1;
          const std::string what = b.kind == BufferKind::input ? fmt::format("input {}", b.input)
                                                               : buffer_kind_name(b.kind);
          s += fmt::format("  buf{} [shape=ellipse, label=\"{}\\n{}\"];\n", a.buffer, what, human_bytes(b.nbytes));
        }
      }
      s += fmt::format("  {} -> op{} [label=\"{}\", fontsize=8];\n", from, i, view_text(a));
    }
    for (const ArgRef& a : op.args)
      if (a.buffer >= 0 && a.role != 'R') writer[size_t(a.buffer)] = int(i);
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    s += fmt::format("  out{} [shape=ellipse, label=\"output {}\\n{}{}\"];\n", o, o,
                     dtype_name(outputs[o].dtype()), outputs[o].shape().str());
    const char* p = static_cast<const char*>(outputs[o].kview().data);
    for (size_t b = 0; b < buffers.size(); ++b)
      if (buffers[b].fixed && p >= buffers[b].fixed && p < buffers[b].fixed + std::max<size_t>(buffers[b].nbytes, 1) &&
          writer[b] >= 0)
        s += fmt::format("  op{} -> out{};\n", writer[b], o);
  }
  s += "}\n";
  return s;
}

std::string Graph::summary() const {
  const GraphStats& st = stats;
  int fwd = 0, bwd = 0;
  for (const Op& op : ops)
    if (!op.dead) (op.backward ? bwd : fwd)++;
  std::string s = fmt::format(
      "kernels recorded: {}  (dead-code eliminated: {}, replayed: {}: {} forward, {} backward)\n",
      st.recorded, st.dead, st.live, fwd, bwd);
  s += fmt::format("fused groups: {} ({} kernels run tile by tile)   in-place outputs: {}\n",
                   st.fused_groups, st.fused_ops, st.in_place);
  for (size_t i = 0; i < groups.size(); ++i) {
    std::string names;
    for (int j : groups[i].ops) names += (names.empty() ? "" : " -> ") + ops[size_t(j)].label;
    s += fmt::format("  group {}: {} elements, tiles of {}: {}\n", i, groups[i].numel, groups[i].tile, names);
  }
  s += fmt::format("arena: {} for {} of intermediates ({:.2f}x); pinned outputs/grads: {}; constants: {}\n",
                   human_bytes(st.arena_bytes), human_bytes(st.intermediate_bytes),
                   st.intermediate_bytes ? double(st.arena_bytes) / double(st.intermediate_bytes) : 0.0,
                   human_bytes(st.pinned_bytes), human_bytes(st.constant_bytes));
  s += "kernels by kind:\n";
  for (const auto& [name, n] : st.kernel_counts) s += fmt::format("  {:>4}  {}\n", n, name);
  return s;
}

}  // namespace trace

// ------------------------------------------------------------------ the compiled function
class CompiledFunction_ {
 public:
  struct InputSig {
    DType dtype;
    Shape shape;
    Strides strides;
  };
  struct StateSig {
    const Storage* data;
    const Storage* grad;
  };
  struct Entry {
    std::vector<InputSig> inputs;
    std::vector<StateSig> state;
    PlanModes modes;  // autocast precision, grad mode, reference kernels when traced
    std::unique_ptr<trace::Graph> graph;
  };

  StepFunction fn;
  std::vector<Tensor> state;
  CompileOptions opt;
  std::vector<Entry> plans;
  int traces = 0, replays = 0;
  bool first_done = false;
  std::vector<DType> dtypes;  // fixed by the first call

  void check_inputs(const std::vector<Tensor>& in) const {
    if (first_done)
      GRAFT_CHECK(in.size() == dtypes.size(),
                  "compile: the compiled function takes {} inputs (as in its first call), got {}",
                  dtypes.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      GRAFT_CHECK(in[i].defined(), "compile: input {} is undefined", i);
      GRAFT_CHECK(in[i].device().is_cpu(), "compile: input {} is on {}; only CPU tensors can be "
                  "traced; hint: .to(Device::cpu())", i, in[i].device().str());
      if (first_done)
        GRAFT_CHECK(in[i].dtype() == dtypes[i],
                    "compile: input {} has dtype {} but the first call passed {}; hint: convert "
                    "with .to({}) or compile another function",
                    i, in[i].dtype(), dtypes[i], dtypes[i]);
    }
  }

  bool matches(const Entry& e, const std::vector<Tensor>& in) const {
    if (!(e.modes == plan_modes(ThreadContext::current()))) return false;
    for (size_t i = 0; i < in.size(); ++i) {
      const InputSig& s = e.inputs[i];
      if (in[i].dtype() != s.dtype || !(in[i].shape() == s.shape) || !(in[i].strides() == s.strides))
        return false;
    }
    for (size_t i = 0; i < state.size(); ++i) {
      const Tensor g = Tensor(state[i].impl()->grad);
      if (state[i].storage().get() != e.state[i].data ||
          (g.defined() ? g.storage().get() : nullptr) != e.state[i].grad)
        return false;
    }
    return true;
  }

  const trace::Graph* find(const std::vector<Tensor>& in) {
    for (Entry& e : plans)
      if (matches(e, in) && e.graph->bind(in)) return e.graph.get();
    return nullptr;
  }

  const std::vector<Tensor>& call(const std::vector<Tensor>& in) {
    check_inputs(in);
    ContextGuard scope;  // the call's oneDNN setting, and the trace's hooks, end with it
    ops_context().onednn = opt.onednn;
    for (Entry& e : plans)
      if (matches(e, in) && e.graph->bind(in)) {
        e.graph->execute(state);
        ++replays;
        return e.graph->outputs;
      }
    // Trace a new plan (this call runs eagerly while recording).
    Entry e;
    e.modes = plan_modes(ThreadContext::current());
    for (const Tensor& t : in) e.inputs.push_back({t.dtype(), t.shape(), t.strides()});
    for (const Tensor& s : state) {
      const Tensor g = Tensor(s.impl()->grad);
      e.state.push_back({s.storage().get(), g.defined() ? g.storage().get() : nullptr});
    }
    e.graph = std::make_unique<trace::Graph>();
    trace::Graph& g = *e.graph;
    trace::record(g, fn, in, state);
    if (opt.dce) trace::eliminate_dead_code(g);
    if (opt.fuse) trace::fuse_elementwise(g, std::max<int64_t>(opt.tile_bytes, 64));
    trace::plan_memory(g, opt.in_place, opt.reuse);
    ++traces;
    if (!first_done) {
      first_done = true;
      for (const Tensor& t : in) dtypes.push_back(t.dtype());
    }
    plans.push_back(std::move(e));
    return plans.back().graph->outputs;
  }
};

CompiledFunction::CompiledFunction(StepFunction fn, std::vector<Tensor> state, CompileOptions options)
    : impl_(std::make_unique<CompiledFunction_>()) {
  GRAFT_CHECK(fn, "compile: got an empty function");
  for (size_t i = 0; i < state.size(); ++i) {
    GRAFT_CHECK(state[i].defined(), "compile: state tensor {} is undefined", i);
    GRAFT_CHECK(state[i].device().is_cpu(), "compile: state tensor {} is on {}; only CPU tensors "
                "can be traced", i, state[i].device().str());
  }
  GRAFT_CHECK(options.tile_bytes > 0, "compile: tile_bytes must be positive, got {}", options.tile_bytes);
  impl_->fn = std::move(fn);
  impl_->state = std::move(state);
  impl_->opt = options;
}
CompiledFunction::~CompiledFunction() = default;
CompiledFunction::CompiledFunction(CompiledFunction&&) noexcept = default;
CompiledFunction& CompiledFunction::operator=(CompiledFunction&&) noexcept = default;

const std::vector<Tensor>& CompiledFunction::operator()(const std::vector<Tensor>& inputs) {
  return impl_->call(inputs);
}
const trace::Graph* CompiledFunction::plan_for(const std::vector<Tensor>& inputs) const {
  impl_->check_inputs(inputs);
  return impl_->find(inputs);
}
int CompiledFunction::traces() const { return impl_->traces; }
int CompiledFunction::replays() const { return impl_->replays; }
size_t CompiledFunction::num_plans() const { return impl_->plans.size(); }

CompiledFunction compile(StepFunction fn, std::vector<Tensor> state, CompileOptions options) {
  return CompiledFunction(std::move(fn), std::move(state), options);
}

}  // namespace graft
