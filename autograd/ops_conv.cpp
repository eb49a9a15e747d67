// conv1d (stride, padding incl. "same"/"wide", dilation, groups, bias), max/avg pooling over
// windows and over the whole sequence, and their backward ops (each differentiable, so double
// backward composes: conv1d's backward is built from conv1d_backward_input/_weight, whose
// backward is built from conv1d again; pooling likewise).
//
// Shapes: x [B, C_in, L], w [C_out, C_in/G, K], b [C_out], y/dy [B, C_out, L_out].
#include "autograd/conv.h"

#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

namespace {

TensorView none_view(DType dt) {
  TensorView v;
  v.dtype = dt;
  return v;
}

// The two tensor operands of a conv op (x and w, or dy and w, or x and dy): defined, floating,
// one dtype; and the convolution's arguments.
void check_conv_inputs(const Tensor& x, const Tensor& y, const Conv1dArgs& a, const char* op) {
  check_defined(x, op);
  check_defined(y, op);
  detail::check_float(x, op);
  detail::check_same_dtype(x, y, op);
  GRAFT_CHECK(a.stride >= 1, "{}: stride must be >= 1, got {}", op, a.stride);
  GRAFT_CHECK(a.dilation >= 1, "{}: dilation must be >= 1, got {}", op, a.dilation);
  GRAFT_CHECK(a.pad_l >= 0 && a.pad_r >= 0, "{}: padding must be >= 0, got {} / {}", op, a.pad_l,
              a.pad_r);
  GRAFT_CHECK(a.groups >= 1, "{}: groups must be >= 1, got {}", op, a.groups);
}

// Records `out` = op(inputs), saving the first two inputs: backward(c, first, second, grad)
// returns the gradients of the inputs.
template <class F>
void record_saving_two(const char* op, std::initializer_list<Tensor> inputs, Tensor& out,
                       F backward) {
  if (auto n = record(op, inputs, [backward](BackwardCtx& c) -> std::vector<Tensor> {
        return backward(c, c.saved_tensor(0), c.saved_tensor(1), c.grad());
      })) {
    n->saved = {SavedTensor::input(inputs.begin()[0]), SavedTensor::input(inputs.begin()[1])};
    set_history(out, n);
  }
}

// y = conv1d(x, w) + b on a batched x (kernel + autograd).
Tensor conv_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dArgs& a) {
  const int64_t L = x.shape()[2], K = w.shape()[2];
  const int64_t Lout = conv1d_output_length(L, K, a.stride, a.pad_l, a.pad_r, a.dilation);
  const Backend& be = detail::backend("conv1d", {&x, &w, &b});
  Tensor y = Tensor::empty({x.shape()[0], w.shape()[0], Lout}, x.options());
  detail::need(be.conv1d, "conv1d", x)(x.kview(), w.kview(),
                                       b.defined() ? b.kview() : none_view(x.dtype()), a,
                                       y.kview());
  record_saving_two("conv1d", {x, w, b}, y,
                    [a, L, K](BackwardCtx& c, const Tensor& x, const Tensor& w,
                              const Tensor& dy) -> std::vector<Tensor> {
                      // dx = conv1d^T(dy, w); dw = sum_{b,t} dy x-taps; db = sum_{b,t} dy
                      return {c.needs(0) ? conv1d_backward_input(dy, w, L, a) : Tensor(),
                              c.needs(1) ? conv1d_backward_weight(x, dy, K, a) : Tensor(),
                              c.needs(2) ? sum(dy, {0, 2}) : Tensor()};
                    });
  return y;
}

void check_grad_shapes(const char* op, const Tensor& dy, int64_t B, int64_t Cout, int64_t Lout) {
  GRAFT_CHECK(dy.dim() == 3 && dy.shape()[0] == B && dy.shape()[1] == Cout && dy.shape()[2] == Lout,
              "{}: dy has shape {}, expected [{}, {}, {}]", op, dy.shape(), B, Cout, Lout);
}

}  // namespace

