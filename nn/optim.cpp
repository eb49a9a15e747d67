// Optimisers: the shared machinery (groups, lazy state, grad checks, state_dict) in Optimizer,
// the update rules as fused kernels (ops/cpu/optim.cpp) called through the device's Backend.
#include "nn/optim.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>

#include "autograd/grad_mode.h"

namespace graft::optim {

namespace {

// A kInherit field takes the option's value.
void inherit(double& field, double option) {
  if (std::isnan(field)) field = option;
}

// "state.12.exp_avg" -> (12, "exp_avg"); false if `key` is not "<prefix>.<int>.<field>".
bool parse_key(const std::string& key, const std::string& prefix, int64_t& index,
               std::string& field) {
  if (key.size() <= prefix.size() + 1 || key.compare(0, prefix.size(), prefix) != 0 ||
      key[prefix.size()] != '.')
    return false;
  const char* b = key.data() + prefix.size() + 1;
  const char* e = key.data() + key.size();
  if (b == e || !std::isdigit(static_cast<unsigned char>(*b))) return false;
  auto [ptr, ec] = std::from_chars(b, e, index);
  if (ec != std::errc() || ptr == e || *ptr != '.' || ptr + 1 == e) return false;
  field.assign(ptr + 1, e);
  return true;
}

// The single value of a one-element floating or integer tensor.
double scalar_value(const Tensor& t, const std::string& op, const std::string& key) {
  GRAFT_CHECK(t.defined() && t.numel() == 1 && t.dtype() != DType::b8,
              "{}: '{}' must hold one number, got {}", op, key,
              t.defined() ? fmt::format("{} of shape {}", t.dtype(), t.shape().str())
                          : std::string("an undefined tensor"));
  return t.item<double>();
}

}  // namespace

Tensor ParamState::get(const std::string& name) const {
  for (auto& [n, t] : buffers)
    if (n == name) return t;
  return {};
}

// ------------------------------------------------------------------ no-decay grouping
bool is_no_decay_name(const std::string& name) {
  std::vector<std::string> parts;
  for (size_t b = 0;;) {
    size_t e = name.find('.', b);
    parts.push_back(name.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  const std::string& last = parts.back();
  if (last.size() >= 4 && last.compare(last.size() - 4, 4, "bias") == 0) return true;
  for (std::string c : parts) {
    std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (c.find("norm") != std::string::npos) return true;  // LayerNorm, layer_norm, norm1, ...
    if (c.rfind("ln", 0) == 0) {                            // ln, ln_f, ln_1, ln2
      const std::string rest = c.substr(2);
      if (rest.empty() || rest[0] == '_' ||
          std::all_of(rest.begin(), rest.end(), [](unsigned char ch) { return std::isdigit(ch); }))
        return true;
    }
  }
  return false;
}

std::vector<ParamGroup> param_groups_no_decay(const NamedTensors& named_params,
                                              double weight_decay) {
  ParamGroup decay, no_decay;
  decay.weight_decay = weight_decay;
  no_decay.weight_decay = 0.0;
  for (auto& [n, p] : named_params) (is_no_decay_name(n) ? no_decay : decay).params.push_back(p);
  std::vector<ParamGroup> out;
  for (ParamGroup* g : {&decay, &no_decay})
    if (!g->params.empty()) out.push_back(std::move(*g));
  return out;
}

// ------------------------------------------------------------------ Optimizer
void Optimizer::resolve(ParamGroup& g) const {
  for (const HyperField& h : hyper()) {
    double& x = g.*h.member;
    inherit(x, h.option);
    const bool ok = h.accepts == Accepts::finite ? std::isfinite(x)
                    : h.accepts == Accepts::unit ? x >= 0 && x < 1
                                                 : x >= 0;
    GRAFT_CHECK(ok, "{}: invalid {} {}{}", name(), h.what ? h.what : h.key, x,
                h.accepts == Accepts::unit ? " (must be in [0, 1))" : "");
  }
  check_group(g);
}

void Optimizer::init(std::vector<ParamGroup> groups) {
  size_t n = 0;
  for (auto& g : groups) n += g.params.size();
  GRAFT_CHECK(n > 0, "{}: got an empty parameter list; hint: pass model.parameters()", name());
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  resolve(group);
  std::set<const TensorImpl*> seen;
  for (auto& g : groups_)
    for (auto& p : g.params) seen.insert(p.impl());
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    GRAFT_CHECK(p.defined(), "{}: parameter {} of the new group is undefined", name(), i);
    GRAFT_CHECK(is_floating(p.dtype()),
                "{}: can only optimize floating tensors, parameter {} of the new group is {}",
                name(), i, p.dtype());
    GRAFT_CHECK(p.is_leaf(), "{}: can't optimize a non-leaf tensor (parameter {} of the new "
                "group); hint: pass the leaf parameters, or .detach().requires_grad_()", name(), i);
    GRAFT_CHECK(seen.insert(p.impl()).second,
                "{}: parameter {} of the new group appears in more than one place", name(), i);
  }
  groups_.push_back(std::move(group));
}

const ParamState* Optimizer::state(const Tensor& param) const {
  int64_t i = 0;
  for (auto& g : groups_)
    for (auto& p : g.params) {
      if (p.same(param)) {
        auto it = state_.find(i);
        return it == state_.end() ? nullptr : &it->second;
      }
      ++i;
    }
  return nullptr;
}

Tensor Optimizer::buffer(ParamState& s, const std::string& name, const Tensor& p, double init,
                         bool* created) {
  Tensor t = s.get(name);
  if (created) *created = !t.defined();
  if (!t.defined()) {
    t = full(p.shape(), init, p.options());
    s.buffers.emplace_back(name, t);
  }
  return t;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard ng;
  for (auto& g : groups_)
    for (auto& p : g.params) {
      if (set_to_none) p.set_grad(Tensor());
      else if (p.grad().defined()) p.grad().zero_();
    }
}

void Optimizer::step() {
  NoGradGuard ng;
  const std::string op = where("step");
  // Check everything first, so that a bad grad leaves every parameter as it was.
  int64_t idx = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (const Tensor& p : groups_[gi].params) {
      const int64_t i = idx++;
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      GRAFT_CHECK(grad.shape() == p.shape() && grad.dtype() == p.dtype() &&
                      grad.device() == p.device(),
                  "{}: the grad of parameter {} (group {}) is {} {} on {}, but the parameter is "
                  "{} {} on {}; hint: a grad must match its parameter's shape, dtype and device",
                  op, i, gi, grad.dtype(), grad.shape().str(), grad.device().str(), p.dtype(),
                  p.shape().str(), p.device().str());
      const Backend* be = backend_for(p.device());
      GRAFT_CHECK(be && be->adam_step && be->sgd_step && be->adagrad_step,
                  "{}: no fused optimizer kernels for device {}; hint: train on the CPU", op,
                  p.device().str());
      auto it = state_.find(i);
      if (it == state_.end()) continue;
      for (auto& [n, t] : it->second.buffers)
        GRAFT_CHECK(t.shape() == p.shape() && t.dtype() == p.dtype() && t.device() == p.device(),
                    "{}: state '{}' of parameter {} is {} {} on {}, but the parameter is now {} "
                    "{} on {}; hint: move or convert the model before creating the optimizer",
                    op, n, i, t.dtype(), t.shape().str(), t.device().str(), p.dtype(),
                    p.shape().str(), p.device().str());
    }
  idx = 0;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) {
      const int64_t i = idx++;
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& s = state_[i];
      ++s.step;
      const Backend& be = *backend_for(p.device());
      const Tensor gc = grad.contiguous();
      if (p.is_contiguous()) {
        update(g, p, gc, s, be);
        p.storage()->bump_version();
      } else {  // update a contiguous copy, then write it back
        Tensor c = p.detach().clone();
        update(g, c, gc, s, be);
        Tensor dst = p;
        dst.copy_(c);
      }
    }
}

// ------------------------------------------------------------------ state_dict
NamedTensors Optimizer::state_dict() const {
  NamedTensors sd;
  int64_t idx = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    std::vector<int64_t> ids(g.params.size());
    for (auto& id : ids) id = idx++;
    sd.emplace_back(fmt::format("group.{}.params", gi), from_vector(ids, {int64_t(ids.size())}));
    for (const HyperField& h : hyper())
      sd.emplace_back(fmt::format("group.{}.{}", gi, h.key), scalar_tensor(g.*h.member, DType::f64));
  }
  for (auto& [i, s] : state_) {
    sd.emplace_back(fmt::format("state.{}.step", i), scalar_tensor(double(s.step), DType::f64));
    for (auto& [n, t] : s.buffers) sd.emplace_back(fmt::format("state.{}.{}", i, n), t);
  }
  return sd;
}

