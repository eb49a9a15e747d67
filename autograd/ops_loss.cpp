// Losses: cross-entropy with ignore_index and label smoothing.
//
// The recorded op works on rows: logits [N, V], target [N] -> per-row loss [N]. A class dim
// other than the last (class_dim = 1: PyTorch's [B, C, d...]) is moved last first (a
// differentiable permute, so its backward moves the gradient back), leading dims are
// flattened, and the reduction (none / sum / mean over non-ignored rows) is composed
// from differentiable ops, so the row op is the only new backward rule.
//
//   loss[n]  = -(1 - ls) logp[n, t] - ls/V sum_v logp[n, v]      (0 where t == ignore_index)
//   dlogits  = dloss[n] (softmax(logits[n]) - (1 - ls) onehot(t) - ls/V)   (0 where ignored)
#include <cmath>
#include <limits>

#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/compile.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

namespace {

// The constant target distribution [N, V]: (1 - ls) onehot(t) + ls/V, zero rows where
// t == ignore_index; and the row mask [N] (1 for rows that count, 0 for ignored ones).
std::pair<Tensor, Tensor> target_distribution(const Tensor& target, int64_t V, int64_t ignore_index,
                                              double ls, const TensorOptions& opt) {
  NoGradGuard ng;
  TensorOptions i64 = TensorOptions(DType::i64).device(target.device());
  Tensor classes = arange(V, i64).unsqueeze(0);                              // [1, V]
  Tensor onehot = eq(target.unsqueeze(1), classes).to(opt.dtype_);           // [N, V]
  Tensor valid = ne(target, full(Shape{}, double(ignore_index), i64)).to(opt.dtype_);  // [N]
  Tensor dist = (onehot * (1.0 - ls) + ls / double(V)) * valid.unsqueeze(1);
  return {dist, valid};
}

// Per-row cross-entropy: logits [N, V] (float), target [N] (int64, already validated).
// logp_out, when given, receives the log-probabilities [N, V] the loss was computed from.
Tensor cross_entropy_rows(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                          double ls, Tensor* logp_out = nullptr) {
  const int64_t N = logits.shape()[0], V = logits.shape()[1];
  const Backend& be = detail::backend("cross_entropy", {&logits, &target});
  Tensor loss = Tensor::empty(Shape{N}, logits.options());
  Tensor logp = Tensor::empty(Shape{N, V}, logits.options());
  detail::need(be.cross_entropy, "cross_entropy", logits)(logits.kview(), target.kview(),
                                                          ignore_index, ls, loss.kview(),
                                                          logp.kview());
  if (auto n = record("cross_entropy", {logits}, [ignore_index, ls, V](BackwardCtx& c) -> std::vector<Tensor> {
        const Tensor& dloss = c.grad();
        if (!dloss.defined() || !c.needs(0)) return {Tensor()};
        Tensor logits = c.saved_tensor(0), target = c.saved_tensor(1), logp = c.saved_tensor(2);
        if (c.create_graph) {
          // dlogits = (softmax(logits) - target_dist) * (dloss * valid)[:, None]
          auto [dist, valid] = target_distribution(target, V, ignore_index, ls, logits.options());
          return {(softmax(logits, -1) - dist) * (dloss * valid).unsqueeze(-1)};
        }
        // fused: dlogits = dloss (exp(logp) - (1 - ls) onehot - ls/V), 0 for ignored rows
        Tensor dx = Tensor::empty(logp.shape(), logp.options());
        const Backend& b = detail::backend("cross_entropy", {&logp, &dloss});
        Tensor g = dloss.dtype() == logp.dtype() ? dloss : dloss.to(logp.dtype());
        detail::need(b.cross_entropy_backward, "cross_entropy", logp)(
            logp.kview(), target.kview(), ignore_index, ls, g.kview(), dx.kview());
        return {dx};
      })) {
    n->saved = {SavedTensor::input(logits), SavedTensor::input(target), SavedTensor::input(logp)};
    set_history(loss, n);
  }
  if (logp_out) *logp_out = logp;
  return loss;
}

}  // namespace

