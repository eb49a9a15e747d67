// Fast linear against the reference with a strided bias (a view such as column 0 of a [O, 2]
// tensor): oneDNN refuses it, so graft's own kernel adds the bias and must honour its stride.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "tests/ops/kernel_test_util.h"

using namespace graft;
using graft::testing::Buf;
using graft::testing::check_close;

TEST_CASE("linear: a strided bias (stride 2) equals the reference") {
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {33, 65, 17}};  // N, I, O
  for (DType dt : {DType::f32, DType::f64})
    for (auto& s : shapes) {
      const int64_t N = s[0], I = s[1], O = s[2];
      const std::string type(dtype_name(dt));
      CAPTURE(type);
      CAPTURE(N);
      CAPTURE(I);
      CAPTURE(O);
      Buf x({N, I}, dt), w({O, I}, dt), b2({O, 2}, dt);
      x.rand(-1, 1, 60);
      w.rand(-1, 1, 61);
      b2.rand(-1, 1, 62);
      TensorView bias = b2.v;  // b2[:, 0]: [O] with stride 2
      bias.shape = Shape{O};
      bias.strides = Strides{2};
      Buf fast({N, O}, dt), want({N, O}, dt);
      fast.rand(100, 101);
      cpu::linear(x.v, w.v, bias, fast.v, Precision::f32);
      cpu::ref::linear(x.v, w.v, bias, want.v, Precision::f32);
      const double atol = dt == DType::f32 ? 2e-6 * double(std::max<int64_t>(I, 8)) : 1e-12 * double(I + 1);
      check_close(fast, want, atol, dt == DType::f32 ? 1e-5 : 1e-12);
    }
}
