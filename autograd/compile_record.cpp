// Tracing: the recording kernel table and the hooks that watch storages and host reads.
//
// While a function is traced, these per-thread hooks are installed, as fields of the thread
// context (autograd/context.h) under one ContextGuard that puts them all back afterwards:
//  * backend_for(cpu) returns the recording table below: each entry records the call (kernel,
//    every TensorView argument resolved to a buffer + byte offset, the scalars) and then runs the
//    real kernel, so the tracing call computes the eager results;
//  * a StorageObserver sees every storage made or freed: a storage made during the trace is an
//    *internal* buffer; a pointer into an older storage must belong to an input or to the
//    declared state;
//  * Tensor::data<T>() reports host access, so that a host read of a computed value (item(),
//    to_vector(), a branch on data) is an error instead of a decision frozen into the plan.
#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

#include "autograd/compile.h"
#include "autograd/grad_mode.h"

namespace graft::trace {

const char* kernel_name(Kernel k) {
  switch (k) {
#define GRAFT_KERNEL(k, roles, devices, params) \
  case Kernel::k: return #k;
#include "ops/kernel_list.h"
  }
  return "?";
}

const char* buffer_kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::internal: return "internal";
    case BufferKind::input: return "input";
    case BufferKind::state: return "state";
    case BufferKind::constant: return "constant";
    case BufferKind::pinned: return "pinned";
  }
  return "?";
}

namespace {

// The roles column of the kernel list, by Kernel.
constexpr const char* kRoles[] = {
#define GRAFT_KERNEL(k, roles, devices, params) roles,
#include "ops/kernel_list.h"
};

template <class A> constexpr bool is_view = std::is_same_v<std::decay_t<A>, TensorView>;

// Random kernels draw (seed, offset) from their generator again on every replay.
template <auto M> constexpr bool kRandom = false;
template <> constexpr bool kRandom<&Backend::uniform> = true;
template <> constexpr bool kRandom<&Backend::normal> = true;
template <> constexpr bool kRandom<&Backend::dropout_mask> = true;
// Attention kernels draw their dropout mask from (seed, offset) in their AttentionArgs (the
// fifth argument). With dropout, the forward call draws them from its generator again on every
// replay, and its backward call reads the same draw (a DropoutDraw shared by the two calls).
template <auto M> constexpr bool kAttention = false;
template <> constexpr bool kAttention<&Backend::attention> = true;
template <> constexpr bool kAttention<&Backend::attention_backward> = true;
template <auto M> constexpr bool kAttentionForward = false;
template <> constexpr bool kAttentionForward<&Backend::attention> = true;
struct DropoutDraw {
  uint64_t seed = 0, offset = 0;
};
// The dropout stream's length of an attention call: one draw per score, B H T S (q [B,H,T,D],
// k [B,H,S,D]).
inline uint64_t attention_draws(const TensorView& q, const TensorView& k) {
  return uint64_t(q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2]);
}
template <auto M> constexpr bool kCrossEntropy = false;
template <> constexpr bool kCrossEntropy<&Backend::cross_entropy> = true;