void detail::check_class_target(const Tensor& input, const Tensor& target, const char* op,
                                const char* name) {
  GRAFT_CHECK(input.dim() >= 1, "{}: {} must have a class dim ([N, V] or [N..., V]), got a scalar",
              op, name);
  GRAFT_CHECK(target.dtype() == DType::i64, "{}: target must be int64 class indices, got {}; hint: "
              "convert with .to(DType::i64)", op, target.dtype());
}

// cross_entropy, and with `nll` the plain mean -logp[n, t] over the counted rows.
static Tensor cross_entropy_impl(const Tensor& logits, const Tensor& target,
                                 CrossEntropyOptions opt, double* nll);

Tensor cross_entropy(const Tensor& logits, const Tensor& target, CrossEntropyOptions opt) {
  return cross_entropy_impl(logits, target, opt, nullptr);
}

CrossEntropyWithNll cross_entropy_with_nll(const Tensor& logits, const Tensor& target,
                                           CrossEntropyOptions opt) {
  CrossEntropyWithNll r;
  // Inside a graft::compile trace the value cannot be read on the host (a replay would not
  // repeat the read): nll is NaN there, the loss is traced as usual.
  if (trace::tracing()) {
    r.loss = cross_entropy_impl(logits, target, opt, nullptr);
    r.nll = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  r.loss = cross_entropy_impl(logits, target, opt, &r.nll);
  return r;
}

static Tensor cross_entropy_impl(const Tensor& logits, const Tensor& target,
                                 CrossEntropyOptions opt, double* nll) {
  check_defined(logits, "cross_entropy");
  check_defined(target, "cross_entropy");
  detail::check_float(logits, "cross_entropy");
  detail::check_class_target(logits, target, "cross_entropy", "logits");
  const int64_t D = logits.dim();
  GRAFT_CHECK(D == 1 || (opt.class_dim >= -D && opt.class_dim < D),
              "cross_entropy: class_dim {} is out of range for logits {} (valid -{}..{})",
              opt.class_dim, logits.shape(), D, D - 1);
  const int64_t cdim = D == 1 ? 0 : (opt.class_dim + D) % D;
  Shape lead = logits.shape();
  lead.erase(int(cdim));
  GRAFT_CHECK(target.shape() == lead,
              "cross_entropy: target has shape {} but logits have shape {} (expected target "
              "shape {}: logits without the class dim {})",
              target.shape(), logits.shape(), lead, cdim);
  Tensor x = logits;  // classes last: [N..., V]
  if (cdim != D - 1) {
    std::vector<int64_t> order;
    for (int64_t d = 0; d < D; ++d)
      if (d != cdim) order.push_back(d);
    order.push_back(cdim);
    x = logits.permute(order);  // [B, C, d...] -> [B, d..., C]
  }
  const double ls = opt.label_smoothing;
  GRAFT_CHECK(ls >= 0.0 && ls < 1.0, "cross_entropy: label_smoothing must be in [0, 1), got {}",
              ls);
  const int64_t V = x.shape().back(), N = lead.numel();
  GRAFT_CHECK(V > 0, "cross_entropy: logits have no classes (shape {})", logits.shape());

  // Validate targets (and count the rows that take part in the mean).
  Tensor t1 = target.reshape({N});
  std::vector<int64_t> tv = t1.to_vector<int64_t>();
  int64_t counted = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t c = tv[size_t(n)];
    if (c == opt.ignore_index) continue;
    GRAFT_CHECK(c >= 0 && c < V,
                "cross_entropy: target {} out of range for {} classes (row {}; valid 0..{}, or "
                "ignore_index {})",
                c, V, n, V - 1, opt.ignore_index);
    ++counted;
  }

  Tensor x2 = x.dim() == 2 ? x : x.reshape({N, V});
  Tensor logp;
  Tensor rows = cross_entropy_rows(x2, t1, opt.ignore_index, ls, nll ? &logp : nullptr);
  if (nll && counted == 0) *nll = std::numeric_limits<double>::quiet_NaN();
  if (nll && counted > 0) {
    // nll = -mean_n logp[n, t_n] over counted rows: N reads of logp, not another pass over [N, V]
    NoGradGuard ng;
    std::vector<int64_t> at;
    at.reserve(size_t(counted));
    for (int64_t n = 0; n < N; ++n)
      if (tv[size_t(n)] != opt.ignore_index) at.push_back(n * V + tv[size_t(n)]);
    const Tensor picked = index_select(logp.reshape({N * V}), 0, from_vector(at, {counted}).to(logp.device()));
    *nll = -sum(picked).item<double>() / double(counted);
  }
  switch (opt.reduction) {
    case Reduction::none: return lead.size() == 1 ? rows : rows.reshape(lead);
    case Reduction::sum: return sum(rows);
    case Reduction::mean:
      // mean over the rows that are not ignored (NaN when every row is ignored, like torch)
      return counted == 0 ? sum(rows) * std::numeric_limits<double>::quiet_NaN()
                          : sum(rows) / double(counted);
  }
  GRAFT_ASSERT(false);
}