void Optimizer::load_state_dict(const NamedTensors& sd) {
  NoGradGuard ng;
  const std::string op = where("load_state_dict");
  std::map<std::string, Tensor> by_key;
  for (auto& [k, t] : sd) {
    GRAFT_CHECK(by_key.emplace(k, t).second, "{}: key '{}' appears twice", op, k);
    GRAFT_CHECK(t.defined(), "{}: '{}' is an undefined tensor", op, k);
  }
  std::set<std::string> used;
  auto take = [&](const std::string& key) -> const Tensor& {
    auto it = by_key.find(key);
    GRAFT_CHECK(it != by_key.end(), "{}: missing key '{}'", op, key);
    used.insert(key);
    return it->second;
  };

  // groups: same number, same parameter indices; hyper-parameters are replaced
  int64_t saved_groups = 0, index = 0;
  std::string field;
  for (auto& [k, t] : by_key)
    if (parse_key(k, "group", index, field)) saved_groups = std::max(saved_groups, index + 1);
  GRAFT_CHECK(saved_groups == int64_t(groups_.size()),
              "{}: the state dict has {} parameter groups, this optimizer has {}", op,
              saved_groups, groups_.size());
  std::vector<ParamGroup> groups = groups_;
  std::vector<const Tensor*> params;  // by index
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    ParamGroup& g = groups[gi];
    const std::string key = fmt::format("group.{}.params", gi);
    const Tensor& ids = take(key);
    GRAFT_CHECK(ids.dtype() == DType::i64 && ids.dim() == 1 &&
                    ids.numel() == int64_t(g.params.size()),
                "{}: '{}' is {} {}, expected int64 [{}] (group {} has {} parameters)", op, key,
                ids.dtype(), ids.shape().str(), g.params.size(), gi, g.params.size());
    const std::vector<int64_t> v = ids.to_vector<int64_t>();
    for (size_t j = 0; j < v.size(); ++j) {
      GRAFT_CHECK(v[j] == int64_t(params.size()),
                  "{}: '{}' lists parameter {} at position {}, expected {}", op, key, v[j], j,
                  params.size());
      params.push_back(&g.params[j]);
    }
    for (const HyperField& h : hyper()) {
      const std::string hk = fmt::format("group.{}.{}", gi, h.key);
      const double x = scalar_value(take(hk), op, hk);
      GRAFT_CHECK(std::isfinite(x), "{}: '{}' is {}", op, hk, x);
      g.*h.member = x;
    }
    resolve(g);  // validates the loaded values
  }

  // per-parameter state, copied into fresh tensors
  const std::vector<std::string> allowed = buffer_names();
  std::map<int64_t, ParamState> state;
  for (auto& [k, t] : by_key) {
    if (used.count(k)) continue;
    GRAFT_CHECK(parse_key(k, "state", index, field), "{}: unexpected key '{}'", op, k);
    GRAFT_CHECK(index < int64_t(params.size()),
                "{}: '{}' refers to parameter {}, but this optimizer has {} parameters", op, k,
                index, params.size());
    const Tensor& p = *params[index];
    used.insert(k);
    if (field == "step") {
      const double x = scalar_value(t, op, k);
      GRAFT_CHECK(x >= 0 && x == std::floor(x) && x < 9.0e15,
                  "{}: '{}' must be a whole number of steps, got {}", op, k, x);
      state[index].step = int64_t(x);
      continue;
    }
    GRAFT_CHECK(std::find(allowed.begin(), allowed.end(), field) != allowed.end(),
                "{}: unexpected key '{}' ({} keeps no state called '{}')", op, k, name(), field);
    GRAFT_CHECK(is_floating(t.dtype()) && t.shape() == p.shape(),
                "{}: '{}' is {} {}, but parameter {} is {} {}", op, k, t.dtype(),
                t.shape().str(), index, p.dtype(), p.shape().str());
    Tensor copy = Tensor::empty(p.shape(), p.options());
    copy.copy_(t.device() == p.device() ? t.detach() : t.detach().to(p.device()));
    state[index].buffers.emplace_back(field, copy);
  }
  for (auto& [i, s] : state) {
    GRAFT_CHECK(by_key.count(fmt::format("state.{}.step", i)), "{}: missing key 'state.{}.step'",
                op, i);
    for (const std::string& b : required_buffers())
      GRAFT_CHECK(s.get(b).defined(), "{}: missing key 'state.{}.{}'", op, i, b);
    // a fixed buffer order, whatever the order of the keys
    std::sort(s.buffers.begin(), s.buffers.end(), [&](auto& a, auto& b) {
      return std::find(allowed.begin(), allowed.end(), a.first) <
             std::find(allowed.begin(), allowed.end(), b.first);
    });
  }

  // commit
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (const HyperField& h : hyper()) groups_[gi].*h.member = groups[gi].*h.member;
  state_ = std::move(state);
}