// ------------------------------------------------------------------------------------------
// A recorded call: the arguments by value; at replay the TensorView slots take the resolved
// views, in order, and everything else (op enums, scalars, optimizer args) is used as recorded.
template <auto M, class... A> class Call final : public KernelCall {
 public:
  explicit Call(const std::decay_t<A>&... a) : args_(a...) {}
  void set_draw(std::shared_ptr<DropoutDraw> d) { draw_ = std::move(d); }

  void run(const Backend& real, const TensorView* views, Generator* gen) const override {
    if constexpr (kAttention<M>) {
      if (draw_) {  // dropout: the forward draws afresh, the backward reuses its forward's draw
        std::tuple<std::decay_t<A>...> args = args_;
        AttentionArgs& a = std::get<4>(args);
        if constexpr (kAttentionForward<M>)
          *draw_ = {gen->seed, gen->advance(attention_draws(views[0], views[1]))};
        a.seed = draw_->seed, a.offset = draw_->offset;
        call(real, views, args, std::index_sequence_for<A...>{});
        return;
      }
    }
    if constexpr (kRandom<M>) {
      // A fresh draw: the last two arguments, (seed, offset), come from the generator.
      std::tuple<std::decay_t<A>...> args = args_;
      std::get<sizeof...(A) - 2>(args) = gen->seed;
      std::get<sizeof...(A) - 1>(args) = gen->advance(uint64_t(views[0].numel()));
      call(real, views, args, std::index_sequence_for<A...>{});
    } else {
      call(real, views, args_, std::index_sequence_for<A...>{});
    }
  }

 private:
  static constexpr bool kIsView[] = {is_view<A>...};
  template <size_t I> static constexpr int view_index() {
    int n = 0;
    for (size_t i = 0; i < I; ++i) n += kIsView[i];
    return n;
  }
  template <size_t I, class Args> decltype(auto) arg(const TensorView* views, const Args& args) const {
    if constexpr (kIsView[I]) return (views[view_index<I>()]);
    else return (std::get<I>(args));
  }
  template <class Args, size_t... I>
  void call(const Backend& real, const TensorView* views, const Args& args,
            std::index_sequence<I...>) const {
    (real.*M)(arg<I>(views, args)...);
  }

  std::tuple<std::decay_t<A>...> args_;
  std::shared_ptr<DropoutDraw> draw_;  // attention with dropout
};

// A readable label: the kernel plus its op enum ("unary tanh", "binary add", "reduce sum").
template <class A> void describe(std::string& s, const A& a) {
  using D = std::decay_t<A>;
  if constexpr (std::is_same_v<D, UnaryOp>) s += std::string(" ") + unary_name(a);
  else if constexpr (std::is_same_v<D, BinaryOp>) s += std::string(" ") + binary_name(a);
  else if constexpr (std::is_same_v<D, CompareOp>) s += std::string(" ") + compare_name(a);
  else if constexpr (std::is_same_v<D, ReduceOp>)
    s += a == ReduceOp::sum ? " sum" : a == ReduceOp::max ? " max" : " min";
  else if constexpr (std::is_same_v<D, Precision>) {
    if (a != Precision::f32) s += std::string(" ") + std::string(precision_name(a));
  }
}

// ------------------------------------------------------------------------------------------
// Where a pointer lives: a buffer and the base its byte offsets count from.
struct Range {
  uintptr_t lo, hi;  // [lo, hi)
  int buffer;
};

}  // namespace

// The tracer of the running trace is AutogradContext::tracer (autograd/context.h).
class Tracer final : public StorageObserver {
 public:
  const Backend* real;  // the kernels that run

