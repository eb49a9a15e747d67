// Views (share storage, differentiable) and joining/splitting: view, reshape, transpose,
// permute, slice, narrow, select, expand, squeeze, unsqueeze, cat, stack, split, chunk.
#include <numeric>

#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

namespace {

Tensor alias(const Tensor& base, const Shape& shape, const Strides& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->offset = offset;
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

Shape infer_shape(const Shape& s, int64_t numel, const char* op, const Shape& from) {
  Shape out = s;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      GRAFT_CHECK(infer < 0, "{}: only one dimension can be -1, got {}", op, s.str());
      infer = i;
    } else {
      GRAFT_CHECK(out[i] >= 0, "{}: invalid size {} in {}", op, out[i], s.str());
      GRAFT_CHECK(!__builtin_mul_overflow(known, out[i], &known),
                  "{}: shape {} has more elements than graft allows (2^59)", op, s.str());
    }
  }
  if (infer >= 0) {
    GRAFT_CHECK(known != 0 && numel % known == 0, "{}: shape {} is invalid for input of shape {}",
                op, s.str(), from.str());
    out[infer] = numel / known;
  }
  GRAFT_CHECK(out.numel() == numel, "{}: shape {} is invalid for input of shape {} ({} elements)",
              op, s.str(), from.str(), numel);
  return out;
}

// g of shape `shape` placed into zeros of `in_shape` at [start : : step] along dim.
Tensor slice_backward(const Tensor& g, const Shape& in_shape, int dim, int64_t start, int64_t step);

}  // namespace

Tensor Tensor::view(const Shape& s) const {
  check_defined(*this, "view");
  Shape shp = infer_shape(s, numel(), "view", shape());
  GRAFT_CHECK(is_contiguous(), "view: tensor of shape {} is not contiguous; hint: use reshape() "
              "(which copies when needed) or call contiguous() first", shape());
  Tensor out = alias(*this, shp, contiguous_strides(shp), offset());
  Shape in = shape();
  if (auto n = record("view", {*this}, [in](BackwardCtx& c) -> std::vector<Tensor> {
        return {c.grad().reshape(in)};  // dx = reshape(dy)
      }))
    set_history(out, n);
  return out;
}

