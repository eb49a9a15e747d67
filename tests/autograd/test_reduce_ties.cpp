// amax / amin backward with tied extrema: the gradient is shared evenly among the ties (as in
// PyTorch's amax), per reduced slice, and nothing flows to the other elements. Finite
// differences cannot check this (the function has a kink at a tie), so the values are exact.
#include <doctest/doctest.h>

#include <vector>

#include "autograd/functions.h"
#include "autograd/tensor.h"

using namespace graft;

TEST_CASE("amax / amin: tied extrema share the gradient evenly") {
  const std::vector<double> v = {1, 3, 3, 2,    // row 0: max 3 twice, min 1 once
                                 5, 5, 5, 0};   // row 1: max 5 three times
  {
    Tensor x = from_vector(v, {2, 4}, DType::f64).requires_grad_(true);
    sum(amax(x)).backward();  // one max over all 8: the 5 appears three times
    CHECK(x.grad().to_vector<double>() ==
          std::vector<double>{0, 0, 0, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0});
  }
  {
    Tensor x = from_vector(v, {2, 4}, DType::f64).requires_grad_(true);
    sum(amax(x, {1}) * from_vector(std::vector<double>{2, 6}, {2}, DType::f64)).backward();
    CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 1, 1, 0, 2, 2, 2, 0});
  }
  {
    Tensor x = from_vector(std::vector<double>{4, -1, -1, -1, 7, -1}, {6}, DType::f64)
                   .requires_grad_(true);
    amin(x).backward();
    CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0.25, 0.25, 0.25, 0, 0.25});
  }
}

TEST_CASE("cumsum: running sums along a dim, reverse-cumsum gradient, errors") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64).requires_grad_(true);
  CHECK(cumsum(x, 1).to_vector<double>() == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(cumsum(x, 0).to_vector<double>() == std::vector<double>{1, 2, 3, 5, 7, 9});
  CHECK(cumsum(x.t(), -1).to_vector<double>() == std::vector<double>{1, 5, 2, 7, 3, 9});
  // d/dx_j sum_i w_i y_i = sum_{i >= j} w_i
  Tensor w = from_vector(std::vector<double>{1, 10, 100, 1, 10, 100}, {2, 3}, DType::f64);
  sum(cumsum(x, 1) * w).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{111, 110, 100, 111, 110, 100});
  CHECK(cumsum(zeros({2, 0}, DType::f64), 1).shape() == Shape{2, 0});
  CHECK_THROWS_WITH_AS(cumsum(x, 2), doctest::Contains("cumsum"), Error);
  CHECK_THROWS_WITH_AS(cumsum(ones({3}, DType::i64), 0), doctest::Contains("cumsum"), Error);
}