  Tracer(Graph& g, const std::vector<Tensor>& inputs, const std::vector<Tensor>& state)
      : real(g.real), g_(g) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      const uintptr_t lo = reinterpret_cast<uintptr_t>(t.kview().data);
      int64_t extent = t.numel() == 0 ? 0 : 1;
      for (int d = 0; d < t.dim(); ++d) extent += (t.shape()[d] - 1) * t.strides()[d];
      const int b = add_buffer(BufferKind::input, size_t(extent) * dtype_size(t.dtype()));
      g_.buffers[b].input = int(i);
      inputs_.push_back({lo, lo + g_.buffers[b].nbytes, b});
    }
    auto add_state = [&](const StoragePtr& s) {
      if (!s || !s->device().is_cpu()) return;
      for (const Range& r : state_)
        if (r.lo == reinterpret_cast<uintptr_t>(s->data())) return;  // shared storage
      const int b = add_buffer(BufferKind::state, s->nbytes());
      g_.buffers[b].fixed = static_cast<char*>(s->data());
      g_.keep.push_back(s);
      const uintptr_t lo = reinterpret_cast<uintptr_t>(s->data());
      state_.push_back({lo, lo + s->nbytes(), b});
    };
    for (const Tensor& t : state) {
      add_state(t.storage());
      if (t.grad().defined()) add_state(t.grad().storage());
    }
  }

  // ---- StorageObserver: storages made during the trace are internal buffers
  void on_create(const Storage& s) override {
    const int b = add_buffer(BufferKind::internal, s.nbytes());
    created_after_read_.back() = host_read_input_;
    live_[reinterpret_cast<uintptr_t>(s.data())] = {&s, b};
  }
  void on_destroy(const Storage& s) override { live_.erase(reinterpret_cast<uintptr_t>(s.data())); }

  // ---- the recording entry point (see Entry below)
  void record(Kernel k, std::shared_ptr<const KernelCall> call, std::string label,
              const TensorView* const* views, size_t n) {
    Op op;
    op.kernel = k;
    op.label = std::move(label);
    op.call = std::move(call);
    const char* roles = kRoles[int(k)];
    for (size_t i = 0; i < n; ++i) op.args.push_back(resolve(*views[i], roles[i], op.label));
    // An internal buffer read before any kernel wrote it was filled on the host (from_vector,
    // arange): it becomes a constant of the plan, copied now.
    for (const ArgRef& a : op.args)
      if (a.buffer >= 0 && a.role != 'W' && g_.buffers[a.buffer].kind == BufferKind::internal &&
          !written_[a.buffer])
        make_constant(a.buffer, op.label);
    grad_mode_.push_back(GradMode::is_enabled());
    g_.ops.push_back(std::move(op));
  }
  // After the real kernel ran: its outputs now hold kernel-computed values.
  void written() {
    for (const ArgRef& a : g_.ops.back().args)
      if (a.buffer >= 0 && a.role != 'R') written_[a.buffer] = 1;
  }
  // Attention with dropout. The forward: the generator that advanced for its stream becomes the
  // op's, and a new draw is kept under the stream's (seed, offset). The backward: the draw of
  // the forward with its (seed, offset), recorded earlier in this trace.
  std::shared_ptr<DropoutDraw> attention_forward_draw(const AttentionArgs& a, uint64_t count) {
    Generator* gen = Generator::last_advanced();
    GRAFT_CHECK(gen && gen->seed == a.seed && gen->offset == a.offset + count,
                "compile: attention dropout drew (seed {}, offset {}) without advancing a Generator "
                "just before; a traced attention must draw from a graft::Generator", a.seed, a.offset);
    pending_gen_ = gen;
    auto d = std::make_shared<DropoutDraw>(DropoutDraw{a.seed, a.offset});
    draws_[{a.seed, a.offset}] = d;
    return d;
  }
  std::shared_ptr<DropoutDraw> attention_backward_draw(const AttentionArgs& a) {
    auto it = draws_.find({a.seed, a.offset});
    GRAFT_CHECK(it != draws_.end(), "compile: an attention backward with dropout whose forward ran "
                "outside the traced function; hint: run forward and backward in the same step");
    return it->second;
  }
  // After record(): the generator noted by attention_forward_draw is the new op's.
  void attach_pending_generator() {
    g_.ops.back().gen = pending_gen_;
    pending_gen_ = nullptr;
  }
  // uniform/normal/dropout_mask: which generator advanced for this draw.
  void note_random(const TensorView& out, uint64_t seed, uint64_t offset) {
    Generator* gen = Generator::last_advanced();
    GRAFT_CHECK(gen && gen->seed == seed && gen->offset == offset + uint64_t(out.numel()),
                "compile: a random kernel drew (seed {}, offset {}) without advancing a Generator "
                "just before; a traced random op must draw from a graft::Generator",
                seed, offset);
    g_.ops.back().gen = gen;
  }
  // cross_entropy: its mean divides by the number of non-ignored targets, counted on the host.
  // For an input target the plan re-counts them on every call (a value guard).
  void note_cross_entropy(const TensorView& target, int64_t ignore_index) {
    const ArgRef& t = g_.ops.back().args[1];
    if (t.buffer < 0 || g_.buffers[t.buffer].kind != BufferKind::input) return;
    g_.ops.back().ignored_targets = count_equal(target, ignore_index);
    g_.ops.back().ignore_index = ignore_index;
  }

  // ---- Tensor::data<T>() during the trace
  void host_access(const Tensor& t) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(t.kview().data);
    const Range* r = find(p, t.numel() == 0);
    if (r && g_.buffers[r->buffer].kind == BufferKind::internal) {
      GRAFT_CHECK(!written_[r->buffer],
                  "compile: data-dependent control flow: the traced function reads on the host "
                  "(Tensor::item/to_vector/data) a {} tensor of shape {} computed inside it; a "
                  "replayed plan cannot repeat host decisions; hint: move the read out of the "
                  "compiled function, or compute with tensor ops (where, masked_fill)",
                  t.dtype(), t.shape());
      return;  // a tensor being filled on the host (from_vector): becomes a constant if read
    }
    GRAFT_CHECK(!is_floating(t.dtype()),
                "compile: data-dependent control flow: the traced function reads the values of "
                "a {} input or state tensor of shape {} on the host (Tensor::item/to_vector/"
                "data); they would be frozen into the plan; hint: do the read outside the "
                "compiled function",
                t.dtype(), t.shape());
    host_read_input_ = true;  // integer inputs may be read (ops validate class indices)
  }

  // ---- after the function returned
  void finish(std::vector<Tensor> outs, const std::vector<Tensor>& state,
              const std::vector<std::shared_ptr<TensorImpl>>& grads_before) {
    // The backward pass: the trailing kernels recorded with grad mode off (after a forward
    // recorded with it on). Used for the DOT clusters only.
    const bool any_forward = std::find(grad_mode_.begin(), grad_mode_.end(), char(1)) != grad_mode_.end();
    for (size_t i = g_.ops.size(); any_forward && i-- > 0 && !grad_mode_[i];) g_.ops[i].backward = true;
    // Internal storages still alive escaped: returned, or a .grad the trace created.
    std::vector<char> accessed(g_.buffers.size(), 0);
    for (const Op& op : g_.ops)
      for (const ArgRef& a : op.args)
        if (a.buffer >= 0) accessed[a.buffer] = 1;
    for (auto& [addr, lv] : live_) {
      if (!accessed[lv.buffer]) continue;
      StoragePtr owner;
      for (const Tensor& o : outs)
        if (o.defined() && o.storage().get() == lv.storage) owner = o.storage();
      for (size_t i = 0; i < state.size() && !owner; ++i) {
        const Tensor gr = state[i].grad();
        if (!gr.defined() || gr.storage().get() != lv.storage) continue;
        owner = gr.storage();
        if (grads_before[i] != gr.impl_ptr()) g_.grad_bindings.push_back({int(i), gr.impl_ptr()});
      }
      GRAFT_CHECK(owner,
                  "compile: the traced function keeps a tensor made inside it ({} bytes) alive "
                  "after it returns, neither returned nor the .grad of a state tensor; the plan "
                  "cannot own it; hint: return it, or run inference under NoGradGuard so that "
                  "no autograd graph holds saved tensors",
                  lv.storage->nbytes());
      Buffer& b = g_.buffers[lv.buffer];
      if (b.kind == BufferKind::internal) b.kind = BufferKind::pinned;
      b.fixed = static_cast<char*>(owner->data());
      g_.keep.push_back(owner);
    }
    // Outputs: plan-owned handles (detached: the autograd graph of the trace is let go).
    for (size_t i = 0; i < outs.size(); ++i) {
      const Tensor& o = outs[i];
      GRAFT_CHECK(o.defined(), "compile: output {} of the traced function is undefined", i);
      const Range* r = find(reinterpret_cast<uintptr_t>(o.kview().data), o.numel() == 0);
      const BufferKind k = r ? g_.buffers[r->buffer].kind : BufferKind::internal;
      GRAFT_CHECK(r && k != BufferKind::input,
                  "compile: output {} of the traced function is {}; hint: return a tensor "
                  "computed inside the function (clone() an input to return it)",
                  i, r ? "an input (or a view of one)" : "a tensor that is not part of its state");
      g_.outputs.push_back(o.detach());
    }
  }

  // Constants get plan-owned storage (made once the observer is gone).
  void store_constants() {
    for (Graph::Constant& c : g_.constants) {
      auto s = std::make_shared<Storage>(c.bytes.size(), Device::cpu());
      if (!c.bytes.empty()) std::memcpy(s->data(), c.bytes.data(), c.bytes.size());
      g_.buffers[c.buffer].fixed = static_cast<char*>(s->data());
      g_.keep.push_back(std::move(s));
    }
  }

 private:
  struct Live {
    const Storage* storage;
    int buffer;
  };

  int add_buffer(BufferKind kind, size_t nbytes) {
    Buffer b;
    b.kind = kind;
    b.nbytes = nbytes;
    g_.buffers.push_back(b);
    written_.push_back(0);
    created_after_read_.push_back(0);
    return int(g_.buffers.size()) - 1;
  }

  // The buffer holding address p (inclusive end for zero-size views); internal storages first.
  const Range* find(uintptr_t p, bool empty) {
    auto it = live_.upper_bound(p);
    if (it != live_.begin()) {
      --it;
      const uintptr_t hi = it->first + std::max<size_t>(it->second.storage->nbytes(), 1);
      if (p < hi || (empty && p == hi)) {
        found_ = {it->first, hi, it->second.buffer};
        return &found_;
      }
    }
    for (const std::vector<Range>* rs : {&inputs_, &state_})
      for (const Range& r : *rs)
        if ((p >= r.lo && p < r.hi) || (empty && p == r.hi)) return &r;
    return nullptr;
  }

  ArgRef resolve(const TensorView& v, char role, const std::string& op) {
    ArgRef a;
    a.dtype = v.dtype;
    a.shape = v.shape;
    a.strides = v.strides;
    a.role = role;
    if (v.data == nullptr) return a;  // an absent optional argument
    GRAFT_CHECK(v.device.is_cpu(), "compile: kernel '{}' got a tensor on {}; only CPU tensors "
                "can be traced", op, v.device.str());
    const uintptr_t p = reinterpret_cast<uintptr_t>(v.data);
    const Range* r = find(p, v.numel() == 0);
    GRAFT_CHECK(r,
                "compile: kernel '{}' uses a {} tensor of shape {} that is neither an input of "
                "the traced function, nor in its declared state, nor made inside it; hint: pass "
                "it as an input, or list it in compile(fn, state) (e.g. model.parameters())",
                op, v.dtype, v.shape);
    a.buffer = r->buffer;
    a.byte_offset = int64_t(p - r->lo);
    return a;
  }

  void make_constant(int b, const std::string& op) {
    GRAFT_CHECK(!created_after_read_[b],
                "compile: data-dependent: kernel '{}' reads a tensor filled on the host after "
                "the traced function read input values on the host (e.g. indices built from the "
                "targets); it would be frozen into the plan; hint: build it with tensor ops, or "
                "outside the compiled function",
                op);
    for (auto& [addr, lv] : live_) {
      if (lv.buffer != b) continue;
      const char* src = static_cast<const char*>(lv.storage->data());
      g_.constants.push_back({b, std::vector<char>(src, src + lv.storage->nbytes())});
      g_.buffers[b].kind = BufferKind::constant;
      written_[b] = 1;
      return;
    }
    GRAFT_ASSERT(false);
  }

  static int64_t count_equal(const TensorView& t, int64_t value) {
    int64_t n = 0;
    const int64_t* p = t.ptr<int64_t>();
    for_each_offset(t.shape, t.strides, [&](int64_t, int64_t off) { n += p[off] == value; });
    return n;
  }

  Graph& g_;
  std::map<uintptr_t, Live> live_;  // internal storages alive now, by address
  std::vector<Range> inputs_, state_;
  Range found_{};
  std::vector<char> written_;             // per buffer: some kernel wrote it
  std::vector<char> created_after_read_;  // per buffer: made after an input was read on the host
  std::vector<char> grad_mode_;           // per op
  bool host_read_input_ = false;
  // attention dropout draws by their traced (seed, offset), and the forward's generator
  std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<DropoutDraw>> draws_;
  Generator* pending_gen_ = nullptr;
};