// ------------------------------------------------------------------ op table entries
using namespace cases;

void register_loss_ops(std::vector<OpInfo>& t) {
  auto has = [](const Backend& b) {
    return b.cross_entropy && b.cross_entropy_backward && b.softmax && b.reduce;
  };
  t.push_back({"cross_entropy", true, has, [](Generator& g) {
                 auto ix = [](std::vector<int64_t> v, const Shape& s) { return from_vector(v, s); };
                 Tensor t4 = ix({1, 0, 4, 2}, {4});
                 Tensor t4i = ix({1, -100, 3, 0}, {4});
                 Tensor t23 = ix({0, 4, 2, 2, 1, 3}, {2, 3});
                 CrossEntropyOptions sum_ls;
                 sum_ls.reduction = Reduction::sum;
                 sum_ls.label_smoothing = 0.1;
                 CrossEntropyOptions none_ls;
                 none_ls.reduction = Reduction::none;
                 none_ls.label_smoothing = 0.2;
                 none_ls.ignore_index = 2;
                 CrossEntropyOptions torch_layout;  // PyTorch's [B, C, T], ignore_index 2
                 torch_layout.class_dim = 1;
                 torch_layout.ignore_index = 2;
                 torch_layout.label_smoothing = 0.1;
                 return std::vector<OpCase>{
                     mk("[4,5] mean", {u(g, {4, 5}, -2, 2)},
                        [t4](const auto& in) { return cross_entropy(in[0], t4); }),
                     mk("[4,5] sum, label_smoothing 0.1", {u(g, {4, 5}, -2, 2)},
                        [t4, sum_ls](const auto& in) { return cross_entropy(in[0], t4, sum_ls); }),
                     mk("[4,5] mean, row 1 ignored (-100)", {u(g, {4, 5}, -2, 2)},
                        [t4i](const auto& in) { return cross_entropy(in[0], t4i); }),
                     mk("[2,3,5] mean", {u(g, {2, 3, 5}, -2, 2)},
                        [t23](const auto& in) { return cross_entropy(in[0], t23); }),
                     mk("transposed [5,4]^T none, ls 0.2, ignore_index 2", {u(g, {5, 4}, -2, 2)},
                        [t4, none_ls](const auto& in) { return cross_entropy(in[0].t(), t4, none_ls); }),
                     mk("[2,5,3] class_dim 1 (PyTorch layout) mean, ls 0.1, ignore_index 2", {u(g, {2, 5, 3}, -2, 2)},
                        [t23, torch_layout](const auto& in) { return cross_entropy(in[0], t23, torch_layout); })};
               }});
}

}  // namespace graft