// ------------------------------------------------------------------ SGD
SGD::SGD(std::vector<Tensor> params, SGDOptions options) : opt_(options) {
  init({ParamGroup{.params = std::move(params)}});
}
SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options) : opt_(options) {
  init(std::move(groups));
}

Optimizer::Hyper SGD::hyper() const {
  return {{"lr", &ParamGroup::lr, opt_.lr, Accepts::nonnegative, "learning rate"},
          {"momentum", &ParamGroup::momentum, opt_.momentum},
          {"dampening", &ParamGroup::dampening, opt_.dampening, Accepts::finite},
          {"weight_decay", &ParamGroup::weight_decay, opt_.weight_decay}};
}

void SGD::check_group(const ParamGroup& g) const {
  GRAFT_CHECK(!opt_.nesterov || (g.momentum > 0 && g.dampening == 0),
              "SGD: Nesterov momentum requires a momentum > 0 and zero dampening (got momentum "
              "{}, dampening {})", g.momentum, g.dampening);
}

void SGD::update(const ParamGroup& g, const Tensor& p, const Tensor& grad, ParamState& s,
                 const Backend& be) {
  SgdStepArgs a;
  a.lr = g.lr;
  a.momentum = g.momentum;
  a.dampening = g.dampening;
  a.weight_decay = g.weight_decay;
  a.nesterov = opt_.nesterov;
  TensorView buf;  // no buffer without momentum
  if (g.momentum != 0) {
    buf = buffer(s, "momentum_buffer", p, 0.0, &a.first_step).kview();
  }
  be.sgd_step(p.kview(), grad.kview(), buf, a);
}

