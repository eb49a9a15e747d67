// nn::Module: registration, dotted names, train/eval, zero_grad, to(dtype), state_dict round
// trips and load errors that leave the model unchanged.
#include <doctest/doctest.h>

#include "autograd/functions.h"
#include "nn/module.h"

using namespace graft;

namespace {
struct Leafy : nn::Module {
  Tensor w, b, running;
  Leafy(int64_t in, int64_t out) {
    w = register_parameter("weight", randn({out, in}));
    b = register_parameter("bias", zeros({out}));
    running = register_buffer("running", ones({out}));
  }
  std::string repr() const override { return "Leafy"; }
  Tensor forward(const Tensor& x) override { return linear(x, w, b); }
};
struct Tree : nn::Module {
  std::shared_ptr<Leafy> enc, dec;
  Tree() {
    enc = register_module("encoder", std::make_shared<Leafy>(3, 4));
    dec = register_module("decoder", std::make_shared<Leafy>(4, 2));
  }
  std::string repr() const override { return "Tree"; }
  Tensor forward(const Tensor& x) override { return dec->forward(relu(enc->forward(x))); }
};
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("named_parameters uses dotted paths in registration order") {
  Tree t;
  auto np = t.named_parameters();
  REQUIRE(np.size() == 4);
  CHECK(np[0].first == "encoder.weight");
  CHECK(np[3].first == "decoder.bias");
  CHECK(t.named_buffers()[1].first == "decoder.running");
  CHECK(t.num_parameters() == 3 * 4 + 4 + 4 * 2 + 2);
  auto mods = t.named_modules();
  CHECK(mods.size() == 3);
  CHECK(mods[1].first == "encoder");
  CHECK(t.str().find("(encoder): Leafy") != std::string::npos);
  CHECK(t.parameters()[0].requires_grad());
}

TEST_CASE("parameters are the members' tensors; train/eval; zero_grad") {
  Tree t;
  CHECK(t.parameters()[0].same(t.enc->w));
  Tensor y = sum(t.forward(ones({5, 3})));
  y.backward();
  CHECK(t.enc->w.grad().defined());
  t.zero_grad();
  CHECK_FALSE(t.enc->w.grad().defined());
  t.eval();
  CHECK_FALSE(t.dec->is_training());
  t.train();
  CHECK(t.enc->is_training());
}

TEST_CASE("state_dict round trip and to(dtype) keep handles") {
  manual_seed(1);
  Tree a;
  manual_seed(2);
  Tree b;
  CHECK(vals(a.enc->w) != vals(b.enc->w));
  b.load_state_dict(a.state_dict());
  CHECK(vals(a.enc->w) == vals(b.enc->w));
  CHECK(vals(a.forward(ones({1, 3}))) == vals(b.forward(ones({1, 3}))));
  Tensor handle = b.enc->w;
  b.to(DType::f64);
  CHECK(handle.dtype() == DType::f64);
  CHECK(b.parameters()[0].same(handle));
  CHECK(handle.requires_grad());
}

TEST_CASE("load_state_dict errors name the keys and leave the model unchanged") {
  Tree t;
  auto before = vals(t.enc->w);
  auto sd = t.state_dict();
  for (auto& [n, v] : sd) v = v.detach() + 1.0;  // different values
  auto missing = sd;
  missing.pop_back();
  try {
    t.load_state_dict(missing);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("decoder.running") != std::string::npos);
  }
  auto extra = sd;
  extra.emplace_back("encoder.extra", ones({1}));
  CHECK_THROWS_AS(t.load_state_dict(extra), Error);
  auto wrong = sd;
  wrong[3].second = ones({7});  // decoder.bias has shape [2]
  try {
    t.load_state_dict(wrong);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("decoder.bias") != std::string::npos);
  }
  CHECK(vals(t.enc->w) == before);  // nothing was copied by any failed load
  t.load_state_dict(missing, /*strict=*/false);
  CHECK(vals(t.enc->w) != before);
}

TEST_CASE("registration errors") {
  nn::Module m;
  m.register_parameter("w", ones({1}));
  CHECK_THROWS_AS(m.register_parameter("w", ones({1})), Error);
  CHECK_THROWS_AS(m.register_parameter("a.b", ones({1})), Error);
  CHECK_THROWS_AS(m.forward(ones({1})), Error);
}
