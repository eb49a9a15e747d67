// graft::Tensor — a shared handle to (storage, offset, shape, strides, dtype) plus autograd
// state. Copies share data, like torch.Tensor. Views (reshape, transpose, slice, expand, ...)
// share storage and are differentiable.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "autograd/context.h"
#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/random.h"
#include "ops/shape.h"
#include "ops/storage.h"
#include "ops/view.h"

namespace graft {

class Node;
class Tensor;

// Construction options, PyTorch-style: TensorOptions().dtype(DType::f64).requires_grad(true).
struct TensorOptions {
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
  TensorOptions() = default;
  TensorOptions(DType t) : dtype_(t) {}  // NOLINT: implicit, so zeros({2}, DType::f64) reads well
  TensorOptions dtype(DType t) const { auto o = *this; o.dtype_ = t; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
};

struct TensorImpl {
  StoragePtr storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Strides strides;
  DType dtype = DType::f32;
  bool requires_grad = false;        // leaf flag set by the user (or: has a grad_fn)
  std::shared_ptr<Node> grad_fn;     // the node that produced this tensor (null for leaves)
  uint32_t output_nr = 0;            // which output of grad_fn this is
  std::shared_ptr<TensorImpl> grad;  // accumulated gradient (leaves)
  std::weak_ptr<Node> grad_accumulator;  // cached AccumulateGrad node of a leaf
  // Run after backward() has added into `grad` (leaves): {id, fn}; see
  // Tensor::register_post_accumulate_grad_hook.
  std::vector<std::pair<uint64_t, std::function<void(const class Tensor&)>>> post_accumulate_hooks;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // A new uninitialised contiguous tensor.
  static Tensor empty(const Shape& shape, TensorOptions opt = {});

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  const Strides& strides() const { return impl_->strides; }
  int dim() const { return impl_->shape.size(); }
  int64_t size(int64_t d) const;
  int64_t numel() const { return impl_->shape.numel(); }
  int64_t offset() const { return impl_->offset; }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device(); }
  // dtype and device, for making a tensor like this one: zeros(s, x.options()).
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  bool is_contiguous() const;
  const StoragePtr& storage() const { return impl_->storage; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  // What kernels see: pointer (offset applied), dtype, shape, strides, device.
  TensorView kview() const;
  // Typed pointer to element [0,...] (CPU only; checks the dtype).
  template <class T> T* data() const;
  // The single value of a one-element tensor, converted to T.
  template <class T = double> T item() const;
  // All values in row-major order, converted to T (copies to CPU if needed).
  template <class T> std::vector<T> to_vector() const;

  // ---- autograd
  bool requires_grad() const { return impl_->requires_grad; }
  Tensor& requires_grad_(bool r = true);
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl_->grad_fn; }
  Tensor grad() const { return Tensor(impl_->grad); }
  void set_grad(const Tensor& g) { impl_->grad = g.impl_; }
  // Backpropagates from this tensor. `grad` defaults to 1 for a one-element tensor.
  void backward(const Tensor& grad = {}, bool retain_graph = false, bool create_graph = false) const;
  // The same data, cut from the graph.
  Tensor detach() const;
  // fn(leaf) runs each time a backward() has finished adding into this leaf's .grad — the
  // moment its gradient for that backward is complete (PyTorch's
  // register_post_accumulate_grad_hook; data-parallel training starts communication there).
  // Returns an id for remove_post_accumulate_grad_hook. graft::Error for a non-leaf.
  uint64_t register_post_accumulate_grad_hook(std::function<void(const Tensor&)> fn) const;
  void remove_post_accumulate_grad_hook(uint64_t id) const;

  // ---- conversions and copies
  Tensor to(DType t) const;
  Tensor to(Device d) const;
  Tensor contiguous() const;
  Tensor clone() const;

  // ---- views (share storage; differentiable)
  Tensor view(const Shape& shape) const;     // needs compatible strides; -1 infers one dim
  Tensor reshape(const Shape& shape) const;  // view if possible, else copy
  Tensor flatten() const { return reshape({-1}); }
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes `dim`
  Tensor expand(const Shape& shape) const;          // -1 keeps a dim
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;

  // ---- in-place (not recorded by autograd: allowed on tensors that require grad only under
  // NoGradGuard, as optimisers do). Each bumps the storage version.
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  // src broadcast to this shape, cast to this dtype
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(double s);

  std::string str() const;  // fmt-printed values, like torch's repr

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Raises graft::Error unless `t` is defined (op name in the message).
void check_defined(const Tensor& t, const char* op);

// ---- factories
Tensor empty(const Shape& shape, TensorOptions opt = {});
Tensor zeros(const Shape& shape, TensorOptions opt = {});
Tensor ones(const Shape& shape, TensorOptions opt = {});
Tensor full(const Shape& shape, double value, TensorOptions opt = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor arange(double start, double end, double step = 1.0, TensorOptions opt = DType::i64);
Tensor arange(int64_t end, TensorOptions opt = DType::i64);
Tensor scalar_tensor(double v, TensorOptions opt = {});
// Copies `values` into a new tensor of `shape` (numel must match).
Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions opt = {});
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape);
Tensor tensor(std::initializer_list<double> values, TensorOptions opt = {});
// Uniform [lo, hi) / standard normal from a generator (default: the global one).
Tensor rand(const Shape& shape, TensorOptions opt = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions opt = {}, Generator* gen = nullptr);
Tensor uniform(const Shape& shape, double lo, double hi, TensorOptions opt = {},
               Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator* gen = nullptr);

template <class T> T* Tensor::data() const {
  GRAFT_CHECK(defined(), "data: tensor is undefined");
  GRAFT_CHECK(dtype() == dtype_of<T>, "data<{}>: tensor has dtype {}", dtype_name(dtype_of<T>),
              dtype());
  GRAFT_CHECK(device().is_cpu(), "data: tensor is on {}; hint: call .to(Device::cpu()) first",
              device().str());
  // set while graft::compile traces (AutogradContext::host_access)
  if (auto hook = autograd_context().host_access) hook(*this);
  return static_cast<T*>(impl_->storage->data()) + impl_->offset;
}

}  // namespace graft

template <> struct fmt::formatter<graft::Tensor> : fmt::formatter<std::string> {
  auto format(const graft::Tensor& t, format_context& ctx) const {
    return fmt::formatter<std::string>::format(t.str(), ctx);
  }
};
