#include "nn/module.h"

#include <cmath>
#include <set>

#include "autograd/grad_mode.h"

namespace graft::nn {

namespace {
void check_name(const std::string& name, const char* what) {
  GRAFT_CHECK(!name.empty() && name.find('.') == std::string::npos,
              "register_{}: name '{}' must be non-empty and contain no '.'", what, name);
}
}  // namespace

Tensor Module::forward(const Tensor&) {
  throw Error(fmt::format("{}: this module has no one-tensor forward(); call its own method",
                          repr()));
}

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name(name, "parameter");
  check_defined(t, "register_parameter");
  for (auto& [n, p] : params_) GRAFT_CHECK(n != name, "register_parameter: '{}' already exists", name);
  t = t.detach();
  if (requires_grad) t.requires_grad_(true);
  params_.emplace_back(name, t);
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name, "buffer");
  for (auto& [n, p] : buffers_) GRAFT_CHECK(n != name, "register_buffer: '{}' already exists", name);
  buffers_.emplace_back(name, t.detach());
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(name, "module");
  GRAFT_CHECK(m != nullptr, "register_module: module '{}' is null", name);
  for (auto& [n, c] : children_) GRAFT_CHECK(n != name, "register_module: '{}' already exists", name);
  children_.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, NamedTensors& out, bool params, bool recurse) const {
  for (auto& [n, t] : params ? params_ : buffers_) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (auto& [n, c] : children_) c->collect(prefix + n + ".", out, params, true);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect("", out, true, recurse);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", out, false, recurse);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [n, c] : children_)
    for (auto& [sub, m] : c->named_modules()) out.emplace_back(sub.empty() ? n : n + "." + sub, m);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& t : parameters()) n += t.numel();
  return n;
}

bool all_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return true;
  NoGradGuard ng;
  // x * 0 is 0 for every finite x and NaN for NaN or +-inf, so the sum is 0 exactly when all
  // are finite (summing x itself could overflow to inf for large finite values).
  return std::isfinite(sum(t.detach() * 0.0).item<double>());
}

std::string Module::first_non_finite() const {
  for (const auto& [n, t] : state_dict())
    if (!nn::all_finite(t)) return n;  // qualified: the member all_finite() hides it
  return "";
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad() {
  for (auto& t : parameters()) t.set_grad(Tensor());
}

void set_data(Tensor& dst, const Tensor& src) {
  TensorImpl* d = dst.impl();
  const TensorImpl* s = src.impl();
  d->storage = s->storage;
  d->offset = s->offset;
  d->shape = s->shape;
  d->strides = s->strides;
  d->dtype = s->dtype;
  d->grad = nullptr;
}

void Module::to(Device device) {
  NoGradGuard ng;
  for (auto* list : {&params_, &buffers_})
    for (auto& [n, t] : *list) set_data(t, t.detach().to(device));
  for (auto& [n, c] : children_) c->to(device);
}

void Module::to(DType dtype) {
  GRAFT_CHECK(is_floating(dtype), "Module::to: target dtype must be floating, got {}", dtype);
  NoGradGuard ng;
  for (auto* list : {&params_, &buffers_})
    for (auto& [n, t] : *list)
      if (is_floating(t.dtype())) set_data(t, t.detach().to(dtype));
  for (auto& [n, c] : children_) c->to(dtype);
}

StateDict Module::state_dict() const {
  StateDict sd = named_parameters();
  for (auto& nb : named_buffers()) sd.push_back(nb);
  return sd;
}

void Module::load_state_dict(const StateDict& sd, bool strict) {
  StateDict mine = state_dict();
  std::set<std::string> given;
  for (auto& [n, t] : sd) {
    GRAFT_CHECK(given.insert(n).second, "load_state_dict: key '{}' appears twice", n);
    check_defined(t, "load_state_dict");
  }
  std::vector<std::string> missing, unexpected;
  std::set<std::string> have;
  for (auto& [n, t] : mine) {
    have.insert(n);
    if (!given.count(n)) missing.push_back(n);
  }
  for (auto& [n, t] : sd)
    if (!have.count(n)) unexpected.push_back(n);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 10; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 10) s += fmt::format(", ... ({} in all)", v.size());
    return s;
  };
  GRAFT_CHECK(!strict || (missing.empty() && unexpected.empty()),
              "load_state_dict: missing keys [{}]; unexpected keys [{}]; hint: check the model "
              "config, or pass strict=false to load a subset",
              join(missing), join(unexpected));
  // validate every shape/dtype before touching anything
  for (auto& [n, t] : mine) {
    for (auto& [m, s] : sd) {
      if (m != n) continue;
      GRAFT_CHECK(s.shape() == t.shape(), "load_state_dict: '{}' has shape {} in the checkpoint but "
                  "{} in the model", n, s.shape(), t.shape());
      GRAFT_CHECK(is_floating(s.dtype()) == is_floating(t.dtype()),
                  "load_state_dict: '{}' is {} in the checkpoint but {} in the model", n, s.dtype(),
                  t.dtype());
    }
  }
  NoGradGuard ng;
  for (auto& [n, t] : mine)
    for (auto& [m, s] : sd)
      if (m == n) {
        Tensor dst = t;
        dst.copy_(s.to(t.device()));
      }
}

std::string Module::str(int indent) const {
  std::string s = repr();
  if (children_.empty()) return s;
  s += "(\n";
  for (auto& [n, c] : children_)
    s += std::string(indent + 2, ' ') + "(" + n + "): " + c->str(indent + 2) + "\n";
  return s + std::string(indent, ' ') + ")";
}

}  // namespace graft::nn
