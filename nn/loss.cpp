#include "nn/loss.h"

#include <limits>
#include <vector>

#include "autograd/dispatch.h"
#include "autograd/grad_mode.h"

namespace graft::nn {

namespace {

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::none: return "none";
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
  }
  return "?";
}

Tensor reduce(const Tensor& loss, Reduction r) {
  switch (r) {
    case Reduction::none: return loss;
    case Reduction::sum: return sum(loss);
    case Reduction::mean: return mean(loss);
  }
  throw Error("loss: unknown reduction");
}

void check_float(const Tensor& t, const char* op, const char* what) {
  check_defined(t, op);
  GRAFT_CHECK(is_floating(t.dtype()), "{}: {} must be floating (float32 or float64), got {}", op,
              what, t.dtype());
}

// input and target: same shape, same floating dtype.
void check_pair(const Tensor& input, const Tensor& target, const char* op) {
  check_float(input, op, "input");
  check_float(target, op, "target");
  GRAFT_CHECK(input.shape() == target.shape(),
              "{}: input has shape {} but target has shape {}; they must match", op,
              input.shape(), target.shape());
  GRAFT_CHECK(input.dtype() == target.dtype(),
              "{}: input is {} but target is {}; hint: convert with target.to(input.dtype())", op,
              input.dtype(), target.dtype());
}

// Whether `from` broadcasts to `to` without growing it (NumPy rules, aligned on the right).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (int i = 1; i <= from.size(); ++i) {
    const int64_t f = from[from.size() - i], t = to[to.size() - i];
    if (f != 1 && f != t) return false;
  }
  return true;
}

}  // namespace

// ------------------------------------------------------------------ functional
Tensor nll_loss(const Tensor& logp, const Tensor& target, int64_t ignore_index,
                Reduction reduction) {
  check_float(logp, "nll_loss", "logp");
  check_defined(target, "nll_loss");
  detail::check_class_target(logp, target, "nll_loss", "logp");
  Shape lead = logp.shape();
  lead.erase(lead.size() - 1);
  GRAFT_CHECK(target.shape() == lead,
              "nll_loss: target has shape {} but logp has shape {} (expected target shape {}: "
              "logp without the class dim)",
              target.shape(), logp.shape(), lead);
  const int64_t V = logp.shape().back(), N = lead.numel();
  GRAFT_CHECK(V > 0, "nll_loss: logp has no classes (shape {})", logp.shape());

  // Validate the targets; ignored rows gather class 0 (masked out below).
  Tensor t1 = target.reshape({N});
  std::vector<int64_t> tv = t1.to_vector<int64_t>(), safe(size_t(N), 0);
  int64_t counted = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t c = tv[size_t(n)];
    if (c == ignore_index) continue;
    GRAFT_CHECK(c >= 0 && c < V,
                "nll_loss: target {} out of range for {} classes (row {}; valid 0..{}, or "
                "ignore_index {})",
                c, V, n, V - 1, ignore_index);
    safe[size_t(n)] = c;
    ++counted;
  }
  Tensor ignored = eq(t1, full(Shape{}, double(ignore_index), DType::i64));  // [N] bool
  Tensor picked = gather(logp.reshape({N, V}), 1, from_vector(safe, Shape{N, 1})).reshape({N});
  // loss[n] = -logp[n, t[n]] (0 where ignored); dlogp[n, t[n]] = -dloss[n]
  Tensor rows = masked_fill(neg(picked), ignored, 0.0);
  switch (reduction) {
    case Reduction::none: return rows.reshape(lead);
    case Reduction::sum: return sum(rows);
    case Reduction::mean:
      return counted == 0 ? sum(rows) * std::numeric_limits<double>::quiet_NaN()
                          : sum(rows) / double(counted);
  }
  throw Error("nll_loss: unknown reduction");
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair(input, target, "mse_loss");
  return reduce(square(input - target), reduction);  // d input = 2 (x - y) dloss
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction, const Tensor& pos_weight) {
  const char* op = "binary_cross_entropy_with_logits";
  check_pair(input, target, op);
  if (!pos_weight.defined()) {
    // loss = softplus(x) - x y;  dx = sigmoid(x) - y
    return reduce(softplus(input) - input * target, reduction);
  }
  check_float(pos_weight, op, "pos_weight");
  GRAFT_CHECK(pos_weight.dtype() == input.dtype(),
              "{}: pos_weight is {} but input is {}; hint: convert with "
              "pos_weight.to(input.dtype())",
              op, pos_weight.dtype(), input.dtype());
  GRAFT_CHECK(broadcasts_to(pos_weight.shape(), input.shape()),
              "{}: pos_weight of shape {} does not broadcast to the input shape {} (expected e.g. "
              "[C] for input [N, C])",
              op, pos_weight.shape(), input.shape());
  // loss = (1 - y) x + w softplus(-x), w = 1 + (p - 1) y;  dx = (1 - y) - w sigmoid(-x)
  Tensor w = (pos_weight - 1.0) * target + 1.0;
  return reduce((1.0 - target) * input + w * softplus(neg(input)), reduction);
}

// ------------------------------------------------------------------ modules
CrossEntropyLoss::CrossEntropyLoss(CrossEntropyOptions opt) : options(opt) {
  GRAFT_CHECK(opt.label_smoothing >= 0.0 && opt.label_smoothing < 1.0,
              "CrossEntropyLoss: label_smoothing must be in [0, 1), got {}", opt.label_smoothing);
}
Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, options);
}
std::string CrossEntropyLoss::repr() const {
  return fmt::format("CrossEntropyLoss(ignore_index={}, label_smoothing={}, reduction={}{})",
                     options.ignore_index, options.label_smoothing,
                     reduction_name(options.reduction),
                     options.class_dim == -1 ? "" : fmt::format(", class_dim={}", options.class_dim));
}

NLLLoss::NLLLoss(NLLLossOptions opt) : options(opt) {}
Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, options.ignore_index, options.reduction);
}
std::string NLLLoss::repr() const {
  return fmt::format("NLLLoss(ignore_index={}, reduction={})", options.ignore_index,
                     reduction_name(options.reduction));
}

MSELoss::MSELoss(Reduction r) : reduction(r) {}
Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return mse_loss(input, target, reduction);
}
std::string MSELoss::repr() const {
  return fmt::format("MSELoss(reduction={})", reduction_name(reduction));
}

BCEWithLogitsLoss::BCEWithLogitsLoss(BCEWithLogitsOptions opt) : reduction(opt.reduction) {
  if (opt.pos_weight.defined()) {
    check_float(opt.pos_weight, "BCEWithLogitsLoss", "pos_weight");
    pos_weight = register_buffer("pos_weight", opt.pos_weight);
  }
}
Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, reduction, pos_weight);
}
std::string BCEWithLogitsLoss::repr() const {
  return fmt::format("BCEWithLogitsLoss(reduction={}{})", reduction_name(reduction),
                     pos_weight.defined() ? ", pos_weight=" + pos_weight.shape().str() : "");
}

std::function<std::vector<Tensor>(const std::vector<Tensor>&)> cross_entropy_step(Module& model) {
  return [&model](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    {
      NoGradGuard ng;
      for (Tensor& p : model.parameters())
        if (p.grad().defined()) p.grad().zero_();
    }
    Tensor loss = cross_entropy(model.forward(in[0]), in[1]);
    loss.backward();
    return {loss};
  };
}

}  // namespace graft::nn
