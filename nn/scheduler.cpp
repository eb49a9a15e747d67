// Learning-rate schedulers: the base class keeps base lrs and the epoch; each schedule is one
// closed-form factor(epoch).
#include "nn/scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace graft::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : opt_(optimizer) {
  for (const ParamGroup& g : opt_.param_groups()) base_lrs_.push_back(g.lr);
}

std::vector<double> LRScheduler::get_lr() const {
  const double f = factor(last_epoch_);
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * f);
  return lrs;
}

void LRScheduler::step() {
  std::vector<ParamGroup>& groups = opt_.param_groups();
  GRAFT_CHECK(groups.size() == base_lrs_.size(),
              "{}.step: the optimizer has {} param groups, the scheduler was made for {}; hint: "
              "make the scheduler after adding every group",
              name(), groups.size(), base_lrs_.size());
  ++last_epoch_;
  last_lr_ = get_lr();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].lr = last_lr_[i];
}

NamedTensors LRScheduler::state_dict() const {
  return {{"last_epoch", scalar_tensor(double(last_epoch_), DType::f64)},
          {"base_lrs", from_vector(base_lrs_, {int64_t(base_lrs_.size())}, DType::f64)}};
}

void LRScheduler::load_state_dict(const NamedTensors& sd) {
  const std::string op = name() + ".load_state_dict";
  Tensor epoch, bases;
  for (auto& [k, t] : sd) {
    Tensor* slot = k == "last_epoch" ? &epoch : k == "base_lrs" ? &bases : nullptr;
    GRAFT_CHECK(slot, "{}: unexpected key '{}'", op, k);
    GRAFT_CHECK(!slot->defined(), "{}: key '{}' appears twice", op, k);
    GRAFT_CHECK(t.defined(), "{}: '{}' is an undefined tensor", op, k);
    *slot = t;
  }
  GRAFT_CHECK(epoch.defined(), "{}: missing key 'last_epoch'", op);
  GRAFT_CHECK(bases.defined(), "{}: missing key 'base_lrs'", op);
  GRAFT_CHECK(epoch.numel() == 1 && epoch.dtype() != DType::b8,
              "{}: 'last_epoch' must hold one number, got shape {}", op, epoch.shape().str());
  const double e = epoch.item<double>();
  GRAFT_CHECK(e >= 0 && e == std::floor(e) && e < 9.0e15,
              "{}: 'last_epoch' must be a whole number >= 0, got {}", op, e);
  const size_t n = opt_.param_groups().size();
  GRAFT_CHECK(is_floating(bases.dtype()) && bases.dim() == 1 && bases.numel() == int64_t(n),
              "{}: 'base_lrs' is {} {}, expected float64 [{}] (one per param group)", op,
              bases.dtype(), bases.shape().str(), n);
  const std::vector<double> b = bases.to_vector<double>();
  for (double x : b) GRAFT_CHECK(std::isfinite(x) && x >= 0, "{}: invalid base lr {}", op, x);
  base_lrs_ = b;
  last_epoch_ = int64_t(e) - 1;
  step();  // sets the groups' lr for the restored epoch
}

// ------------------------------------------------------------------ schedules
StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  GRAFT_CHECK(step_size > 0, "StepLR: step_size must be positive, got {}", step_size);
  start();
}
// lr = base * gamma^floor(e / step_size)
double StepLR::factor(int64_t e) const { return std::pow(gamma_, double(e / step_size_)); }

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LRScheduler(optimizer), gamma_(gamma) {
  start();
}
// lr = base * gamma^e
double ExponentialLR::factor(int64_t e) const { return std::pow(gamma_, double(e)); }

CosineWithWarmup::CosineWithWarmup(Optimizer& optimizer, int64_t warmup_steps,
                                   int64_t total_steps, double min_lr_ratio)
    : LRScheduler(optimizer), warmup_(warmup_steps), total_(total_steps), min_ratio_(min_lr_ratio) {
  GRAFT_CHECK(warmup_steps >= 0 && total_steps > warmup_steps,
              "CosineWithWarmup: need 0 <= warmup_steps < total_steps, got {} and {}",
              warmup_steps, total_steps);
  GRAFT_CHECK(min_lr_ratio >= 0 && min_lr_ratio <= 1,
              "CosineWithWarmup: min_lr_ratio must be in [0, 1], got {}", min_lr_ratio);
  start();
}
double CosineWithWarmup::factor(int64_t e) const {
  if (e < warmup_) return double(e) / double(warmup_);  // linear warmup: e / w
  const double progress = std::min(1.0, double(e - warmup_) / double(total_ - warmup_));
  // r + (1 - r) (1 + cos(pi progress)) / 2
  return min_ratio_ + (1 - min_ratio_) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

LinearWarmupDecay::LinearWarmupDecay(Optimizer& optimizer, int64_t warmup_steps,
                                     int64_t total_steps)
    : LRScheduler(optimizer), warmup_(warmup_steps), total_(total_steps) {
  GRAFT_CHECK(warmup_steps >= 0 && total_steps > warmup_steps,
              "LinearWarmupDecay: need 0 <= warmup_steps < total_steps, got {} and {}",
              warmup_steps, total_steps);
  start();
}
double LinearWarmupDecay::factor(int64_t e) const {
  if (e < warmup_) return double(e) / double(warmup_);                    // e / w
  return std::max(0.0, double(total_ - e) / double(total_ - warmup_));     // (total - e) / (total - w)
}

Noam::Noam(Optimizer& optimizer, int64_t d_model, int64_t warmup_steps, double scale)
    : LRScheduler(optimizer), d_model_(d_model), warmup_(warmup_steps), scale_(scale) {
  GRAFT_CHECK(d_model > 0 && warmup_steps > 0,
              "Noam: d_model and warmup_steps must be positive, got {} and {}", d_model,
              warmup_steps);
  start();
}
double Noam::factor(int64_t e) const {
  const double n = double(e + 1);
  // scale * d_model^-0.5 * min(n^-0.5, n * warmup^-1.5)
  return scale_ / std::sqrt(double(d_model_)) *
         std::min(1 / std::sqrt(n), n * std::pow(double(warmup_), -1.5));
}

}  // namespace graft::optim
