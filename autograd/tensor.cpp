// Tensor basics: factories, metadata, conversions, in-place ops. Views are in ops_shape.cpp.
#include "autograd/tensor.h"

#include <cmath>

#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

void check_defined(const Tensor& t, const char* op) {
  GRAFT_CHECK(t.defined(), "{}: got an undefined tensor", op);
}

// ------------------------------------------------------------------ detail helpers
namespace detail {

const Backend& backend(const char* op, std::initializer_list<const Tensor*> inputs) {
  const Tensor* first = nullptr;
  for (const Tensor* t : inputs) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
    } else {
      GRAFT_CHECK(t->device() == first->device(),
                  "{}: inputs are on different devices ({} and {}); hint: move them with "
                  ".to(device) first",
                  op, first->device().str(), t->device().str());
    }
  }
  GRAFT_CHECK(first, "{}: got no defined input", op);
  const Backend* b = backend_for(first->device());
  GRAFT_CHECK(b, "{}: no kernels for device {} (graft was built without it or it is unavailable)",
              op, first->device().str());
  return *b;
}

void check_float(const Tensor& x, const char* op) {
  GRAFT_CHECK(is_floating(x.dtype()), "{}: expected a floating tensor (float32 or float64), got {}",
              op, x.dtype());
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  GRAFT_CHECK(a.dtype() == b.dtype(), "{}: dtypes differ ({} and {}); hint: convert with .to(dtype)",
              op, a.dtype(), b.dtype());
}

TensorView broadcast_view(const Tensor& x, const Shape& shape) { return x.kview().broadcast_to(shape); }

