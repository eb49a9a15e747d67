// Indexing ops: embedding, index_select, gather (torch semantics), and the two internal
// accumulating ops their backwards are made of: index_add and scatter_add into zeros. Each
// pair is the other's backward (index_select <-> index_add, gather <-> scatter_add), so
// gradients of any order come from the same four recorded ops.
//
// Indices are validated here, before any kernel runs, with messages that name the op, the
// offending value and the valid range (the kernels check too, but only as a last guard).
#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

namespace {

void check_index_dtype(const Tensor& index, const char* op, const char* what = "index") {
  check_defined(index, op);
  GRAFT_CHECK(index.dtype() == DType::i64,
              "{}: {} must be int64, got {}; hint: convert with .to(DType::i64)", op, what,
              index.dtype());
}

// Calls f(value, linear_position) for every element of the int64 tensor `index` (row-major).
template <class F> void for_each_index(const Tensor& index, F&& f) {
  if (index.numel() == 0) return;
  if (index.device().is_cpu()) {
    const int64_t* p = index.data<int64_t>();
    for_each_offset(index.shape(), index.strides(), [&](int64_t i, int64_t off) { f(p[off], i); });
  } else {
    std::vector<int64_t> v = index.to_vector<int64_t>();
    for (size_t i = 0; i < v.size(); ++i) f(v[i], int64_t(i));
  }
}

// The first index outside [0, size), or -1 (as position) when all are valid.
struct BadIndex {
  int64_t value = 0, pos = -1;
};
BadIndex find_bad_index(const Tensor& index, int64_t size) {
  BadIndex bad;
  for_each_index(index, [&](int64_t v, int64_t i) {
    if (bad.pos < 0 && (v < 0 || v >= size)) bad = {v, i};
  });
  return bad;
}

void check_index_range(const Tensor& index, int64_t size, int dim, const char* op) {
  BadIndex b = find_bad_index(index, size);
  GRAFT_CHECK(b.pos < 0, "{}: index {} out of range for dim {} of size {} (valid 0..{})", op,
              b.value, dim, size, size - 1);
}

// ---- the two internal accumulating ops (differentiable; recorded as "index_add" and
// "scatter_add")

// out = zeros(shape) with src added at `index` along dim by the Backend kernel `kernel`,
// recorded as `op`; the backward reads the incoming grad back at the same indices with
// `read_back`. Indices must already be valid (callers check; the kernel checks again).
Tensor add_into_zeros(const char* op, decltype(Backend::index_add) Backend::* kernel,
                      Tensor (*read_back)(const Tensor&, int64_t, const Tensor&),
                      const Shape& shape, int dim, const Tensor& index, const Tensor& src) {
  Tensor out = zeros(shape, src.options());
  const Backend& be = detail::backend(op, {&src, &index});
  detail::need(be.*kernel, op, src)(out.kview(), dim, index.kview(), src.kview());
  if (auto n = record(op, {src}, [dim, read_back](BackwardCtx& c) -> std::vector<Tensor> {
        if (!c.grad().defined()) return {Tensor()};
        // dsrc = dy read at the indices (index_select / gather)
        return {read_back(c.grad(), dim, c.saved_tensor(0))};
      })) {
    n->saved = {SavedTensor::input(index)};
    set_history(out, n);
  }
  return out;
}

// out = zeros(shape) with out[.., index[i], ..] += src[.., i, ..] along dim.
Tensor index_add_into_zeros(const Shape& shape, int dim, const Tensor& index, const Tensor& src) {
  return add_into_zeros("index_add", &Backend::index_add, index_select, shape, dim, index, src);
}

// out = zeros(shape) with out[.., index[i][j], ..] += src[i][j] along dim (torch.scatter_add).
Tensor scatter_add_into_zeros(const Shape& shape, int dim, const Tensor& index, const Tensor& src) {
  return add_into_zeros("scatter_add", &Backend::scatter_add, gather, shape, dim, index, src);
}

}  // namespace

