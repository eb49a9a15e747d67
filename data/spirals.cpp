// Two-spirals generation and uniform mini-batch sampling (see data/spirals.h).
#include "data/spirals.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "autograd/functions.h"
#include "ops/error.h"

namespace graft::data {

Spirals make_spirals(int64_t points_per_class, double noise, Generator& gen) {
  GRAFT_CHECK(points_per_class >= 1 && points_per_class <= (int64_t(1) << 26),
              "make_spirals: points_per_class must be in [1, 2^26], got {}", points_per_class);
  GRAFT_CHECK(std::isfinite(noise) && noise >= 0,
              "make_spirals: noise must be a finite number >= 0, got {}", noise);
  const int64_t n = points_per_class;
  std::vector<double> points;
  std::vector<int64_t> labels;
  points.reserve(size_t(4 * n));
  labels.reserve(size_t(2 * n));
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 1; i <= n; ++i) {
      const double r = 0.1 + 0.9 * double(i) / double(n);
      const double a = 5 * std::numbers::pi * r + double(c) * std::numbers::pi;
      points.insert(points.end(), {r * std::cos(a), r * std::sin(a)});
      labels.push_back(c);
    }
  Spirals s;
  s.x = from_vector(points, {2 * n, 2}) + noise * randn({2 * n, 2}, {}, &gen);  // [N, 2]
  s.y = from_vector(labels, {2 * n});                                             // [N]
  return s;
}

Batch sample_batch(const Tensor& x, const Tensor& y, int64_t batch, Generator& gen) {
  check_defined(x, "sample_batch");
  check_defined(y, "sample_batch");
  GRAFT_CHECK(batch >= 1, "sample_batch: batch must be >= 1, got {}", batch);
  GRAFT_CHECK(x.dim() >= 1 && y.dim() >= 1 && x.size(0) == y.size(0),
              "sample_batch: x {} and y {} must have the same number of rows",
              x.shape().str(), y.shape().str());
  GRAFT_CHECK(x.size(0) > 0, "sample_batch: the dataset is empty");
  Tensor idx = randint(0, x.size(0), {batch}, &gen);  // [B] int64
  return {index_select(x, 0, idx), index_select(y, 0, idx)};
}

}  // namespace graft::data