int64_t conv1d_output_length(int64_t L, int64_t K, int64_t stride, int64_t pad_l, int64_t pad_r,
                             int64_t dilation) {
  GRAFT_CHECK(K >= 1 && stride >= 1 && dilation >= 1 && pad_l >= 0 && pad_r >= 0,
              "conv1d: kernel_size {}, stride {}, dilation {} must be >= 1 and padding {} / {} "
              ">= 0", K, stride, dilation, pad_l, pad_r);
  const int64_t span = dilation * (K - 1) + 1;  // the effective filter width
  const int64_t padded = L + pad_l + pad_r;
  GRAFT_CHECK(padded >= span,
              "conv1d: input length {} (padded to {}) is shorter than the effective kernel size {} "
              "(kernel_size {}, dilation {}); hint: pad more (e.g. padding=\"wide\") or use a "
              "smaller kernel", L, padded, span, K, dilation);
  return (padded - span) / stride + 1;
}

Tensor conv1d_backward_input(const Tensor& dy, const Tensor& w, int64_t L, const Conv1dArgs& a) {
  const char* op = "conv1d_backward_input";
  check_conv_inputs(dy, w, a, op);
  GRAFT_CHECK(w.dim() == 3 && w.shape()[0] % a.groups == 0, "{}: weight {} must be [C_out, "
              "C_in/groups, K] with C_out divisible by groups {}", op, w.shape(), a.groups);
  GRAFT_CHECK(dy.dim() == 3, "{}: dy must be [B, C_out, L_out], got {}", op, dy.shape());
  const int64_t K = w.shape()[2], Cin = w.shape()[1] * a.groups;
  check_grad_shapes(op, dy, dy.shape()[0], w.shape()[0],
                    conv1d_output_length(L, K, a.stride, a.pad_l, a.pad_r, a.dilation));
  const Backend& be = detail::backend(op, {&dy, &w});
  Tensor dx = Tensor::empty({dy.shape()[0], Cin, L}, dy.options());
  detail::need(be.conv1d_backward_input, op, dy)(dy.kview(), w.kview(), a, dx.kview());
  record_saving_two(op, {dy, w}, dx,
                    [a, K](BackwardCtx& c, const Tensor& dy, const Tensor& w,
                           const Tensor& g) -> std::vector<Tensor> {
                      // d(dy) = conv1d(g, w); d(w) = weight-grad of conv1d(g) against dy
                      return {c.needs(0) ? conv_forward(g, w, Tensor(), a) : Tensor(),
                              c.needs(1) ? conv1d_backward_weight(g, dy, K, a) : Tensor()};
                    });
  return dx;
}

Tensor conv1d_backward_weight(const Tensor& x, const Tensor& dy, int64_t K, const Conv1dArgs& a) {
  const char* op = "conv1d_backward_weight";
  check_conv_inputs(x, dy, a, op);
  GRAFT_CHECK(x.dim() == 3 && dy.dim() == 3, "{}: x and dy must be 3-D, got {} and {}", op,
              x.shape(), dy.shape());
  const int64_t B = x.shape()[0], Cin = x.shape()[1], L = x.shape()[2], Cout = dy.shape()[1];
  GRAFT_CHECK(Cin % a.groups == 0 && Cout % a.groups == 0,
              "{}: channels {} -> {} must both be divisible by groups {}", op, Cin, Cout, a.groups);
  check_grad_shapes(op, dy, B, Cout, conv1d_output_length(L, K, a.stride, a.pad_l, a.pad_r, a.dilation));
  const Backend& be = detail::backend(op, {&x, &dy});
  Tensor dw = Tensor::empty({Cout, Cin / a.groups, K}, x.options());
  detail::need(be.conv1d_backward_weight, op, x)(x.kview(), dy.kview(), a, dw.kview(),
                                                 none_view(x.dtype()));
  record_saving_two(op, {x, dy}, dw,
                    [a, L](BackwardCtx& c, const Tensor& x, const Tensor& dy,
                           const Tensor& g) -> std::vector<Tensor> {
                      // d(x) = conv1d^T(dy, g); d(dy) = conv1d(x, g)
                      return {c.needs(0) ? conv1d_backward_input(dy, g, L, a) : Tensor(),
                              c.needs(1) ? conv_forward(x, g, Tensor(), a) : Tensor()};
                    });
  return dw;
}

