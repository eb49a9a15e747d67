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
