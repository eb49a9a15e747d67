// graft::optim — optimisers with PyTorch's semantics: SGD (momentum, dampening, Nesterov),
// Adam, AdamW (decoupled weight decay) and Adagrad (not yet: amsgrad, maximize, foreach).
//
//   optim::AdamW opt(model.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }
//
// Parameters live in groups (ParamGroup), each with its own hyper-parameters; a group field
// left at kInherit takes the optimizer's option. State (step count, moments, momentum buffers)
// is created lazily at a parameter's first step. step() runs one fused kernel per parameter
// (Backend::adam_step / sgd_step / adagrad_step of the parameter's device) under NoGradGuard
// and skips parameters whose grad is undefined.
//
// state_dict() is flat NamedTensors so a safetensors writer can save it. Parameters are
// numbered across groups in order (as in PyTorch); the keys are
//   group.<g>.params        int64 [n]  the indices of the group's parameters
//   group.<g>.<hyper>       float64 0-dim, e.g. group.0.lr, group.0.beta1
//   state.<i>.step          float64 0-dim, the parameter's step count
//   state.<i>.<buffer>      the state tensor, e.g. state.3.exp_avg, state.3.momentum_buffer
#pragma once
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "nn/module.h"
#include "ops/kernels.h"

namespace graft::optim {

using nn::NamedTensors;

// The value of a ParamGroup field that takes the optimizer's option.
inline constexpr double kInherit = std::numeric_limits<double>::quiet_NaN();

struct ParamGroup {
  std::vector<Tensor> params;
  double lr = kInherit;
  double weight_decay = kInherit;
  // per-optimizer extras: each optimizer reads its own (the rest stay kInherit)
  double momentum = kInherit;   // SGD
  double dampening = kInherit;  // SGD
  double beta1 = kInherit;      // Adam, AdamW
  double beta2 = kInherit;      // Adam, AdamW
  double eps = kInherit;        // Adam, AdamW, Adagrad
  double lr_decay = kInherit;   // Adagrad
};

// Per-parameter state.
struct ParamState {
  int64_t step = 0;
  NamedTensors buffers;  // e.g. {"exp_avg", m}, {"exp_avg_sq", v}
  // The buffer called `name`, or an undefined tensor.
  Tensor get(const std::string& name) const;
};

// Two groups as BERT trains: parameters with weight decay, then those without (names ending
// in "bias", and LayerNorm parameters: a module name containing "norm" in any case, or named
// "ln", "ln_<x>" or "ln<digits>", as in GPT-2's ln_1/ln_f). An empty group is left out. lr and
// the rest stay kInherit.
std::vector<ParamGroup> param_groups_no_decay(const NamedTensors& named_params,
                                              double weight_decay);
// Whether param_groups_no_decay puts `name` in the no-decay group.
bool is_no_decay_name(const std::string& name);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;
  // One update of every parameter that has a grad; graft::Error (and nothing updated) if a
  // grad's shape, dtype or device differs from its parameter's.
  void step();
  // Drops every grad (set_to_none, PyTorch's default) or zeroes it in place.
  void zero_grad(bool set_to_none = true);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Adds a group (inheriting fields resolved from the options); its params are numbered next.
  void add_param_group(ParamGroup group);
  // The state of `param`, or nullptr before its first step (or if it is not in this optimizer).
  const ParamState* state(const Tensor& param) const;

  // The live hyper-parameters and state tensors (not copies), keyed as described above.
  NamedTensors state_dict() const;
  // Validates everything first (keys, group sizes, state shapes): on any mismatch it throws
  // graft::Error and changes nothing. State tensors are copied (cast to the parameter's dtype
  // and moved to its device); parameters without saved state start fresh.
  void load_state_dict(const NamedTensors& sd);