// ------------------------------------------------------------------ Adam, AdamW
Adam::Adam(std::vector<Tensor> params, AdamOptions options) : opt_(options) {
  init({ParamGroup{.params = std::move(params)}});
}
Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : opt_(options) {
  init(std::move(groups));
}

namespace {
AdamOptions as_adam(const AdamWOptions& o) {
  return {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps,
          .weight_decay = o.weight_decay};
}
}  // namespace

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Adam(as_adam(options), /*decoupled=*/true) {
  init({ParamGroup{.params = std::move(params)}});
}
AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Adam(as_adam(options), /*decoupled=*/true) {
  init(std::move(groups));
}

Optimizer::Hyper Adam::hyper() const {
  return {{"lr", &ParamGroup::lr, opt_.lr, Accepts::nonnegative, "learning rate"},
          {"beta1", &ParamGroup::beta1, opt_.beta1, Accepts::unit},
          {"beta2", &ParamGroup::beta2, opt_.beta2, Accepts::unit},
          {"eps", &ParamGroup::eps, opt_.eps, Accepts::nonnegative, "epsilon"},
          {"weight_decay", &ParamGroup::weight_decay, opt_.weight_decay}};
}

void Adam::update(const ParamGroup& g, const Tensor& p, const Tensor& grad, ParamState& s,
                  const Backend& be) {
  const Tensor m = buffer(s, "exp_avg", p), v = buffer(s, "exp_avg_sq", p);
  AdamStepArgs a;
  a.lr = g.lr;
  a.beta1 = g.beta1;
  a.beta2 = g.beta2;
  a.eps = g.eps;
  a.weight_decay = g.weight_decay;
  a.decoupled = decoupled_;
  a.bias_correction1 = 1 - std::pow(g.beta1, double(s.step));  // 1 - b1^t
  a.bias_correction2 = 1 - std::pow(g.beta2, double(s.step));  // 1 - b2^t
  be.adam_step(p.kview(), grad.kview(), m.kview(), v.kview(), a);
}

// ------------------------------------------------------------------ Adagrad
Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options) : opt_(options) {
  GRAFT_CHECK(opt_.initial_accumulator_value >= 0, "Adagrad: invalid initial_accumulator_value {}",
              opt_.initial_accumulator_value);
  init({ParamGroup{.params = std::move(params)}});
}
Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions options) : opt_(options) {
  GRAFT_CHECK(opt_.initial_accumulator_value >= 0, "Adagrad: invalid initial_accumulator_value {}",
              opt_.initial_accumulator_value);
  init(std::move(groups));
}

Optimizer::Hyper Adagrad::hyper() const {
  return {{"lr", &ParamGroup::lr, opt_.lr, Accepts::nonnegative, "learning rate"},
          {"lr_decay", &ParamGroup::lr_decay, opt_.lr_decay},
          {"eps", &ParamGroup::eps, opt_.eps, Accepts::nonnegative, "epsilon"},
          {"weight_decay", &ParamGroup::weight_decay, opt_.weight_decay}};
}

void Adagrad::update(const ParamGroup& g, const Tensor& p, const Tensor& grad, ParamState& s,
                     const Backend& be) {
  const Tensor sum = buffer(s, "sum", p, opt_.initial_accumulator_value);
  AdagradStepArgs a;
  a.lr = g.lr / (1 + double(s.step - 1) * g.lr_decay);  // clr = lr / (1 + (t - 1) lr_decay)
  a.eps = g.eps;
  a.weight_decay = g.weight_decay;
  be.adagrad_step(p.kview(), grad.kview(), sum.kview(), a);
}

}  // namespace graft::optim
