// graft::nn::Module — a tree of named submodules, parameters and buffers, like torch.nn.Module.
//
//   struct MLP : nn::Module {
//     std::shared_ptr<nn::Linear> fc1, fc2;
//     MLP() { fc1 = register_module("fc1", std::make_shared<nn::Linear>(2, 64));
//             fc2 = register_module("fc2", std::make_shared<nn::Linear>(64, 2)); }
//     Tensor forward(const Tensor& x) override { return fc2->forward(relu(fc1->forward(x))); }
//   };
//
// named_parameters() yields dotted paths ("fc1.weight"); state_dict()/load_state_dict() use
// them. Parameters are Tensor handles shared with the module's members: loading and moving
// change the data inside the same handles, so members stay valid.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "autograd/tensor.h"

namespace graft::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = NamedTensors;  // ordered (registration order), like PyTorch's OrderedDict

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The module's type name for printing, e.g. "Linear(in=2, out=64, bias=true)".
  virtual std::string repr() const { return "Module"; }
  // One-tensor forward (layers with other signatures add their own methods).
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  // ---- registration (call from constructors)
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <class M> std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

  // ---- traversal (dotted names, registration order)
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // This module ("") and every descendant with its dotted path.
  std::vector<std::pair<std::string, Module*>> named_modules();
  int64_t num_parameters() const;
  // The dotted name of the first parameter or buffer (state_dict order) holding a NaN or an
  // infinity, "" when every value is finite; all_finite() is that test alone. A model whose
  // training diverged has such weights, and decoding with them gives empty or garbage output.
  std::string first_non_finite() const;
  bool all_finite() const { return first_non_finite().empty(); }

  // ---- modes and housekeeping
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();               // drops every parameter's .grad
  void to(Device device);         // moves parameters and buffers (same handles)
  void to(DType dtype);           // converts floating parameters and buffers (same handles)

  // ---- checkpoints
  StateDict state_dict() const;  // parameters then buffers, recursively
  // Copies values into this module's tensors. Validates everything first (names, shapes,
  // dtypes): on any mismatch it throws graft::Error naming the keys and changes nothing.
  // strict = false ignores missing and unexpected keys (shape mismatches are still errors).
  void load_state_dict(const StateDict& sd, bool strict = true);

  // Pretty tree, like print(model) in PyTorch.
  std::string str(int indent = 0) const;

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> m);

 private:
  void collect(const std::string& prefix, NamedTensors& out, bool params, bool recurse) const;
  NamedTensors params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// True when every element of t is finite (no NaN, no +-inf); integer and bool tensors, and
// undefined or empty ones, always are. Works on any device.
bool all_finite(const Tensor& t);

// Replaces the data of `dst` (storage, shape, strides, dtype) with that of `src`, keeping the
// handle, its requires_grad flag and identity. Used by to() and by optimisers' state loading.
void set_data(Tensor& dst, const Tensor& src);

// A module's name as a template argument (FunctionModule<"ReLU", relu>).
template <size_t N> struct ModuleName {
  char text[N];
  constexpr ModuleName(const char (&s)[N]) {
    for (size_t i = 0; i < N; ++i) text[i] = s[i];
  }
};

// A module without parameters or state that applies one function: forward(x) = F(x), repr
// "<Name>()". ReLU, Tanh, Sigmoid (nn/layers.h), GlobalAvgPool1d, GlobalMaxPool1d (nn/conv.h).
template <ModuleName Name, Tensor (*F)(const Tensor&)>
class FunctionModule : public Module {
 public:
  Tensor forward(const Tensor& x) override { return F(x); }
  std::string repr() const override { return std::string(Name.text) + "()"; }
};

}  // namespace graft::nn
