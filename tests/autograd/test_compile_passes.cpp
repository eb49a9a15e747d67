// graft::compile corner cases of the plan's passes, each against eager execution: a random
// draw whose result is unused still advances the generator (dead-code elimination keeps it),
// a fused elementwise group whose element count is not a multiple of its tile runs its last,
// partial tile, and a buffer read as a broadcast scalar is not written inside its group.
#include <doctest/doctest.h>

#include <vector>

#include "autograd/compile.h"
#include "autograd/functions.h"
#include "autograd/tensor.h"
#include "ops/random.h"

using namespace graft;

namespace {
std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }
}  // namespace

TEST_CASE("compile: a dead random draw still advances the generator, like eager") {
  Tensor x = ones({16, 8});
  CompiledFunction f = compile([](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor unused = dropout(in[0], 0.5);  // never read: dead code, but it draws
    (void)unused;
    return {dropout(in[0], 0.5)};
  });
  f({x});  // trace
  const trace::Graph* g = f.plan_for({x});
  REQUIRE(g != nullptr);
  manual_seed(11);
  const std::vector<float> r1 = values(f({x})[0]);
  const std::vector<float> r2 = values(f({x})[0]);
  manual_seed(11);
  std::vector<float> e1, e2;
  (void)dropout(x, 0.5);
  e1 = values(dropout(x, 0.5));
  (void)dropout(x, 0.5);
  e2 = values(dropout(x, 0.5));
  CHECK(r1 == e1);
  CHECK(r2 == e2);
  CHECK(r1 != r2);
}

TEST_CASE("compile: a fused group runs its last, partial tile") {
  // 5000 float32 elements in tiles of 8192 bytes / 4 = 2048: two whole tiles and one of 904.
  Generator gen(3);
  Tensor x = uniform({5000}, -1, 1, DType::f32, &gen);
  auto fn = [](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    return {tanh(in[0] * 2.0 + 1.0) * in[0] - in[0]};
  };
  CompiledFunction f = compile(fn);
  f({x * 0.5});  // trace with other values: the replay must compute every element itself
  const trace::Graph* g = f.plan_for({x});
  REQUIRE(g != nullptr);
  REQUIRE_FALSE(g->groups.empty());  // the chain is fused...
  CHECK(g->groups[0].numel % g->groups[0].tile != 0);  // ...and ends in a partial tile
  const std::vector<float> got = values(f({x})[0]);
  const std::vector<float> want = values(fn({x})[0]);
  CHECK(got == want);  // every element, the partial tile's included
}

TEST_CASE("compile: a buffer read as a broadcast scalar is not overwritten within its group") {
  // y = x * b[0], then b += x in place: fused tile by tile, the second tile of y would read
  // b[0] after the first tile of the add had changed it. The planner keeps them apart.
  Generator gen(4);
  Tensor x = uniform({5000}, -1, 1, DType::f32, &gen);
  auto fn = [](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor b = in[0] * 2.0;
    Tensor y = in[0] * b.narrow(0, 0, 1);
    b.add_(in[0]);
    return {y, b};
  };
  CompiledFunction f = compile(fn);
  f({x * 0.5});  // trace
  const std::vector<Tensor>& got = f({x});
  const std::vector<Tensor> want = fn({x});
  CHECK(values(got[0]) == values(want[0]));
  CHECK(values(got[1]) == values(want[1]));
}
