// The tape. Every differentiable op that sees an input requiring grad records a Node: a
// backward function plus edges to the nodes that produced its inputs. backward() walks the
// nodes in reverse creation order (see engine.cpp). Leaves end in an AccumulateGrad node.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/tensor.h"

namespace graft {

struct Edge {
  std::shared_ptr<Node> node;  // null: this input needs no gradient
  uint32_t input_nr = 0;       // which output slot of `node` receives the gradient
};

// A tensor kept for backward. Inputs are kept as they are; outputs are kept without their
// grad_fn (that would be a reference cycle) and get it back, weakly, when unpacked. The storage
// version is recorded so that an in-place change before backward is caught.
class SavedTensor {
 public:
  SavedTensor() = default;
  static SavedTensor input(const Tensor& t);
  static SavedTensor output(const Tensor& t, const std::shared_ptr<Node>& producer);
  // The saved tensor; with_graph: reattached to its producer (for create_graph).
  Tensor unpack(const char* op, bool with_graph) const;
  bool defined() const { return data_ != nullptr || storage_ != nullptr; }

 private:
  std::shared_ptr<TensorImpl> data_;  // inputs: the tensor itself
  // outputs: the data only (no TensorImpl copy at save time: saving must be cheap)
  StoragePtr storage_;
  Shape shape_;
  Strides strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::f32;
  std::weak_ptr<Node> producer_;
  uint32_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
};

// What a backward function receives.
struct BackwardCtx {
  std::vector<Tensor>& grads;        // one per forward output; undefined means zero
  std::vector<SavedTensor>& saved;   // in the order the op saved them
  bool create_graph;                 // build a graph of the backward itself (double backward)
  const char* op;
  const std::vector<Edge>* edges;    // the node's next edges
  // Whether forward input i needs a gradient (skip computing it otherwise).
  bool needs(size_t i) const { return i < edges->size() && (*edges)[i].node != nullptr; }
  Tensor saved_tensor(size_t i) const { return saved[i].unpack(op, create_graph); }
  const Tensor& grad(size_t i = 0) const { return grads[i]; }
};

class Node {
 public:
  explicit Node(const char* name);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const char* name() const { return name_; }
  uint64_t sequence_nr() const { return seq_; }
  // Gradients w.r.t. the op's inputs (one per next edge; undefined = no gradient) from the
  // gradients w.r.t. its outputs.
  virtual std::vector<Tensor> apply(std::vector<Tensor>& grads, bool create_graph) = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release_saved() {}

  std::vector<Edge> next_edges;
  uint32_t num_outputs = 1;

  // Scratch state of the engine during one backward walk (avoids hash maps per node).
  int engine_deps = 0;
  bool engine_seen = false;
  std::vector<Tensor> engine_grads;

 private:
  const char* name_;
  uint64_t seq_;
};

// Sink for a leaf's gradient: leaf.grad += g.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : Node("AccumulateGrad"), leaf_(leaf) {}
  std::vector<Tensor> apply(std::vector<Tensor>& grads, bool create_graph) override;
  std::shared_ptr<TensorImpl> leaf() const { return leaf_.lock(); }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// A node whose backward is the callable F(BackwardCtx&) -> std::vector<Tensor>. F captures only
// plain values (dims, scalars); tensors go in `saved` so that they can be released.
template <class F> class FnNode final : public Node {
 public:
  FnNode(const char* name, F f) : Node(name), f_(std::move(f)) {}
  std::vector<SavedTensor> saved;
  std::vector<Tensor> apply(std::vector<Tensor>& grads, bool create_graph) override {
    check_not_released();
    BackwardCtx ctx{grads, saved, create_graph, name(), &next_edges};
    return f_(ctx);
  }
  void release_saved() override {
    saved.clear();
    released_ = true;
  }

 private:
  void check_not_released() const;
  F f_;
  bool released_ = false;
};

[[noreturn]] void throw_released(const char* op);
template <class F> void FnNode<F>::check_not_released() const {
  if (released_) throw_released(name());
}

// The edge along which a gradient for `t` flows (null edge if t needs no grad).
Edge gradient_edge(const Tensor& t);
// True when grad mode is on and some input requires grad.
inline bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}
// Makes `out` the output number `nr` of node (sets grad_fn and requires_grad).
void set_history(const Tensor& out, const std::shared_ptr<Node>& node, uint32_t nr = 0);

// Records op `name` with backward `f` when any input requires grad (else returns null).
// Usage:  if (auto n = record(name, {a, b}, f)) { n->saved = {...}; set_history(y, n); }
template <class F>
std::shared_ptr<FnNode<F>> record(const char* name, std::initializer_list<Tensor> inputs, F f) {
  bool any = false;
  if (GradMode::is_enabled())
    for (const Tensor& t : inputs) any |= t.defined() && t.requires_grad();
  if (!any) return nullptr;
  auto node = std::make_shared<FnNode<F>>(name, std::move(f));
  node->next_edges.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next_edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
  return node;
}

// Gradients of `outputs` w.r.t. `inputs` (like torch.autograd.grad); does not touch .grad.
// An input that does not influence the outputs gets an undefined tensor (or an error unless
// allow_unused).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

}  // namespace graft