namespace {

Tensor conv1d_args(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dArgs& a) {
  const char* op = "conv1d";
  check_conv_inputs(x, w, a, op);
  GRAFT_CHECK(x.dim() == 3 || x.dim() == 2,
              "conv1d: input must be [B, C_in, L] or unbatched [C_in, L], got {}; hint: a batch "
              "of embedded tokens [B, L, C] needs .transpose(1, 2) first", x.shape());
  if (x.dim() == 2) return conv1d_args(x.unsqueeze(0), w, b, a).squeeze(0);
  GRAFT_CHECK(w.dim() == 3, "conv1d: weight must be [C_out, C_in/groups, K], got {}", w.shape());
  const int64_t Cin = x.shape()[1], Cout = w.shape()[0];
  GRAFT_CHECK(Cout % a.groups == 0, "conv1d: out_channels {} is not divisible by groups {}", Cout,
              a.groups);
  GRAFT_CHECK(Cin == w.shape()[1] * a.groups,
              "conv1d: input has {} channels, weight {} expects {} (C_in/groups = {} x groups {})",
              Cin, w.shape(), w.shape()[1] * a.groups, w.shape()[1], a.groups);
  if (b.defined()) {
    detail::check_same_dtype(x, b, op);
    GRAFT_CHECK(b.dim() == 1 && b.shape()[0] == Cout, "conv1d: bias must be [{}], got {}", Cout,
                b.shape());
  }
  return conv_forward(x, w, b, a);
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  return conv1d_args(x, w, b, Conv1dArgs{stride, padding, padding, dilation, groups});
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride,
              const std::string& padding, int64_t dilation, int64_t groups) {
  check_defined(w, "conv1d");
  GRAFT_CHECK(w.dim() == 3, "conv1d: weight must be [C_out, C_in/groups, K], got {}", w.shape());
  GRAFT_CHECK(dilation >= 1, "conv1d: dilation must be >= 1, got {}", dilation);
  const int64_t span = dilation * (w.shape()[2] - 1);  // total padding for "same"/"wide" sides
  Conv1dArgs a{stride, 0, 0, dilation, groups};
  if (padding == "valid") {
  } else if (padding == "same") {
    GRAFT_CHECK(stride == 1, "conv1d: padding=\"same\" needs stride 1, got {}", stride);
    a.pad_l = span / 2, a.pad_r = span - span / 2;
  } else if (padding == "wide") {
    a.pad_l = a.pad_r = span;
  } else {
    throw Error(fmt::format("conv1d: unknown padding \"{}\"; expected \"valid\", \"same\", "
                            "\"wide\" or a number", padding));
  }
  return conv1d_args(x, w, b, a);
}

// ------------------------------------------------------------------ pooling
namespace {

// x [B, C, L] (kernel + autograd); returns y, and the argmax indices for max.
std::pair<Tensor, Tensor> pool_forward(const Tensor& x, const Pool1dArgs& a) {
  const char* op = a.kind == PoolKind::max ? "max_pool1d" : "avg_pool1d";
  const int64_t L = x.shape()[2];
  const int64_t Lout = conv1d_output_length(L, a.kernel, a.stride, a.pad_l, a.pad_r, a.dilation);
  const Backend& be = detail::backend(op, {&x});
  const Shape ys{x.shape()[0], x.shape()[1], Lout};
  Tensor y = Tensor::empty(ys, x.options());
  Tensor idx = a.kind == PoolKind::max ? Tensor::empty(ys, TensorOptions(DType::i64).device(x.device()))
                                       : Tensor();
  detail::need(be.pool1d, op, x)(x.kview(), a, y.kview(),
                                 idx.defined() ? idx.kview() : none_view(DType::i64));
  if (a.kind == PoolKind::max) {
    if (auto n = record(op, {x}, [a, L](BackwardCtx& c) -> std::vector<Tensor> {
          // dx[idx] += dy
          return {max_pool1d_backward(c.grad(), c.saved_tensor(0), L, a)};
        })) {
      n->saved = {SavedTensor::input(idx)};
      set_history(y, n);
    }
  } else if (auto n = record(op, {x}, [a, L](BackwardCtx& c) -> std::vector<Tensor> {
               // dx[l] += sum over windows containing l of dy / divisor
               return {avg_pool1d_backward(c.grad(), L, a)};
             })) {
    set_history(y, n);
  }
  return {y, idx};
}

Tensor pool_checked(const Tensor& x, Pool1dArgs a, std::optional<int64_t> stride,
                    int64_t padding) {
  const char* op = a.kind == PoolKind::max ? "max_pool1d" : "avg_pool1d";
  check_defined(x, op);
  detail::check_float(x, op);
  GRAFT_CHECK(x.dim() == 3 || x.dim() == 2, "{}: input must be [B, C, L] or [C, L], got {}", op,
              x.shape());
  GRAFT_CHECK(a.kernel >= 1, "{}: kernel_size must be >= 1, got {}", op, a.kernel);
  a.stride = stride.value_or(a.kernel);
  GRAFT_CHECK(a.stride >= 1, "{}: stride must be >= 1, got {}", op, a.stride);
  GRAFT_CHECK(a.dilation >= 1, "{}: dilation must be >= 1, got {}", op, a.dilation);
  const int64_t span = a.dilation * (a.kernel - 1) + 1;
  GRAFT_CHECK(padding >= 0 && padding <= span / 2,
              "{}: padding {} must be in [0, {}] (half the effective kernel size {})", op, padding,
              span / 2, span);
  a.pad_l = a.pad_r = padding;
  if (x.dim() == 2) return pool_forward(x.unsqueeze(0), a).first.squeeze(0);
  return pool_forward(x, a).first;
}

}  // namespace

Tensor max_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride,
                  int64_t padding, int64_t dilation) {
  return pool_checked(x, {.kind = PoolKind::max, .kernel = kernel_size, .dilation = dilation},
                      stride, padding);
}

Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride,
                  int64_t padding, bool count_include_pad) {
  return pool_checked(
      x, {.kind = PoolKind::avg, .kernel = kernel_size, .count_include_pad = count_include_pad},
      stride, padding);
}

