// The tests' element-by-element comparison of a tensor with expected values.
#pragma once
#include <doctest/doctest.h>

#include <vector>

#include "autograd/tensor.h"

namespace graft::test {

// t's elements (any dtype, read as double) equal `want` to relative tolerance tol, one
// assertion per element naming its index.
inline void check_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-12) {
  std::vector<double> got = t.to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
  }
}

}  // namespace graft::test