Tensor Tensor::reshape(const Shape& s) const {
  check_defined(*this, "reshape");
  return is_contiguous() ? view(s) : contiguous().view(s);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  check_defined(*this, "transpose");
  int a = wrap_dim(d0, dim(), "transpose"), b = wrap_dim(d1, dim(), "transpose");
  if (dim() == 0) return *this;
  Shape s = shape();
  Strides st = strides();
  std::swap(s[a], s[b]);
  std::swap(st[a], st[b]);
  Tensor out = alias(*this, s, st, offset());
  if (auto n = record("transpose", {*this}, [a, b](BackwardCtx& c) -> std::vector<Tensor> {
        return {c.grad().transpose(a, b)};  // dx = dy^T
      }))
    set_history(out, n);
  return out;
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  check_defined(*this, "permute");
  GRAFT_CHECK(int(dims.size()) == dim(), "permute: got {} dims for a tensor of rank {}", dims.size(), dim());
  Shape s = shape(), st = strides();
  std::vector<int64_t> inv(dims.size(), -1);
  for (size_t i = 0; i < dims.size(); ++i) {
    int d = wrap_dim(dims[i], dim(), "permute");
    GRAFT_CHECK(inv[d] < 0, "permute: dim {} repeated", d);
    inv[d] = int64_t(i);
    s[int(i)] = shape()[d];
    st[int(i)] = strides()[d];
  }
  Tensor out = alias(*this, s, st, offset());
  if (auto n = record("permute", {*this}, [inv](BackwardCtx& c) -> std::vector<Tensor> {
        return {c.grad().permute(inv)};  // dx = permute(dy, inverse)
      }))
    set_history(out, n);
  return out;
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_defined(*this, "slice");
  int k = wrap_dim(d, dim(), "slice");
  GRAFT_CHECK(dim() > 0, "slice: cannot slice a 0-dim tensor");
  GRAFT_CHECK(step > 0, "slice: step must be positive, got {}", step);
  int64_t n = shape()[k];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape();
  Strides st = strides();
  s[k] = (end - start + step - 1) / step;
  st[k] = strides()[k] * step;
  Tensor out = alias(*this, s, st, offset() + start * strides()[k]);
  Shape in = shape();
  if (auto node = record("slice", {*this}, [in, k, start, step](BackwardCtx& c) -> std::vector<Tensor> {
        return {slice_backward(c.grad(), in, k, start, step)};  // dx = zeros with dx[slice] = dy
      }))
    set_history(out, node);
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  check_defined(*this, "narrow");
  int k = wrap_dim(d, dim(), "narrow");
  GRAFT_CHECK(start >= 0 && length >= 0 && start + length <= shape()[k],
              "narrow: range [{}, {}) out of bounds for dim {} of size {}", start, start + length,
              k, shape()[k]);
  return slice(k, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_defined(*this, "select");
  int k = wrap_dim(d, dim(), "select");
  int64_t n = shape()[k];
  GRAFT_CHECK(index >= -n && index < n, "select: index {} out of range for dim {} of size {}",
              index, k, n);
  if (index < 0) index += n;
  return slice(k, index, index + 1).squeeze(k);
}

Tensor Tensor::expand(const Shape& target) const {
  check_defined(*this, "expand");
  GRAFT_CHECK(target.size() >= dim(), "expand: target {} has fewer dims than the tensor {}",
              target.str(), shape().str());
  Shape s = target;
  int off = target.size() - dim();
  for (int i = 0; i < target.size(); ++i) {
    if (i >= off && target[i] == -1) s[i] = shape()[i - off];
    GRAFT_CHECK(s[i] >= 0, "expand: invalid size {} in {}", target[i], target.str());
    if (i >= off)
      GRAFT_CHECK(shape()[i - off] == s[i] || shape()[i - off] == 1,
                  "expand: the size of dim {} ({}) must match {} or be 1 (tensor {}, target {})",
                  i - off, shape()[i - off], s[i], shape().str(), target.str());
  }
  TensorView v = kview().broadcast_to(s);
  Tensor out = alias(*this, s, v.strides, offset());
  Shape in = shape();
  if (auto n = record("expand", {*this}, [in](BackwardCtx& c) -> std::vector<Tensor> {
        return {sum_to(c.grad(), in)};  // dx = sum of dy over broadcast dims
      }))
    set_history(out, n);
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  check_defined(*this, "squeeze");
  int k = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || shape()[k] != 1) return *this;
  Shape s = shape();
  s.erase(k);
  Strides st = strides();
  st.erase(k);
  Tensor out = alias(*this, s, st, offset());
  Shape in = shape();
  if (auto n = record("squeeze", {*this}, [in](BackwardCtx& c) -> std::vector<Tensor> {
        return {c.grad().reshape(in)};  // dx = reshape(dy)
      }))
    set_history(out, n);
  return out;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  check_defined(*this, "unsqueeze");
  int k = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape();
  Strides st = strides();
  s.insert(k, 1);
  st.insert(k, k < dim() ? strides()[k] * shape()[k] : 1);
  Tensor out = alias(*this, s, st, offset());
  if (auto n = record("unsqueeze", {*this}, [k](BackwardCtx& c) -> std::vector<Tensor> {
        return {c.grad().squeeze(k)};  // dx = squeeze(dy)
      }))
    set_history(out, n);
  return out;
}