namespace {

// ------------------------------------------------------------------------------------------
// The recording table: one entry per Backend member, generated from its signature.
template <class T> struct MemberType;
template <class C, class T> struct MemberType<T C::*> {
  using type = T;
};

template <auto M, Kernel K, class F = typename MemberType<decltype(M)>::type> struct Entry;
template <auto M, Kernel K, class... A> struct Entry<M, K, void (*)(A...)> {
  static_assert((0 + ... + int(is_view<A>)) == std::char_traits<char>::length(kRoles[int(K)]),
                "ops/kernel_list.h: one role per TensorView argument");
  static void fn(A... a) {
    Tracer& t = *autograd_context().tracer;
    auto call = std::make_shared<Call<M, A...>>(a...);
    if constexpr (kAttention<M>) {
      const auto all = std::tie(a...);
      const AttentionArgs& args = std::get<4>(all);
      if (args.dropout_p > 0.0) {
        if constexpr (kAttentionForward<M>)
          call->set_draw(t.attention_forward_draw(args, attention_draws(std::get<0>(all), std::get<1>(all))));
        else
          call->set_draw(t.attention_backward_draw(args));
      }
    }
    std::string label = kernel_name(K);
    (describe(label, a), ...);
    constexpr size_t kViews = (0 + ... + size_t(is_view<A>));
    const TensorView* views[kViews > 0 ? kViews : 1] = {};
    size_t n = 0;
    (
        [&] {
          if constexpr (is_view<A>) views[n++] = &a;
        }(),
        ...);
    t.record(K, std::move(call), std::move(label), views, n);
    if constexpr (kAttentionForward<M>)
      if (std::get<4>(std::tie(a...)).dropout_p > 0.0) t.attach_pending_generator();
    if constexpr (kRandom<M>) {  // (out, ..., seed, offset)
      const auto all = std::tie(a...);
      t.note_random(std::get<0>(all), std::get<sizeof...(A) - 2>(all), std::get<sizeof...(A) - 1>(all));
    }
    if constexpr (kCrossEntropy<M>)
      t.note_cross_entropy(std::get<1>(std::tie(a...)), std::get<2>(std::tie(a...)));
    const Backend& real = *t.real;
    auto k = real.*M;
    GRAFT_CHECK(k, "compile: the {} kernel table has no '{}' kernel", real.name, kernel_name(K));
    k(a...);
    t.written();
  }
};

const Backend& recording_backend() {
  static const Backend b = [] {
    Backend r{};
    r.name = "cpu (tracing)";
#define GRAFT_KERNEL(k, roles, devices, params) r.k = &Entry<&Backend::k, Kernel::k>::fn;
#include "ops/kernel_list.h"
    return r;
  }();
  return b;
}

void host_access_hook(const Tensor& t) { autograd_context().tracer->host_access(t); }

// Installs the tracing hooks for its scope, as fields of the thread context: the storage
// observer, the recording kernel table, the host-access hook and the tracer. The guard puts the
// whole context back when the trace ends, or when it fails with an exception.
class Installed : public ContextGuard {
 public:
  explicit Installed(Tracer* t) {
    OpsContext& ops = ops_context();
    AutogradContext& ag = autograd_context();
    ops.storage_observer = t;
    ops.cpu_override = &recording_backend();
    ag.host_access = &host_access_hook;
    ag.tracer = t;
  }
  // Kernels and host reads are no longer watched; storages still are (for escapes).
  void stop_recording() {
    ops_context().cpu_override = saved().ops.cpu_override;
    autograd_context().host_access = saved().autograd.host_access;
  }
};

}  // namespace

bool tracing() { return autograd_context().tracer != nullptr; }

void record(Graph& g, const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
            const std::vector<Tensor>& inputs, const std::vector<Tensor>& state) {
  GRAFT_CHECK(!tracing(), "compile: a compiled function was called while tracing another one; "
              "hint: compile the outer function only");
  g.real = backend_for(Device::cpu());
  std::vector<std::shared_ptr<TensorImpl>> grads_before;
  for (const Tensor& s : state) grads_before.push_back(s.impl()->grad);
  Tracer tracer(g, inputs, state);
  {
    Installed hooks(&tracer);
    std::vector<Tensor> outs = fn(inputs);
    hooks.stop_recording();
    tracer.finish(std::move(outs), state, grads_before);
  }
  tracer.store_constants();
}

}  // namespace graft::trace

namespace graft {
bool is_tracing() { return trace::tracing(); }
}  // namespace graft
