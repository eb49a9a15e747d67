// Learning-rate schedulers (graft::optim), PyTorch style: each sets every param group's lr to
// base_lr * factor(last_epoch), where base_lr is the group's lr when the scheduler was made.
//
//   optim::AdamW opt(model.parameters(), {.lr = 1e-4});
//   optim::LinearWarmupDecay sched(opt, /*warmup=*/1000, /*total=*/100000);
//   for (...) { ...; opt.step(); sched.step(); }
//
// As in PyTorch, constructing a scheduler performs its first step: last_epoch becomes 0 and the
// groups get the lr for epoch 0 (for the warmup schedules that is 0, as in Hugging Face's
// get_linear_schedule_with_warmup). Every lr is a closed form of last_epoch, so a scheduler
// restored from its state_dict continues exactly. A scheduler keeps a reference to its
// optimizer, which must outlive it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/optim.h"

namespace graft::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual std::string name() const = 0;
  // ++last_epoch, then every group's lr = get_lr().
  void step();
  // The lr of each group at last_epoch.
  std::vector<double> get_lr() const;
  // The lr this scheduler last set, per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // lr / base_lr at `epoch` (the schedule's closed form).
  virtual double factor(int64_t epoch) const = 0;

  // {"last_epoch": float64 0-dim, "base_lrs": float64 [groups]}.
  NamedTensors state_dict() const;
  // Validates (keys, number of groups) and throws graft::Error changing nothing on a mismatch;
  // then sets every group's lr for the restored epoch.
  void load_state_dict(const NamedTensors& sd);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // The first step; called at the end of each derived constructor (factor() is virtual).
  void start() { step(); }

 private:
  Optimizer& opt_;
  std::vector<double> base_lrs_, last_lr_;
  int64_t last_epoch_ = -1;
};

// lr = base * gamma^floor(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  std::string name() const override { return "StepLR"; }
  double factor(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = base * gamma^epoch
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);
  std::string name() const override { return "ExponentialLR"; }
  double factor(int64_t epoch) const override;

 private:
  double gamma_;
};

// Linear warmup from 0, then half a cosine down to min_lr_ratio * base at total_steps (and
// there after): lr = base * (e / w) for e < w, else
// base * (r + (1 - r) (1 + cos(pi (e - w) / (total - w))) / 2).
class CosineWithWarmup : public LRScheduler {
 public:
  CosineWithWarmup(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                   double min_lr_ratio = 0.0);
  std::string name() const override { return "CosineWithWarmup"; }
  double factor(int64_t epoch) const override;

 private:
  int64_t warmup_, total_;
  double min_ratio_;
};

// BERT's schedule: linear warmup from 0, then linear decay to 0 at total_steps:
// lr = base * e / w for e < w, else base * max(0, (total - e) / (total - w)).
class LinearWarmupDecay : public LRScheduler {
 public:
  LinearWarmupDecay(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps);
  std::string name() const override { return "LinearWarmupDecay"; }
  double factor(int64_t epoch) const override;

 private:
  int64_t warmup_, total_;
};

// The Transformer paper's schedule (Vaswani et al. 2017, "Noam"), inverse square root decay
// after a linear warmup: lr = base * scale * d_model^-0.5 * min(n^-0.5, n * warmup^-1.5) with
// n = epoch + 1, the number of the training step the lr is used for (so the first step gets
// n = 1, never 0). With base lr 1 and scale 1 this is the paper's formula.
class Noam : public LRScheduler {
 public:
  Noam(Optimizer& optimizer, int64_t d_model, int64_t warmup_steps, double scale = 1.0);
  std::string name() const override { return "Noam"; }
  double factor(int64_t epoch) const override;

 private:
  int64_t d_model_, warmup_;
  double scale_;
};

}  // namespace graft::optim