namespace {
Tensor slice_backward(const Tensor& g, const Shape& in_shape, int dim, int64_t start, int64_t step) {
  Tensor out = zeros(in_shape, TensorOptions(g.dtype()).device(g.device()));
  int64_t end = start + (g.shape()[dim] - 1) * step + 1;
  Tensor dst = out.detach().slice(dim, start, end, step);
  detail::backend("slice_backward", {&g}).copy(dst.kview(), g.kview());
  if (auto n = record("slice_backward", {g}, [dim, start, end, step](BackwardCtx& c) -> std::vector<Tensor> {
        return {c.grad().slice(dim, start, end, step)};  // d(dy) = slice(ddx)
      }))
    set_history(out, n);
  return out;
}
}  // namespace

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  GRAFT_CHECK(!xs.empty(), "cat: expected a non-empty list of tensors");
  for (const Tensor& x : xs) check_defined(x, "cat");
  const Tensor& x0 = xs[0];
  int k = wrap_dim(dim, x0.dim(), "cat");
  Shape s = x0.shape();
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    GRAFT_CHECK(x.dim() == x0.dim(), "cat: tensor {} has rank {} but tensor 0 has rank {}", i,
                x.dim(), x0.dim());
    detail::check_same_dtype(x0, x, "cat");
    GRAFT_CHECK(x.device() == x0.device(), "cat: tensor {} is on {} but tensor 0 on {}", i,
                x.device().str(), x0.device().str());
    for (int d = 0; d < x.dim(); ++d)
      GRAFT_CHECK(d == k || x.shape()[d] == s[d],
                  "cat: tensor {} has shape {} but tensor 0 has {} (only dim {} may differ)", i,
                  x.shape(), s, k);
    total += x.shape()[k];
  }
  s[k] = total;
  Tensor out = Tensor::empty(s, TensorOptions(x0.dtype()).device(x0.device()));
  const Backend& be = detail::backend("cat", {&x0});
  std::vector<int64_t> sizes;
  int64_t at = 0;
  for (const Tensor& x : xs) {
    Tensor dst = out.slice(k, at, at + x.shape()[k]);
    be.copy(dst.kview(), x.kview());
    sizes.push_back(x.shape()[k]);
    at += x.shape()[k];
  }
  bool any = false;
  for (const Tensor& x : xs) any |= x.requires_grad();
  if (GradMode::is_enabled() && any) {
    auto f = [k, sizes](BackwardCtx& c) -> std::vector<Tensor> {
      std::vector<Tensor> gs;  // dx_i = dy[offset_i : offset_i + n_i] along dim
      int64_t at = 0;
      for (int64_t n : sizes) {
        gs.push_back(c.grad().slice(k, at, at + n));
        at += n;
      }
      return gs;
    };
    auto node = std::make_shared<FnNode<decltype(f)>>("cat", f);
    for (const Tensor& x : xs) node->next_edges.push_back(gradient_edge(x));
    set_history(out, node);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  GRAFT_CHECK(!xs.empty(), "stack: expected a non-empty list of tensors");
  check_defined(xs[0], "stack");
  int k = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  for (size_t i = 0; i < xs.size(); ++i) {
    check_defined(xs[i], "stack");
    GRAFT_CHECK(xs[i].shape() == xs[0].shape(), "stack: tensor {} has shape {} but tensor 0 has {}",
                i, xs[i].shape(), xs[0].shape());
    us.push_back(xs[i].unsqueeze(k));
  }
  return cat(us, k);
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
  check_defined(x, "split");
  GRAFT_CHECK(size > 0, "split: size must be positive, got {}", size);
  int k = wrap_dim(dim, x.dim(), "split");
  std::vector<Tensor> out;
  for (int64_t at = 0; at < x.shape()[k]; at += size)
    out.push_back(x.slice(k, at, std::min(at + size, x.shape()[k])));
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  check_defined(x, "chunk");
  GRAFT_CHECK(chunks > 0, "chunk: number of chunks must be positive, got {}", chunks);
  int k = wrap_dim(dim, x.dim(), "chunk");
  int64_t n = x.shape()[k];
  return split(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), k);
}

// ------------------------------------------------------------------ op table entries
using namespace cases;