std::vector<int> wrap_dims(const std::vector<int64_t>& dims, int rank, const char* op) {
  std::vector<int> out;
  if (dims.empty()) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) {
    int w = wrap_dim(d, rank, op);
    GRAFT_CHECK(std::find(out.begin(), out.end(), w) == out.end(), "{}: dim {} repeated", op, d);
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace detail

// ------------------------------------------------------------------ construction
Tensor Tensor::empty(const Shape& shape, TensorOptions opt) {
  for (int64_t d : shape)
    GRAFT_CHECK(d >= 0, "empty: negative dimension in shape {}", shape.str());
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(shape, opt.dtype_, opt.device_);  // sized, or a clear error
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = opt.dtype_;
  Tensor t(std::move(impl));
  if (opt.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor empty(const Shape& shape, TensorOptions opt) { return Tensor::empty(shape, opt); }

Tensor full(const Shape& shape, double value, TensorOptions opt) {
  bool rg = opt.requires_grad_;
  Tensor t = Tensor::empty(shape, opt.requires_grad(false));
  detail::need(detail::backend("full", {&t}).fill, "full", t)(t.kview(), value);
  if (rg) t.requires_grad_(true);
  return t;
}
Tensor zeros(const Shape& shape, TensorOptions opt) { return full(shape, 0.0, opt); }
Tensor ones(const Shape& shape, TensorOptions opt) { return full(shape, 1.0, opt); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.options()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.options()); }
Tensor scalar_tensor(double v, TensorOptions opt) { return full(Shape{}, v, opt); }

Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions opt) {
  GRAFT_CHECK(int64_t(values.size()) == shape.numel(),
              "from_vector: {} values do not fill shape {} ({} elements)", values.size(),
              shape.str(), shape.numel());
  Tensor t = Tensor::empty(shape, TensorOptions(opt.dtype_));
  GRAFT_DISPATCH_ALL(t.dtype(), "from_vector", T, [&] {
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  if (!opt.device_.is_cpu()) t = t.to(opt.device_);
  if (opt.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape) {
  GRAFT_CHECK(int64_t(values.size()) == shape.numel(),
              "from_vector: {} values do not fill shape {}", values.size(), shape.str());
  Tensor t = Tensor::empty(shape, DType::i64);
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

Tensor tensor(std::initializer_list<double> values, TensorOptions opt) {
  return from_vector(std::vector<double>(values), Shape{int64_t(values.size())}, opt);
}

Tensor arange(double start, double end, double step, TensorOptions opt) {
  GRAFT_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
              "arange: step must be non-zero and bounds finite");
  int64_t n = std::max<int64_t>(0, int64_t(std::ceil((end - start) / step)));
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + double(i) * step;
  return from_vector(v, Shape{n}, opt);
}
Tensor arange(int64_t end, TensorOptions opt) { return arange(0.0, double(end), 1.0, opt); }

Tensor uniform(const Shape& shape, double lo, double hi, TensorOptions opt, Generator* gen) {
  GRAFT_CHECK(is_floating(opt.dtype_), "uniform: dtype must be floating, got {}", opt.dtype_);
  Generator& g = gen ? *gen : default_generator();
  Tensor t = Tensor::empty(shape, opt.requires_grad(false));
  const Backend& b = detail::backend("rand", {&t});
  detail::need(b.uniform, "rand", t)(t.kview(), g.seed, g.advance(uint64_t(t.numel())));
  if (lo != 0.0 || hi != 1.0) {
    NoGradGuard ng;
    t = add(mul(t, hi - lo), lo);
  }
  if (opt.requires_grad_) t.requires_grad_(true);
  return t;
}
Tensor rand(const Shape& shape, TensorOptions opt, Generator* gen) { return uniform(shape, 0, 1, opt, gen); }

Tensor randn(const Shape& shape, TensorOptions opt, Generator* gen) {
  GRAFT_CHECK(is_floating(opt.dtype_), "randn: dtype must be floating, got {}", opt.dtype_);
  Generator& g = gen ? *gen : default_generator();
  Tensor t = Tensor::empty(shape, opt.requires_grad(false));
  const Backend& b = detail::backend("randn", {&t});
  detail::need(b.normal, "randn", t)(t.kview(), g.seed, g.advance(uint64_t(t.numel())));
  if (opt.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator* gen) {
  GRAFT_CHECK(high > low, "randint: need low < high, got [{}, {})", low, high);
  Generator& g = gen ? *gen : default_generator();
  Tensor t = Tensor::empty(shape, DType::i64);
  uint64_t off = g.advance(uint64_t(t.numel()));
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = low + std::min<int64_t>(high - low - 1,
                                   int64_t(philox_uniform(g.seed, off + i) * double(high - low)));
  return t;
}

// ------------------------------------------------------------------ metadata
int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const { return kview().is_contiguous(); }

TensorView Tensor::kview() const {
  TensorView v;
  v.data = static_cast<char*>(impl_->storage->data()) + impl_->offset * int64_t(dtype_size(impl_->dtype));
  v.dtype = impl_->dtype;
  v.shape = impl_->shape;
  v.strides = impl_->strides;
  v.device = impl_->storage->device();
  return v;
}

template <class T> std::vector<T> Tensor::to_vector() const {
  check_defined(*this, "to_vector");
  Tensor c = device().is_cpu() ? *this : to(Device::cpu());
  Tensor d = c.to(dtype_of<T>).contiguous();
  const T* p = d.data<T>();
  return std::vector<T>(p, p + d.numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

template <class T> T Tensor::item() const {
  check_defined(*this, "item");
  GRAFT_CHECK(numel() == 1, "item: tensor has {} elements (shape {}), expected exactly one",
              numel(), shape().str());
  return static_cast<T>(to_vector<double>()[0]);
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;

// ------------------------------------------------------------------ autograd state
Tensor& Tensor::requires_grad_(bool r) {
  check_defined(*this, "requires_grad_");
  GRAFT_CHECK(is_leaf() || r, "requires_grad_(false): only leaf tensors can stop requiring grad; "
              "hint: use .detach()");
  GRAFT_CHECK(!r || is_floating(dtype()),
              "requires_grad_: only floating tensors can require grad, this one is {}", dtype());
  impl_->requires_grad = r;
  return *this;
}

Tensor Tensor::detach() const {
  check_defined(*this, "detach");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->offset = impl_->offset;
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

// ------------------------------------------------------------------ copies and conversions
Tensor Tensor::clone() const {
  check_defined(*this, "clone");
  Tensor out = Tensor::empty(shape(), options());
  detail::need(detail::backend("clone", {this}).copy, "clone", *this)(out.kview(), kview());
  if (auto n = record("clone", {*this}, [](BackwardCtx& c) -> std::vector<Tensor> {
        return {c.grad()};  // dx = dy
      }))
    set_history(out, n);
  return out;
}

Tensor Tensor::contiguous() const {
  check_defined(*this, "contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::to(DType t) const {
  check_defined(*this, "to");
  if (t == dtype()) return *this;
  Tensor out = Tensor::empty(shape(), TensorOptions(t).device(device()));
  detail::need(detail::backend("to", {this}).copy, "to", *this)(out.kview(), kview());
  if (is_floating(t) && is_floating(dtype())) {
    DType src = dtype();
    if (auto n = record("to", {*this}, [src](BackwardCtx& c) -> std::vector<Tensor> {
          return {c.grad().to(src)};  // dx = cast(dy)
        }))
      set_history(out, n);
  }
  return out;
}

Tensor Tensor::to(Device d) const {
  check_defined(*this, "to");
  if (d == device()) return *this;
  GRAFT_CHECK(backend_for(d), "to: no back-end for device {} (graft was built without it or no "
              "such device exists); hint: run `graft devices`", d.str());
  // A contiguous copy on the source device, then one byte copy across (Storage::copy_bytes).
  Tensor src = contiguous();
  Tensor out = Tensor::empty(shape(), TensorOptions(dtype()).device(d));
  const size_t esz = dtype_size(dtype());
  Storage::copy_bytes(out.storage()->data(), d,
                      static_cast<const char*>(src.storage()->data()) + src.offset() * int64_t(esz),
                      src.device(), size_t(numel()) * esz);
  if (is_floating(dtype())) {
    Device from = device();
    if (auto n = record("to", {*this}, [from](BackwardCtx& c) -> std::vector<Tensor> {
          return {c.grad().to(from)};  // dx = dy, moved back to x's device
        }))
      set_history(out, n);
  }
  return out;
}

// ------------------------------------------------------------------ in-place
namespace {
void check_inplace(const Tensor& t, const char* op) {
  check_defined(t, op);
  GRAFT_CHECK(!(GradMode::is_enabled() && t.requires_grad()),
              "{}: in-place operation on a tensor that requires grad; hint: wrap the update in "
              "graft::NoGradGuard (as optimisers do) or use the out-of-place op",
              op);
}
}  // namespace

Tensor& Tensor::fill_(double value) {
  check_inplace(*this, "fill_");
  detail::need(detail::backend("fill_", {this}).fill, "fill_", *this)(kview(), value);
  storage()->bump_version();
  return *this;
}
Tensor& Tensor::zero_() { return fill_(0.0); }

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, "copy_");
  check_defined(src, "copy_");
  Shape b = broadcast_shapes(shape(), src.shape(), "copy_");
  GRAFT_CHECK(b == shape(), "copy_: source of shape {} cannot be broadcast to {}", src.shape(),
              shape());
  const Backend& be = detail::backend("copy_", {this, &src});
  detail::need(be.copy, "copy_", *this)(kview(), src.kview().broadcast_to(shape()));
  storage()->bump_version();
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_inplace(*this, "add_");
  check_defined(other, "add_");
  detail::check_float(*this, "add_");
  Tensor o = other.dtype() == dtype() ? other : other.to(dtype());
  if (alpha != 1.0) o = mul(o, alpha);
  Shape b = broadcast_shapes(shape(), o.shape(), "add_");
  GRAFT_CHECK(b == shape(), "add_: other of shape {} cannot be broadcast to {}", o.shape(), shape());
  const Backend& be = detail::backend("add_", {this, &o});
  if (is_contiguous()) {
    be.binary(BinaryOp::add, kview(), o.kview().broadcast_to(shape()), kview());
  } else {
    Tensor tmp = Tensor::empty(shape(), options());
    be.binary(BinaryOp::add, kview(), o.kview().broadcast_to(shape()), tmp.kview());
    be.copy(kview(), tmp.kview());
  }
  storage()->bump_version();
  return *this;
}

Tensor& Tensor::mul_(double s) {
  check_inplace(*this, "mul_");
  detail::check_float(*this, "mul_");
  const Backend& be = detail::backend("mul_", {this});
  if (is_contiguous()) {
    be.unary(UnaryOp::mul_scalar, s, kview(), kview());
  } else {
    Tensor tmp = Tensor::empty(shape(), options());
    be.unary(UnaryOp::mul_scalar, s, kview(), tmp.kview());
    be.copy(kview(), tmp.kview());
  }
  storage()->bump_version();
  return *this;
}

}  // namespace graft
