// The backward engine: a topological walk of the tape from the roots.
//
//  1. Collect every node reachable from the roots and count, for each, how many edges point at
//     it (its consumers that must deliver a gradient first).
//  2. Seed the roots' input buffers with the output gradients.
//  3. Repeatedly run a ready node (all consumers done; highest sequence number first, i.e.
//     reverse creation order), add each returned gradient into the buffer of the node on the
//     matching edge, and free saved tensors unless retain_graph.
// AccumulateGrad nodes add into leaf.grad; in grad() mode they only capture.
#include <queue>

#include "autograd/functions.h"
#include "autograd/node.h"
#include "ops/threads.h"

namespace graft {

namespace {
std::atomic<uint64_t> g_next_seq{0};

// Adds g into slot (out-of-place: buffers may alias tensors seen elsewhere).
void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  slot = slot.defined() ? add(slot, g) : g;
}

struct Capture {
  Node* node;
  uint32_t nr;
  size_t index;
};

void run_engine(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
                bool retain_graph, bool create_graph, std::vector<Capture>* captures,
                std::vector<Tensor>* captured) {
  // As in PyTorch, create_graph implies retain_graph: the new graph refers to the old nodes.
  retain_graph = retain_graph || create_graph;
  GradModeGuard mode(create_graph);
  // 1. discover nodes and count dependencies (state kept in the nodes: engine_*)
  std::vector<std::shared_ptr<Node>> nodes;  // every node of this walk, kept alive
  std::vector<Node*> stack;
  auto visit = [&](const std::shared_ptr<Node>& n) {
    if (n->engine_seen) return;
    n->engine_seen = true;
    n->engine_deps = 0;
    n->engine_grads.clear();
    nodes.push_back(n);
    stack.push_back(n.get());
  };
  for (const Tensor& r : roots) {
    Edge e = gradient_edge(r);
    if (e.node) visit(e.node);
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.node) continue;
      visit(e.node);
      ++e.node->engine_deps;
    }
  }
  struct Reset {  // leave nodes clean even if a backward function throws
    std::vector<std::shared_ptr<Node>>& ns;
    ~Reset() {
      for (auto& n : ns) {
        n->engine_seen = false;
        n->engine_grads.clear();
      }
    }
  } reset{nodes};
  // 2. seed
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge e = gradient_edge(roots[i]);
    if (!e.node) continue;
    e.node->engine_grads.resize(e.node->num_outputs);
    accumulate(e.node->engine_grads[e.input_nr], root_grads[i]);
  }
  // 3. walk: a ready node with the highest sequence number (latest created) runs first
  auto later_first = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  for (auto& n : nodes)
    if (n->engine_deps == 0) ready.push(n.get());
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(n->engine_grads);
    grads.resize(n->num_outputs);
    if (captures) {
      for (const Capture& c : *captures)
        if (c.node == n) (*captured)[c.index] = grads[c.nr];
    }
    std::vector<Tensor> outs;
    bool is_sink = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    if (!(is_sink && captures)) outs = n->apply(grads, create_graph);
    if (!retain_graph) n->release_saved();
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.node) continue;
      if (i < outs.size() && outs[i].defined()) {
        auto& buf = e.node->engine_grads;
        buf.resize(e.node->num_outputs);
        accumulate(buf[e.input_nr], outs[i]);
      }
      if (--e.node->engine_deps == 0) ready.push(e.node.get());
    }
  }
}

Tensor default_root_grad(const Tensor& r, const Tensor& g, const char* what) {
  if (g.defined()) {
    GRAFT_CHECK(g.shape() == r.shape(), "{}: gradient has shape {} but the output has shape {}",
                what, g.shape(), r.shape());
    return g;
  }
  GRAFT_CHECK(r.numel() == 1,
              "{}: grad can be implicitly created only for one-element outputs, got shape {}; "
              "hint: pass an explicit gradient of the output's shape",
              what, r.shape());
  return ones_like(r);
}
}  // namespace

Node::Node(const char* name) : name_(name), seq_(g_next_seq.fetch_add(1, std::memory_order_relaxed)) {}

void throw_released(const char* op) {
  throw Error(fmt::format(
      "{}: trying to backward through the graph a second time (its saved tensors were freed); "
      "hint: pass retain_graph=true to the first backward()",
      op));
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>& grads, bool create_graph) {
  auto leaf = leaf_.lock();
  if (!leaf || !grads[0].defined()) return {};
  Tensor g = grads[0];
  Tensor cur(leaf->grad);
  if (create_graph) {
    leaf->grad = (cur.defined() ? add(cur, g) : g).impl_ptr();
  } else if (!cur.defined()) {
    leaf->grad = g.detach().clone().impl_ptr();  // own copy: g may alias other tensors
  } else {
    NoGradGuard ng;
    if (cur.requires_grad()) cur = cur.detach().clone();
    cur.add_(g);
    leaf->grad = cur.impl_ptr();
  }
  if (!leaf->post_accumulate_hooks.empty()) {
    const Tensor t(leaf);
    for (auto& [id, fn] : leaf->post_accumulate_hooks) fn(t);
  }
  return {};
}