 protected:
  Optimizer() = default;
  // One group field this optimizer reads: its state_dict key, the member, the options' value
  // that a kInherit field takes, and the values it accepts (graft::Error "<name>: invalid
  // <what> <value>" otherwise; what = the key unless given).
  enum class Accepts { nonnegative, unit /* [0, 1) */, finite };
  struct HyperField {
    const char* key;
    double ParamGroup::* member;
    double option;
    Accepts accepts = Accepts::nonnegative;
    const char* what = nullptr;
  };
  using Hyper = std::vector<HyperField>;
  virtual Hyper hyper() const = 0;
  // Fills g's kInherit fields from the options and validates them (graft::Error): each field
  // of hyper(), then check_group.
  void resolve(ParamGroup& g) const;
  // Checks across fields (e.g. SGD's Nesterov needs momentum); none by default.
  virtual void check_group(const ParamGroup&) const {}
  // The state buffer names this optimizer may create.
  virtual std::vector<std::string> buffer_names() const = 0;
  // One update of contiguous `p` (a parameter or a copy of it) with contiguous `grad`; `s`
  // already counts this step. `be` is the parameter device's kernel table.
  virtual void update(const ParamGroup& g, const Tensor& p, const Tensor& grad, ParamState& s,
                      const Backend& be) = 0;
  // Adds groups from derived constructors (resolve() is virtual); graft::Error on an empty
  // parameter list, a non-floating parameter or one listed twice.
  void init(std::vector<ParamGroup> groups);
  // The state buffers that must exist once a parameter has state (SGD's are optional).
  virtual std::vector<std::string> required_buffers() const { return buffer_names(); }
  // s's buffer `name`, created if missing (filled with `init`, with p's shape, dtype and
  // device); `created` says whether it was.
  static Tensor buffer(ParamState& s, const std::string& name, const Tensor& p, double init = 0.0,
                       bool* created = nullptr);
  // A message prefix such as "Adam.step".
  std::string where(const char* method) const { return name() + "." + method; }

 private:
  std::vector<ParamGroup> groups_;
  std::map<int64_t, ParamState> state_;  // by parameter index (across groups, in order)
};

// ---------------------------------------------------------------- SGD
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};
// d = g + wd p; buf = mom buf + (1 - dampening) d (buf = d at first); d = nesterov ? d + mom buf
// : buf; p -= lr d.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  std::string name() const override { return "SGD"; }
  const SGDOptions& options() const { return opt_; }

 protected:
  Hyper hyper() const override;
  void check_group(const ParamGroup& g) const override;
  std::vector<std::string> buffer_names() const override { return {"momentum_buffer"}; }
  std::vector<std::string> required_buffers() const override { return {}; }
  void update(const ParamGroup& g, const Tensor& p, const Tensor& grad, ParamState& s,
              const Backend& be) override;

 private:
  SGDOptions opt_;
};

// ---------------------------------------------------------------- Adam, AdamW
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr/(1 - b1^t) m / (sqrt(v/(1 - b2^t)) + eps)
// with L2 regularisation g += wd p before the moments.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});
  std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  const AdamOptions& options() const { return opt_; }

 protected:
  Adam(AdamOptions options, bool decoupled) : opt_(options), decoupled_(decoupled) {}
  Hyper hyper() const override;
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  void update(const ParamGroup& g, const Tensor& p, const Tensor& grad, ParamState& s,
              const Backend& be) override;

 private:
  AdamOptions opt_;
  bool decoupled_ = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // PyTorch's AdamW default
};
// Adam with decoupled weight decay (Loshchilov & Hutter): p *= 1 - lr wd, then the Adam step
// on the raw gradient.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
};

// ---------------------------------------------------------------- Adagrad
struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
};
// g += wd p; sum += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps)
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  Adagrad(std::vector<ParamGroup> groups, AdagradOptions options = {});
  std::string name() const override { return "Adagrad"; }
  const AdagradOptions& options() const { return opt_; }

 protected:
  Hyper hyper() const override;
  std::vector<std::string> buffer_names() const override { return {"sum"}; }
  void update(const ParamGroup& g, const Tensor& p, const Tensor& grad, ParamState& s,
              const Backend& be) override;

 private:
  AdagradOptions opt_;
};

}  // namespace graft::optim
