// graft::dist and data-parallel nn::Trainer. Run alone (one rank: every collective is the
// identity) and under `mpirun -np 2` (tests/nn/run_mpi.sh): collectives against sequential
// sums, the bucketed gradient reducer (overlapped, after backward, empty buckets, missing
// gradients) against a plain all-reduce, and a data-parallel training run against the one-process
// run on the whole batch.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "autograd/functions.h"
#include "nn/distributed.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/trainer.h"
#include "ops/random.h"

using namespace graft;

namespace {

// This rank and the number of ranks (read after main() has started MPI).
#define R (dist::rank())
#define N (dist::world_size())

// Value i of rank r's tensor: small integers, so float sums are exact in any order.
double value(int r, int64_t i) { return double((i * 7 + r * 13) % 23) - 11.0; }

Tensor filled(int64_t n, DType dt, int r) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(r, i);
  return from_vector(v, {n}, DType::f64).to(dt);
}

std::unique_ptr<nn::Sequential> small_model() {
  manual_seed(3);
  return std::make_unique<nn::Sequential>(std::make_shared<nn::Linear>(4, 8),
                                          std::make_shared<nn::Tanh>(),
                                          std::make_shared<nn::Linear>(8, 3));
}

std::vector<double> flat_grads(const std::vector<Tensor>& ps) {
  std::vector<double> v;
  for (const Tensor& p : ps)
    for (double e : (p.grad().defined() ? p.grad() : zeros_like(p)).to_vector<double>())
      v.push_back(e);
  return v;
}

}  // namespace

TEST_CASE("dist: all_reduce_sum equals the sequential sum over ranks (odd sizes, dtypes)") {
  for (DType dt : {DType::f32, DType::f64, DType::i64})
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(100003)}) {
      CAPTURE(n);
      Tensor t = filled(n, dt, R);
      dist::all_reduce_sum(t);
      std::vector<double> got = t.to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        double want = 0;
        for (int r = 0; r < N; ++r) want += value(r, i);
        REQUIRE(got[size_t(i)] == want);
      }
    }
  CHECK(dist::all_reduce_sum(double(R + 1)) == double(N * (N + 1) / 2));
  CHECK(dist::all_reduce_max(int64_t(R)) == N - 1);
  CHECK(dist::any(R == N - 1));
  CHECK_FALSE(dist::any(false));
}

TEST_CASE("dist: broadcast copies the root's tensor to every rank") {
  for (int root = 0; root < N; ++root) {
    Tensor t = filled(1001, DType::f32, R);
    dist::broadcast(t, root);
    CHECK(t.to_vector<double>() == filled(1001, DType::f32, root).to_vector<double>());
  }
  Tensor t = filled(3, DType::f32, R);
  CHECK_THROWS_AS(dist::broadcast(t, N), Error);  // no such rank
}

TEST_CASE("dist: shard splits a global batch into equal contiguous shares") {
  const dist::Range mine = dist::shard(8 * N);
  CHECK(mine.count == 8);
  CHECK(mine.begin == 8 * R);
  if (N > 1) CHECK_THROWS_WITH_AS(dist::shard(8 * N + 1), doctest::Contains("multiple"), Error);
}

TEST_CASE("dist: split covers a batch of any size; global_mean weighs unequal shares") {
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(5), int64_t(17)}) {
    CAPTURE(n);
    const dist::Range mine = dist::split(n);
    CHECK(dist::all_reduce_sum(double(mine.count)) == double(n));
    CHECK(mine.count >= n / N);
    CHECK(mine.count <= n / N + 1);
    // the shares tile [0, n): every rank's begin is the sum of the counts of the ranks before
    Tensor counts = zeros({int64_t(N)}, DType::i64);
    counts.data<int64_t>()[R] = mine.count;
    dist::all_reduce_sum(counts);
    int64_t before = 0;
    for (int r = 0; r < R; ++r) before += counts.data<int64_t>()[r];
    CHECK(mine.begin == before);
  }
  // items 1..17 split over the ranks: the average of the weighted local means is the mean, 9
  const dist::Range mine = dist::split(17);
  double local = 0;
  for (int64_t i = mine.begin; i < mine.begin + mine.count; ++i) local += double(i + 1);
  Tensor m = from_vector(std::vector<double>{mine.count ? local / double(mine.count) : 123.0}, {1},
                         DType::f64);
  const double weighted = dist::global_mean(m, mine.count).item<double>();
  CHECK(dist::all_reduce_sum(weighted) / double(N) == doctest::Approx(9.0).epsilon(1e-12));
}