// ------------------------------------------------------------------ public ops

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "index_select");
  check_index_dtype(index, "index_select");
  GRAFT_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape {}; hint: flatten it "
              "and reshape the result", index.shape());
  int k = wrap_dim(dim, x.dim(), "index_select");
  const int64_t size = x.dim() == 0 ? 1 : x.shape()[k];
  check_index_range(index, size, k, "index_select");
  const Backend& be = detail::backend("index_select", {&x, &index});
  Shape s = x.shape();
  if (x.dim() == 0) s = index.shape();
  else s[k] = index.numel();
  Tensor y = Tensor::empty(s, x.options());
  detail::need(be.index_select, "index_select", x)(x.kview(), k, index.kview(), y.kview());
  Shape in = x.shape();
  if (auto n = record("index_select", {x}, [in, k](BackwardCtx& c) -> std::vector<Tensor> {
        const Tensor& dy = c.grad();
        if (!dy.defined()) return {Tensor()};
        // dx = zeros(x.shape) with dx[.., index[i], ..] += dy[.., i, ..]
        Tensor index = c.saved_tensor(0);
        Tensor g = in.size() == 0 ? dy.reshape({index.numel()}) : dy;
        Tensor dx = index_add_into_zeros(in.size() == 0 ? Shape{1} : in, k, index, g);
        return {in.size() == 0 ? dx.reshape(in) : dx};
      })) {
    n->saved = {SavedTensor::input(index)};
    set_history(y, n);
  }
  return y;
}