namespace {
// Pooling over the whole sequence: one window of x's full length L.
Tensor global_pool1d(const Tensor& x, PoolKind kind) {
  const char* op = kind == PoolKind::max ? "global_max_pool1d" : "global_avg_pool1d";
  check_defined(x, op);
  GRAFT_CHECK(x.dim() == 3 || x.dim() == 2, "{}: input must be [B, C, L] or [C, L], got {}", op,
              x.shape());
  const int64_t L = x.shape().back();
  GRAFT_CHECK(L >= 1, "{}: empty sequence (L = 0)", op);
  return (kind == PoolKind::max ? max_pool1d(x, L) : avg_pool1d(x, L)).squeeze(-1);
}
}  // namespace

Tensor global_avg_pool1d(const Tensor& x) { return global_pool1d(x, PoolKind::avg); }

Tensor global_max_pool1d(const Tensor& x) { return global_pool1d(x, PoolKind::max); }

Tensor max_pool1d_backward(const Tensor& dy, const Tensor& idx, int64_t L, const Pool1dArgs& a) {
  const char* op = "max_pool1d_backward";
  check_defined(dy, op);
  check_defined(idx, op);
  detail::check_float(dy, op);
  GRAFT_CHECK(dy.dim() == 3 && idx.dtype() == DType::i64 && idx.shape() == dy.shape(),
              "{}: dy {} must be [B, C, L_out] with int64 indices of the same shape, got {} {}",
              op, dy.shape(), idx.dtype(), idx.shape());
  GRAFT_CHECK(L >= 1, "{}: L must be >= 1, got {}", op, L);
  const Backend& be = detail::backend(op, {&dy, &idx});
  Tensor dx = Tensor::empty({dy.shape()[0], dy.shape()[1], L}, dy.options());
  detail::need(be.pool1d_backward, op, dy)(dy.kview(), idx.kview(), a, dx.kview());
  if (auto n = record(op, {dy}, [](BackwardCtx& c) -> std::vector<Tensor> {
        // d(dy) = g[idx] (gather along the sequence)
        return {gather(c.grad(), 2, c.saved_tensor(0))};
      })) {
    n->saved = {SavedTensor::input(idx)};
    set_history(dx, n);
  }
  return dx;
}