TEST_CASE("dist: GradReducer averages gradients like a plain all-reduce, overlapped or not") {
  // per rank: different data, the same weights; grad = mean over ranks of the local grads
  auto local_grads = [&](nn::Sequential& m) {
    manual_seed(uint64_t(100 + R));
    Tensor x = randn({5, 4});
    return sum(m.forward(x) * m.forward(x));
  };
  std::vector<double> want;
  {
    auto m = small_model();
    local_grads(*m).backward();
    for (Tensor& p : m->parameters()) {
      Tensor g = p.grad().clone();
      dist::all_reduce_sum(g);
      p.set_grad(g / double(N));
    }
    want = flat_grads(m->parameters());
  }
  for (bool overlap : {true, false})
    for (size_t bucket : {size_t(1), size_t(100), size_t(4) << 20}) {
      CAPTURE(overlap);
      CAPTURE(bucket);
      auto m = small_model();
      dist::GradReducer red(m->parameters(), bucket, overlap);
      red.arm();
      local_grads(*m).backward();
      red.finish();
      const std::vector<double> got = flat_grads(m->parameters());
      REQUIRE(got.size() == want.size());
      if (N <= 2) {
        CHECK(got == want);  // exact: a sum of two is the same in any order, halving is exact
      } else {
        for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
      }
      if (N > 1) {
        CHECK(red.num_buckets() >= 1);
        CHECK(red.launched_in_backward() == (overlap ? red.num_buckets() : 0));
        if (bucket == 1) CHECK(red.num_buckets() == m->parameters().size());
      }
    }
}

TEST_CASE("dist: a parameter without a gradient contributes zeros (no hang, no stale data)") {
  nn::Linear unused(4, 8), used(8, 3);
  std::vector<Tensor> ps = unused.parameters();
  for (const Tensor& p : used.parameters()) ps.push_back(p);
  dist::GradReducer red(ps, 1, true);
  for (int step = 0; step < 3; ++step) {
    for (Tensor& p : ps) p.set_grad(Tensor());
    red.arm();
    if (step == 0) {  // both layers take part: the reducer's buckets now hold nonzero sums
      sum(used.forward(unused.forward(randn({2, 4})))).backward();
      red.finish();
      continue;
    }
    // only `used` takes part: `unused`'s weight and bias get no gradient
    sum(used.forward(randn({2, 8}))).backward();
    red.finish();
    for (size_t i = 0; i < 2; ++i) {
      if (N == 1) {  // one rank: the reducer leaves every gradient as backward() left it
        CHECK_FALSE(ps[i].grad().defined());
        continue;
      }
      REQUIRE(ps[i].grad().defined());
      for (double g : ps[i].grad().to_vector<double>()) CHECK(g == 0.0);
    }
  }
}

TEST_CASE("dist: data-parallel Trainer on a sharded batch == one process on the whole batch") {
  const int64_t B = 24;  // micro-batches of 12 rows: shares for 1, 2, 3 or 4 ranks
  manual_seed(9);
  Tensor x = randn({B, 4});
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < B; ++i) labels.push_back((i * 5 + 1) % 3);
  Tensor y = from_vector(labels, {B});
  nn::CrossEntropyLoss ce;
  auto run = [&](bool parallel, std::vector<double>& params) {
    auto m = small_model();
    optim::AdamW opt(m->parameters(), {.lr = 0.05});
    nn::TrainerOptions o;
    o.max_steps = 12;
    o.grad_accumulation = 2;
    o.progress = false;
    o.data_parallel = parallel;
    o.dp_bucket_bytes = 64;  // several buckets
    const int64_t micro = B / 2;
    nn::Trainer t(o, *m, opt, nullptr, [&](int64_t step, int mb) -> nn::MicroBatchLoss {
      // the global micro-batch rows, rotated by step; this rank's share of them
      const dist::Range mine = parallel ? dist::shard(micro) : dist::Range{0, micro};
      std::vector<int64_t> rows;
      for (int64_t j = 0; j < mine.count; ++j)
        rows.push_back((step * 3 + mb * micro + mine.begin + j) % B);
      Tensor r = from_vector(rows, {mine.count});
      return {ce(m->forward(index_select(x, 0, r)), index_select(y, 0, r)), mine.count};
    });
    t.fit();
    params.clear();
    for (const Tensor& p : m->parameters())
      for (double e : p.to_vector<double>()) params.push_back(e);
    return t.losses();
  };
  std::vector<double> p1, pN;
  const std::vector<double> one = run(false, p1), many = run(true, pN);
  REQUIRE(one.size() == 12);
  REQUIRE(many.size() == 12);
  for (size_t i = 0; i < one.size(); ++i) CHECK(many[i] == doctest::Approx(one[i]).epsilon(1e-5));
  for (size_t i = 0; i < p1.size(); ++i) CHECK(pN[i] == doctest::Approx(p1[i]).epsilon(1e-4));
  // and the ranks hold the same weights, bit for bit
  Tensor mine = from_vector(pN, {int64_t(pN.size())}, DType::f64);
  Tensor root = mine.clone();
  dist::broadcast(root, 0);
  CHECK(mine.to_vector<double>() == root.to_vector<double>());
}

TEST_CASE("dist: a stop asked for on one rank stops every rank after the same step") {
  auto m = small_model();
  optim::SGD opt(m->parameters(), {.lr = 0.01});
  nn::TrainerOptions o;
  o.max_steps = 20;
  o.progress = false;
  nn::Trainer* self = nullptr;
  nn::Trainer t(o, *m, opt, nullptr, [&](int64_t step, int) -> nn::MicroBatchLoss {
    if (step == 4 && R == N - 1) self->request_stop(nn::StopReason::target);
    manual_seed(uint64_t(step));
    return sum(m->forward(randn({2, 4})));
  });
  self = &t;
  nn::TrainResult res = t.fit();
  CHECK(res.step == 5);
  CHECK(res.reason == nn::StopReason::target);
}