uint64_t Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> fn) const {
  GRAFT_CHECK(is_leaf() && requires_grad(),
              "register_post_accumulate_grad_hook: the tensor must be a leaf that requires grad");
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id.fetch_add(1);
  impl_->post_accumulate_hooks.emplace_back(id, std::move(fn));
  return id;
}

void Tensor::remove_post_accumulate_grad_hook(uint64_t id) const {
  auto& hooks = impl_->post_accumulate_hooks;
  std::erase_if(hooks, [id](const auto& h) { return h.first == id; });
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return {impl->grad_fn, impl->output_nr};
  if (!impl->requires_grad) return {};
  auto acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl->grad_accumulator = acc;
  }
  return {acc, 0};
}

void set_history(const Tensor& out, const std::shared_ptr<Node>& node, uint32_t nr) {
  out.impl()->grad_fn = node;
  out.impl()->output_nr = nr;
  out.impl()->requires_grad = true;
}

SavedTensor SavedTensor::input(const Tensor& t) {
  SavedTensor s;
  s.data_ = t.impl_ptr();
  s.version_ = t.storage()->version();
  return s;
}

SavedTensor SavedTensor::output(const Tensor& t, const std::shared_ptr<Node>& producer) {
  SavedTensor s;
  const TensorImpl& i = *t.impl();
  s.storage_ = i.storage;
  s.shape_ = i.shape;
  s.strides_ = i.strides;
  s.offset_ = i.offset;
  s.dtype_ = i.dtype;
  s.producer_ = producer;
  s.output_nr_ = i.output_nr;
  s.version_ = i.storage->version();
  s.is_output_ = true;
  return s;
}

Tensor SavedTensor::unpack(const char* op, bool with_graph) const {
  GRAFT_ASSERT(defined());
  const StoragePtr& st = is_output_ ? storage_ : data_->storage;
  GRAFT_CHECK(st->version() == version_,
              "{}: a tensor saved for backward was modified by an in-place operation (version {} "
              "now, {} when saved); hint: use an out-of-place op or .clone() before modifying",
              op, st->version(), version_);
  if (!is_output_) return Tensor(data_);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage_;
  impl->shape = shape_;
  impl->strides = strides_;
  impl->offset = offset_;
  impl->dtype = dtype_;
  if (with_graph) {
    impl->grad_fn = producer_.lock();
    impl->output_nr = output_nr_;
    impl->requires_grad = impl->grad_fn != nullptr;
  }
  return Tensor(impl);
}

void Tensor::backward(const Tensor& grad, bool retain_graph, bool create_graph) const {
  check_defined(*this, "backward");
  GRAFT_CHECK(requires_grad(),
              "backward: this tensor does not require grad and has no grad_fn; hint: create "
              "inputs with requires_grad(true) and do not compute under NoGradGuard");
  Tensor g = default_root_grad(*this, grad, "backward");
  adapt_threads_to_load();  // once per training step: the OpenMP team follows the machine's load
  run_engine({*this}, {g}, retain_graph, create_graph, nullptr, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  GRAFT_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
              "grad: {} outputs but {} grad_outputs", outputs.size(), grad_outputs.size());
  std::vector<Tensor> roots, root_grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_defined(outputs[i], "grad");
    GRAFT_CHECK(outputs[i].requires_grad(), "grad: output {} does not require grad", i);
    roots.push_back(outputs[i]);
    root_grads.push_back(default_root_grad(outputs[i], grad_outputs.empty() ? Tensor() : grad_outputs[i], "grad"));
  }
  std::vector<Capture> caps;
  std::vector<std::shared_ptr<Node>> keep;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_defined(inputs[i], "grad");
    GRAFT_CHECK(inputs[i].requires_grad(), "grad: input {} does not require grad", i);
    Edge e = gradient_edge(inputs[i]);
    keep.push_back(e.node);
    caps.push_back({e.node.get(), e.input_nr, i});
  }
  std::vector<Tensor> result(inputs.size());
  run_engine(roots, root_grads, retain_graph, create_graph, &caps, &result);
  for (size_t i = 0; i < result.size(); ++i)
    GRAFT_CHECK(result[i].defined() || allow_unused,
                "grad: input {} was not used to compute the outputs; hint: allow_unused=true", i);
  return result;
}

}  // namespace graft