Tensor avg_pool1d_backward(const Tensor& dy, int64_t L, const Pool1dArgs& a) {
  const char* op = "avg_pool1d_backward";
  check_defined(dy, op);
  detail::check_float(dy, op);
  GRAFT_CHECK(dy.dim() == 3, "{}: dy must be [B, C, L_out], got {}", op, dy.shape());
  GRAFT_CHECK(a.kind == PoolKind::avg && a.dilation == 1, "{}: expected avg pooling args", op);
  const int64_t Lout = conv1d_output_length(L, a.kernel, a.stride, a.pad_l, a.pad_r, 1);
  GRAFT_CHECK(dy.shape()[2] == Lout, "{}: dy has length {}, expected {} for L = {}", op,
              dy.shape()[2], Lout, L);
  const Backend& be = detail::backend(op, {&dy});
  Tensor dx = Tensor::empty({dy.shape()[0], dy.shape()[1], L}, dy.options());
  detail::need(be.pool1d_backward, op, dy)(dy.kview(), none_view(DType::i64), a, dx.kview());
  if (auto n = record(op, {dy}, [a](BackwardCtx& c) -> std::vector<Tensor> {
        // d(dy) = avg_pool1d(g) (the transpose of the transpose)
        return {pool_forward(c.grad(), a).first};
      })) {
    set_history(dx, n);
  }
  return dx;
}

// ------------------------------------------------------------------ op table entries
using namespace cases;