void index_select_out(Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(out, "index_select_out");
  check_defined(x, "index_select_out");
  check_index_dtype(index, "index_select_out");
  GRAFT_CHECK(!(GradMode::is_enabled() && x.requires_grad()),
              "index_select_out: not differentiable, but x requires grad; hint: use index_select, "
              "or call it under NoGradGuard");
  GRAFT_CHECK(index.dim() == 1 && x.dim() >= 1,
              "index_select_out: needs x of rank >= 1 and a 1-D index, got {} and {}", x.shape(),
              index.shape());
  const int k = wrap_dim(dim, x.dim(), "index_select_out");
  check_index_range(index, x.shape()[k], k, "index_select_out");
  Shape s = x.shape();
  s[k] = index.numel();
  GRAFT_CHECK(out.shape() == s && out.dtype() == x.dtype() && out.device() == x.device(),
              "index_select_out: out is {} {} on {}, expected {} {} on {}", out.dtype(),
              out.shape(), out.device().str(), x.dtype(), s, x.device().str());
  GRAFT_CHECK(out.storage() != x.storage(),
              "index_select_out: out shares storage with x (the copy would read what it writes)");
  if (!out.device().is_cpu() && !out.is_contiguous()) {  // the device kernels write dense outputs
    out.copy_(index_select(x, k, index));
    return;
  }
  const Backend& be = detail::backend("index_select", {&x, &index, &out});
  detail::need(be.index_select, "index_select", x)(x.kview(), k, index.kview(), out.kview());
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "gather");
  check_index_dtype(index, "gather");
  GRAFT_CHECK(index.dim() == x.dim(),
              "gather: index must have the same rank as the input, got index {} for input {}",
              index.shape(), x.shape());
  int k = wrap_dim(dim, x.dim(), "gather");
  for (int d = 0; d < x.dim(); ++d)
    GRAFT_CHECK(d == k || index.shape()[d] <= x.shape()[d],
                "gather: index {} is larger than the input {} at dim {} ({} > {}); only dim {} "
                "may be larger",
                index.shape(), x.shape(), d, index.shape()[d], x.shape()[d], k);
  const int64_t size = x.dim() == 0 ? 1 : x.shape()[k];
  check_index_range(index, size, k, "gather");
  const Backend& be = detail::backend("gather", {&x, &index});
  Tensor y = Tensor::empty(index.shape(), x.options());
  detail::need(be.gather, "gather", x)(x.kview(), k, index.kview(), y.kview());
  Shape in = x.shape();
  if (auto n = record("gather", {x}, [in, k](BackwardCtx& c) -> std::vector<Tensor> {
        const Tensor& dy = c.grad();
        if (!dy.defined()) return {Tensor()};
        // dx = zeros(x.shape) with dx[.., index[i][j], ..] += dy[i][j] along dim
        return {scatter_add_into_zeros(in, k, c.saved_tensor(0), dy)};
      })) {
    n->saved = {SavedTensor::input(index)};
    set_history(y, n);
  }
  return y;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  check_defined(weight, "embedding");
  check_index_dtype(indices, "embedding", "indices");
  detail::check_float(weight, "embedding");
  GRAFT_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [num_embeddings, dim], got shape {}",
              weight.shape());
  const int64_t V = weight.shape()[0], C = weight.shape()[1];
  BadIndex bad = find_bad_index(indices, V);
  GRAFT_CHECK(bad.pos < 0,
              "embedding: index {} out of range for a weight with {} rows (valid 0..{}); it is "
              "element {} of the indices (shape {})",
              bad.value, V, V - 1, bad.pos, indices.shape());
  std::optional<int64_t> pad;
  if (padding_idx) {
    GRAFT_CHECK(*padding_idx >= -V && *padding_idx < V,
                "embedding: padding_idx {} out of range for a weight with {} rows (valid {}..{})",
                *padding_idx, V, -V, V - 1);
    pad = *padding_idx < 0 ? *padding_idx + V : *padding_idx;
  }
  const Backend& be = detail::backend("embedding", {&weight, &indices});
  Shape s = indices.shape();
  s.push_back(C);
  Tensor y = Tensor::empty(s, weight.options());
  // The kernel sees the output as [K, C] (y is contiguous) and the indices as a flat list.
  const int64_t K = indices.numel();
  TensorView yv = y.kview();
  yv.shape = Shape{K, C};
  yv.strides = contiguous_strides(yv.shape);
  detail::need(be.index_select, "embedding", weight)(weight.kview(), 0, indices.kview(), yv);
  if (auto n = record("embedding", {weight}, [V, C, K, pad](BackwardCtx& c) -> std::vector<Tensor> {
        Tensor dy = c.grad();
        if (!dy.defined()) return {Tensor()};
        Tensor idx = c.saved_tensor(0);
        // rows looked up with padding_idx get no gradient: dy[..., :] = 0 where idx == pad
        if (pad) {
          Tensor mask = eq(idx, full(Shape{}, double(*pad), TensorOptions(DType::i64).device(idx.device())));
          dy = masked_fill(dy, mask.unsqueeze(-1), 0.0);
        }
        // dw = zeros([V, C]) with dw[idx[k]] += dy[k] (rows of dy flattened to [K, C])
        return {index_add_into_zeros(Shape{V, C}, 0, idx.reshape({K}), dy.reshape({K, C}))};
      })) {
    n->saved = {SavedTensor::input(indices)};
    set_history(y, n);
  }
  return y;
}

// ------------------------------------------------------------------ op table entries
using namespace cases;