void register_shape_ops(std::vector<OpInfo>& t) {
  auto copy_k = [](const Backend& b) { return b.copy != nullptr; };
  auto add = [&](const char* name, std::function<std::vector<OpCase>(Generator&)> f) {
    t.push_back({name, true, copy_k, std::move(f)});
  };
  add("view", [](Generator& g) {
    return std::vector<OpCase>{mk("[3,4] -> [2,-1]", {u(g, {3, 4})},
                                  [](const auto& in) { return in[0].view({2, -1}) * in[0].view({2, 6}); })};
  });
  add("reshape", [](Generator& g) {
    return std::vector<OpCase>{mk("transposed [4,3] -> [12]", {u(g, {3, 4})},
                                  [](const auto& in) { return in[0].t().reshape({12}); })};
  });
  add("transpose", [](Generator& g) {
    return std::vector<OpCase>{mk("[2,3,4] (0,2)", {u(g, {2, 3, 4})},
                                  [](const auto& in) { return in[0].transpose(0, 2).contiguous(); })};
  });
  add("permute", [](Generator& g) {
    return std::vector<OpCase>{mk("[2,3,4] (2,0,1)", {u(g, {2, 3, 4})},
                                  [](const auto& in) { return in[0].permute({2, 0, 1}) * 1.0; })};
  });
  add("slice", [](Generator& g) {
    return std::vector<OpCase>{
        mk("[5,4] rows 1:5:2", {u(g, {5, 4})}, [](const auto& in) { return in[0].slice(0, 1, 5, 2) * 2.0; }),
        mk("[3,6] cols -4:-1", {u(g, {3, 6})}, [](const auto& in) { return in[0].slice(1, -4, -1) * 1.0; })};
  });
  add("narrow", [](Generator& g) {
    return std::vector<OpCase>{mk("[3,6] dim 1 [2,5)", {u(g, {3, 6})},
                                  [](const auto& in) { return in[0].narrow(1, 2, 3) * 1.0; })};
  });
  add("select", [](Generator& g) {
    return std::vector<OpCase>{mk("[3,4] row -1", {u(g, {3, 4})},
                                  [](const auto& in) { return in[0].select(0, -1) * 1.0; })};
  });
  add("expand", [](Generator& g) {
    return std::vector<OpCase>{mk("[3,1] -> [2,3,4]", {u(g, {3, 1})},
                                  [](const auto& in) { return in[0].expand({2, 3, 4}) * 1.0; })};
  });
  add("squeeze", [](Generator& g) {
    return std::vector<OpCase>{mk("[3,1,4] dim 1", {u(g, {3, 1, 4})},
                                  [](const auto& in) { return in[0].squeeze(1) * 1.0; })};
  });
  add("unsqueeze", [](Generator& g) {
    return std::vector<OpCase>{mk("[3,4] dim -1", {u(g, {3, 4})},
                                  [](const auto& in) { return in[0].unsqueeze(-1) * 1.0; })};
  });
  add("clone", [](Generator& g) {
    return std::vector<OpCase>{mk("transposed [4,3]", {u(g, {3, 4})},
                                  [](const auto& in) { return in[0].t().clone(); })};
  });
  add("to", [](Generator& g) {
    // linear in x, so a large step is exact up to float32 rounding of x +- eps
    OpCase c = mk("f64 -> f32 -> f64", {u(g, {3, 4})},
                  [](const auto& in) { return in[0].to(DType::f32).to(DType::f64) * 1.0; }, false);
    c.eps = 1e-2;
    c.atol = 1e-4;
    return std::vector<OpCase>{c};
  });
  add("cat", [](Generator& g) {
    return std::vector<OpCase>{
        mk("[2,3] ++ transposed [4,3] dim 0", {u(g, {2, 3}), u(g, {3, 4})},
           [](const auto& in) { return cat({in[0], in[1].t()}, 0); }),
        mk("[2,3] ++ [2,1] dim -1", {u(g, {2, 3}), u(g, {2, 1})},
           [](const auto& in) { return cat({in[0], in[1]}, -1); })};
  });
  add("stack", [](Generator& g) {
    return std::vector<OpCase>{mk("3 x [2,3] dim 1", {u(g, {2, 3}), u(g, {2, 3}), u(g, {2, 3})},
                                  [](const auto& in) { return stack({in[0], in[1], in[2]}, 1); })};
  });
  add("split", [](Generator& g) {
    return std::vector<OpCase>{mk("[5,3] by 2 rows, weighted", {u(g, {5, 3})}, [](const auto& in) {
      auto p = split(in[0], 2, 0);  // sizes 2, 2, 1
      return cat({p[0] * 1.0, p[1] * 2.0, p[2] * 3.0}, 0);
    })};
  });
  add("chunk", [](Generator& g) {
    return std::vector<OpCase>{mk("[3,7] in 3 along dim 1", {u(g, {3, 7})}, [](const auto& in) {
      auto p = chunk(in[0], 3, 1);  // sizes 3, 3, 1
      return cat({p[2] * 2.0, p[0], p[1] * -1.0}, 1);
    })};
  });
}

}  // namespace graft