void register_conv_ops(std::vector<OpInfo>& t) {
  auto has_conv = [](const Backend& b) {
    return b.conv1d && b.conv1d_backward_input && b.conv1d_backward_weight && b.reduce;
  };
  t.push_back({"conv1d", true, has_conv, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[2,3,7] k3 pad 1, bias", {u(g, {2, 3, 7}), u(g, {4, 3, 3}), u(g, {4})},
                        [](const auto& in) { return conv1d(in[0], in[1], in[2], 1, 1); }),
                     mk("[2,4,9] k2 stride 2 pad 2 dilation 2 groups 2",
                        {u(g, {2, 4, 9}), u(g, {6, 2, 2})},
                        [](const auto& in) { return conv1d(in[0], in[1], {}, 2, 2, 2, 2); }),
                     mk("wide k4, non-contiguous x [2,3,6]",
                        {u(g, {2, 6, 3}), u(g, {2, 3, 4}), u(g, {2})},
                        [](const auto& in) {
                          return conv1d(in[0].transpose(1, 2), in[1], in[2], 1, "wide");
                        }),
                     mk("same k4 (pads 1 left, 2 right), unbatched [3,5]",
                        {u(g, {3, 5}), u(g, {2, 3, 4})},
                        [](const auto& in) { return conv1d(in[0], in[1], {}, 1, "same"); }),
                     mk("stride 3 (last taps unread), depthwise groups 3",
                        {u(g, {1, 3, 8}), u(g, {3, 1, 2}), u(g, {3})},
                        [](const auto& in) { return conv1d(in[0], in[1], in[2], 3, 1, 1, 3); })};
               }});
  t.push_back({"conv1d_backward_input", true, has_conv, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("dy [2,4,7] w [4,3,3] pad 1 -> L 7", {u(g, {2, 4, 7}), u(g, {4, 3, 3})},
                        [](const auto& in) {
                          return conv1d_backward_input(in[0], in[1], 7, Conv1dArgs{1, 1, 1, 1, 1});
                        }),
                     mk("stride 2 groups 2 -> L 8", {u(g, {1, 4, 4}), u(g, {4, 1, 3})},
                        [](const auto& in) {
                          return conv1d_backward_input(in[0], in[1], 8, Conv1dArgs{2, 1, 1, 1, 2});
                        })};
               }});
  t.push_back({"conv1d_backward_weight", true, has_conv, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("x [2,3,6] dy [2,2,4] k3", {u(g, {2, 3, 6}), u(g, {2, 2, 4})},
                        [](const auto& in) {
                          return conv1d_backward_weight(in[0], in[1], 3, Conv1dArgs{});
                        }),
                     mk("dilation 2 pad 2 groups 2", {u(g, {1, 4, 5}), u(g, {1, 2, 5})},
                        [](const auto& in) {
                          return conv1d_backward_weight(in[0], in[1], 3, Conv1dArgs{1, 2, 2, 2, 2});
                        })};
               }});
  auto has_pool = [](const Backend& b) { return b.pool1d && b.pool1d_backward && b.gather; };
  t.push_back({"max_pool1d", true, has_pool, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[2,3,8] k3 stride 2 pad 1", {u(g, {2, 3, 8})},
                        [](const auto& in) { return max_pool1d(in[0], 3, 2, 1) * in[0].slice(2, 0, 4); }),
                     mk("[1,2,7] k2 stride 1 dilation 2", {u(g, {1, 2, 7})},
                        [](const auto& in) { return max_pool1d(in[0], 2, 1, 0, 2); }),
                     mk("global (all positions), unbatched [3,5]", {u(g, {3, 5})},
                        [](const auto& in) { return global_max_pool1d(in[0]); })};
               }});
  t.push_back({"avg_pool1d", true, has_pool, [](Generator& g) {
                 return std::vector<OpCase>{
                     mk("[2,3,8] k3 stride 1 (w-ap)", {u(g, {2, 3, 8})},
                        [](const auto& in) { return avg_pool1d(in[0], 3, 1) * in[0].slice(2, 0, 6); }),
                     mk("[1,2,7] k4 stride 2 pad 2, count_include_pad false", {u(g, {1, 2, 7})},
                        [](const auto& in) { return avg_pool1d(in[0], 4, 2, 2, false); }),
                     mk("global (all-ap) on a transposed [2,4,5]", {u(g, {2, 5, 4})},
                        [](const auto& in) { return global_avg_pool1d(in[0].transpose(1, 2)); })};
               }});
  t.push_back({"max_pool1d_backward", true, has_pool, [](Generator& g) {
                 Pool1dArgs a;
                 a.kind = PoolKind::max, a.kernel = 3, a.stride = 2, a.pad_l = a.pad_r = 1;
                 return std::vector<OpCase>{
                     mk("dy [1,2,4] into L 8", {u(g, {1, 2, 4})}, [a](const auto& in) {
                       Tensor idx = from_vector(std::vector<int64_t>{0, 2, 4, 7, 1, 3, 3, 6}, {1, 2, 4});
                       return max_pool1d_backward(in[0], idx, 8, a);
                     })};
               }});
  t.push_back({"avg_pool1d_backward", true, has_pool, [](Generator& g) {
                 Pool1dArgs a;
                 a.kind = PoolKind::avg, a.kernel = 3, a.stride = 2, a.pad_l = a.pad_r = 1;
                 a.count_include_pad = false;
                 return std::vector<OpCase>{
                     mk("dy [2,1,4] into L 8", {u(g, {2, 1, 4})},
                        [a](const auto& in) { return avg_pool1d_backward(in[0], 8, a); })};
               }});
}

}  // namespace graft
