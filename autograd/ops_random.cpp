// Random ops: dropout. The mask comes from the counter-based generator (ops/random.h), so a
// fixed seed gives the same mask on every device and thread count; y = x * mask is an ordinary
// mul, which gives the backward (dx = dy * mask) and every higher derivative.
#include "autograd/case_util.h"
#include "autograd/dispatch.h"
#include "autograd/functions.h"
#include "autograd/node.h"

namespace graft {

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_defined(x, "dropout");
  GRAFT_CHECK(p >= 0.0 && p < 1.0, "dropout: probability p must be in [0, 1), got {}", p);
  if (!training || p == 0.0) return x;
  detail::check_float(x, "dropout");
  TensorOptions opt = x.options().requires_grad(false);
  Tensor mask;
  {
    NoGradGuard ng;
    // mask = [u >= p] / (1 - p), u ~ U[0, 1): each element kept with probability 1 - p. One
    // kernel where the device has it; else composed (the same values: see the kernel list).
    const Backend& be = detail::backend("dropout", {&x});
    if (be.dropout_mask) {
      Generator& g = gen ? *gen : default_generator();
      mask = Tensor::empty(x.shape(), opt);
      be.dropout_mask(mask.kview(), p, g.seed, g.advance(uint64_t(mask.numel())));
    } else {
      Tensor u = uniform(x.shape(), 0.0, 1.0, opt, gen);
      mask = where(ge(u, full(Shape{}, p, opt)), full(Shape{}, 1.0 / (1.0 - p), opt),
                   zeros(Shape{}, opt));
    }
  }
  return x * mask;  // dx = dy * mask (recorded by mul)
}

// ------------------------------------------------------------------ op table entries
using namespace cases;

void register_random_ops(std::vector<OpInfo>& t) {
  auto has = [](const Backend& b) { return b.uniform && b.compare && b.where && b.binary; };
  t.push_back({"dropout", true, has, [](Generator& g) {
                 // A fresh generator with a fixed seed on every call: finite differences and the
                 // analytical gradient all see the same mask.
                 return std::vector<OpCase>{
                     mk("[4,5] p 0.3", {u(g, {4, 5})},
                        [](const auto& in) {
                          Generator gen(1234);
                          return dropout(in[0], 0.3, true, &gen);
                        }),
                     mk("transposed [5,4]^T p 0.5, squared", {u(g, {5, 4})}, [](const auto& in) {
                       Generator gen(99);
                       Tensor y = dropout(in[0].t(), 0.5, true, &gen);
                       return y * y;
                     })};
               }});
}

}  // namespace graft
