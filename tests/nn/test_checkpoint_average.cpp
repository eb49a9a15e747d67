// Checkpoint averaging (nn/checkpoint_average.h): the mean of hand-made checkpoints against the
// mean computed here in double, a run directory's newest checkpoints found in step order, and one
// error per kind of mismatch.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/checkpoint_average.h"
#include "nn/safetensors.h"
#include "ops/error.h"
#include "tests/temp_dir.h"

using namespace graft;
namespace fs = std::filesystem;

namespace {

// One checkpoint: a [2, 3] weight, a [3] bias (f64) and an integer buffer.
nn::NamedTensors checkpoint(double base, int64_t counter = 7) {
  std::vector<double> w(6), b(3);
  for (size_t i = 0; i < 6; ++i) w[i] = base * double(i + 1) - 0.25 * double(i * i);
  for (size_t i = 0; i < 3; ++i) b[i] = base / double(i + 2);
  return {{"lin.weight", from_vector(w, {2, 3})},
          {"lin.bias", from_vector(b, {3}, DType::f64)},
          {"steps", from_vector(std::vector<int64_t>{counter, 2}, {2})}};
}

std::string error_of(const std::vector<std::string>& files) {
  try {
    nn::average_checkpoints(files);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("average_checkpoints: the element-wise mean, each tensor in its own dtype") {
  test::TempDir tmp("ckpt_avg");
  const std::vector<double> bases{1.0, -2.5, 4.0};
  std::vector<std::string> files;
  for (double b : bases) {
    files.push_back(tmp / fmt::format("m{}.safetensors", files.size()));
    nn::save_safetensors(files.back(), checkpoint(b));
  }
  const nn::NamedTensors avg = nn::average_checkpoints(files);
  REQUIRE(avg.size() == 3);
  std::vector<std::vector<double>> w, b;
  for (double base : bases) {
    const auto c = checkpoint(base);
    w.push_back(c[0].second.to_vector<double>());
    b.push_back(c[1].second.to_vector<double>());
  }
  // the tensors come back in the file's data order (sorted by dtype, then name)
  const auto find = [&](const std::string& name) {
    for (const auto& [n, t] : avg)
      if (n == name) return t;
    FAIL("no tensor ", name);
    return Tensor();
  };
  const Tensor aw = find("lin.weight"), ab = find("lin.bias"), as = find("steps");
  CHECK(aw.dtype() == DType::f32);
  CHECK(ab.dtype() == DType::f64);
  CHECK(aw.shape() == Shape{2, 3});
  const auto vw = aw.to_vector<double>(), vb = ab.to_vector<double>();
  for (size_t i = 0; i < 6; ++i)
    CHECK(vw[i] == doctest::Approx((w[0][i] + w[1][i] + w[2][i]) / 3).epsilon(1e-6));
  for (size_t i = 0; i < 3; ++i) CHECK(vb[i] == doctest::Approx((b[0][i] + b[1][i] + b[2][i]) / 3).epsilon(1e-15));
  CHECK(as.to_vector<int64_t>() == std::vector<int64_t>{7, 2});  // equal in all: kept, not averaged
  // one file: its own weights
  const auto one = nn::average_checkpoints({files[1]});
  CHECK(one[0].second.to_vector<double>() == nn::load_safetensors(files[1]).tensors[0].second.to_vector<double>());
}

TEST_CASE("average_checkpoints: files of different models are refused") {
  test::TempDir tmp("ckpt_avg_bad");
  const std::string a = tmp / "a.safetensors";
  nn::save_safetensors(a, checkpoint(1.0));
  auto save_variant = [&](const std::string& name, nn::NamedTensors t) {
    nn::save_safetensors(tmp / name, t);
    return tmp / name;
  };
  auto renamed = checkpoint(2.0);
  renamed[1].first = "lin.bias2";
  CHECK(error_of({a, save_variant("r.safetensors", renamed)}).find("has no tensor 'lin.bias'") != std::string::npos);
  auto reshaped = checkpoint(2.0);
  reshaped[0].second = zeros({3, 2});
  CHECK(error_of({a, save_variant("s.safetensors", reshaped)}).find("'lin.weight' is") != std::string::npos);
  auto retyped = checkpoint(2.0);
  retyped[0].second = retyped[0].second.to(DType::f64);
  CHECK(error_of({a, save_variant("t.safetensors", retyped)}).find("float64") != std::string::npos);
  CHECK(error_of({a, save_variant("i.safetensors", checkpoint(2.0, 8))}).find("integer tensor 'steps' differs") !=
        std::string::npos);
  auto fewer = checkpoint(2.0);
  fewer.pop_back();
  CHECK(error_of({a, save_variant("f.safetensors", fewer)}).find("holds 2 tensors") != std::string::npos);
  CHECK(error_of({a, tmp / "missing.safetensors"}) != "");
  CHECK(error_of({}).find("no checkpoint files") != std::string::npos);
}

TEST_CASE("run_checkpoint_models: the newest step directories first, at most `last`") {
  test::TempDir tmp("ckpt_avg_run");
  for (int64_t step : {250, 1000, 750, 500}) {
    const fs::path d = fs::path(tmp.str()) / "checkpoint" / fmt::format("step-{:08d}", step);
    fs::create_directories(d);
    nn::save_safetensors((d / "model.safetensors").string(), checkpoint(double(step)));
  }
  fs::create_directories(fs::path(tmp.str()) / "checkpoint" / "step-00002000");  // no model file yet
  fs::create_directories(fs::path(tmp.str()) / "checkpoint" / "notes");
  const auto two = nn::run_checkpoint_models(tmp.str(), 2);
  REQUIRE(two.size() == 2);
  CHECK(two[0].find("step-00001000") != std::string::npos);
  CHECK(two[1].find("step-00000750") != std::string::npos);
  CHECK(nn::run_checkpoint_models(tmp.str(), 10).size() == 4);
  CHECK_THROWS_AS(nn::run_checkpoint_models(tmp.str(), 0), Error);
  test::TempDir empty("ckpt_avg_empty");
  CHECK_THROWS_AS(nn::run_checkpoint_models(empty.str(), 3), Error);
}