void register_index_ops(std::vector<OpInfo>& t) {
  auto has_select = [](const Backend& b) { return b.index_select && b.index_add && b.fill; };
  auto has_gather = [](const Backend& b) { return b.gather && b.scatter_add && b.fill; };
  auto ix = [](std::vector<int64_t> v, const Shape& s) { return from_vector(v, s); };

  // padding_idx: the forward still reads the padding row while its gradient is defined as
  // zero, so finite differences would disagree; the padding cases zero the outputs at padding
  // positions (masked_fill), which makes zero the true derivative of the checked function
  // while the other rows still check the masking of dy (test_index_loss.cpp checks the
  // padding row's zero gradient directly).
  auto masked_pad = [](const Tensor& y, const Tensor& idx, int64_t pad_row) {
    return masked_fill(y, eq(idx, full(Shape{}, double(pad_row), DType::i64)).unsqueeze(-1), 0.0);
  };
  t.push_back({"embedding", true,
               [](const Backend& b) { return b.index_select && b.index_add && b.compare && b.where; },
               [ix, masked_pad](Generator& g) {
                 Tensor idx = ix({1, 3, 1, 0, 4, 3}, {2, 3});  // repeated ids 1 and 3
                 Tensor idx1 = ix({2, 4, 0, 4, 2}, {5});
                 return std::vector<OpCase>{
                     mk("w [5,3], ids [2,3] repeated", {u(g, {5, 3})},
                        [idx](const auto& in) { return embedding(in[0], idx); }),
                     mk("w [5,3], ids [2,3], padding_idx 1", {u(g, {5, 3})},
                        [idx, masked_pad](const auto& in) {
                          return masked_pad(embedding(in[0], idx, 1), idx, 1);
                        }),
                     mk("w [5,4], ids [5], padding_idx -1 (row 4), squared", {u(g, {5, 4})},
                        [idx1, masked_pad](const auto& in) {
                          Tensor e = masked_pad(embedding(in[0], idx1, -1), idx1, 4);
                          return e * e;
                        })};
               }});
  t.push_back({"index_select", true, has_select, [ix](Generator& g) {
                 Tensor i0 = ix({2, 0, 2, 3}, {4});
                 Tensor i1 = ix({4, 1, 1}, {3});
                 return std::vector<OpCase>{
                     mk("[4,3] dim 0, ids {2,0,2,3}", {u(g, {4, 3})},
                        [i0](const auto& in) { return index_select(in[0], 0, i0); }),
                     mk("[3,5] dim 1, ids {4,1,1}", {u(g, {3, 5})},
                        [i1](const auto& in) { return index_select(in[0], 1, i1); }),
                     mk("transposed [5,3]^T dim -1, squared", {u(g, {5, 3})},
                        [i1](const auto& in) {
                          Tensor y = index_select(in[0].t(), -1, i1);
                          return y * y;
                        })};
               }});
  t.push_back({"gather", true, has_gather, [ix](Generator& g) {
                 Tensor i0 = ix({0, 2, 1, 2, 2, 2, 0, 1}, {2, 4});
                 Tensor i1 = ix({4, 4, 0, 1, 2, 1}, {3, 2});
                 Tensor i2 = ix({3, 0, 3, 3, 1, 2}, {2, 3});
                 return std::vector<OpCase>{
                     mk("[3,4] dim 0, index [2,4]", {u(g, {3, 4})},
                        [i0](const auto& in) { return gather(in[0], 0, i0); }),
                     mk("[3,5] dim 1, index [3,2] repeated", {u(g, {3, 5})},
                        [i1](const auto& in) { return gather(in[0], 1, i1); }),
                     mk("[4,4] dim 1, smaller index [2,3], squared", {u(g, {4, 4})},
                        [i2](const auto& in) {
                          Tensor y = gather(in[0], 1, i2);
                          return y * y;
                        })};
               }});
  t.push_back({"index_add", true, has_select, [ix](Generator& g) {
                 Tensor i0 = ix({0, 2, 2, 4}, {4});
                 return std::vector<OpCase>{
                     mk("zeros [5,3] dim 0 <- src [4,3], ids {0,2,2,4}, squared", {u(g, {4, 3})},
                        [i0](const auto& in) {
                          Tensor y = index_add_into_zeros({5, 3}, 0, i0, in[0]);
                          return y * y;
                        })};
               }});
  t.push_back({"scatter_add", true, has_gather, [ix](Generator& g) {
                 Tensor i1 = ix({0, 4, 4, 1, 2, 2, 2, 3, 1, 0, 3, 0}, {3, 4});
                 return std::vector<OpCase>{
                     mk("zeros [3,5] dim 1 <- src [3,4], squared", {u(g, {3, 4})},
                        [i1](const auto& in) {
                          Tensor y = scatter_add_into_zeros({3, 5}, 1, i1, in[0]);
                          return y * y;
                        })};
               }});
}

}  // namespace graft
