// The two-spirals dataset (Lang & Witbrock 1988): two interleaved spirals in the plane, one per
// class, a classic test that a small MLP can learn a very non-linear decision boundary.
//
//   Generator gen(42);
//   data::Spirals d = data::make_spirals(200, 0.02, gen);   // d.x [400, 2] f32, d.y [400] i64
//   data::Batch b = data::sample_batch(d.x, d.y, 64, batch_gen);
//
// Both functions draw their random numbers from the Generator they are given, so the same seed
// gives the same points and the same batches on every run (and after a checkpoint resume, once
// the generator's {seed, offset} is restored).
#pragma once
#include <cstdint>

#include "autograd/tensor.h"
#include "ops/random.h"

namespace graft::data {

struct Spirals {
  Tensor x;  // [N, 2] float32 points, N = 2 * points_per_class (class 0 first)
  Tensor y;  // [N] int64 labels, 0 or 1
};

// Spiral c (c = 0, 1) is r -> (r cos(a), r sin(a)), a = 5 pi r + c pi, at the radii
// r_i = 0.1 + 0.9 i / n (i = 1..n, about 2.25 turns each), plus Gaussian noise of std `noise`
// drawn from `gen` (2N normal draws). graft::Error for n < 1 or a negative or non-finite noise.
Spirals make_spirals(int64_t points_per_class, double noise, Generator& gen);

struct Batch {
  Tensor x;  // [B, ...] rows of the inputs
  Tensor y;  // [B] their labels
};

// `batch` rows drawn uniformly with replacement (B randint draws from `gen`); x [N, ...] and
// y [N] must have the same number of rows. graft::Error for batch < 1 or an empty dataset.
Batch sample_batch(const Tensor& x, const Tensor& y, int64_t batch, Generator& gen);

}  // namespace graft::data
