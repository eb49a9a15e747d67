// Shared by the nn::Trainer suites: a small seeded training run (spirals MLP with dropout, AdamW,
// warmup + cosine, a registered batch generator), an uninterrupted 20-step reference, temporary
// run directories and metrics.jsonl readers.
#pragma once
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "data/spirals.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "nn/trainer.h"
#include "ops/random.h"
#include "tests/temp_dir.h"

namespace trainer_test {

using namespace graft;
namespace fs = std::filesystem;

// A directory under /tmp that the trainer creates itself, removed afterwards.
struct TempDir : graft::test::TempDir {
  explicit TempDir(const std::string& name) : graft::test::TempDir("trainer", name, false) {}
};

// Everything one training process builds: data, a model with dropout (draws from the default
// generator), AdamW, a warmup + cosine schedule and a batch generator (registered).
struct Run {
  Tensor x, y;
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::CosineWithWarmup> sched;
  nn::CrossEntropyLoss ce;
  Generator batches{123};
  std::function<void(int64_t step, int micro)> hook;  // called before each micro-batch

  explicit Run(uint64_t init_seed) {
    Generator data_gen(5);
    data::Spirals d = data::make_spirals(32, 0.05, data_gen);
    x = d.x;
    y = d.y;
    manual_seed(init_seed);
    model = std::make_shared<nn::Sequential>(
        std::make_shared<nn::Linear>(2, 16), std::make_shared<nn::Tanh>(),
        std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(16, 2));
    opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 0.02});
    sched = std::make_unique<optim::CosineWithWarmup>(*opt, 3, 20);
  }

  nn::LossFn loss_fn() {
    return [this](int64_t step, int micro) -> nn::MicroBatchLoss {
      if (hook) hook(step, micro);
      data::Batch b = data::sample_batch(x, y, 8, batches);
      return {ce(model->forward(b.x), b.y), 8};
    };
  }
  nn::EvalFn eval_fn() {
    return [this] {
      Tensor logits = model->forward(x);
      double acc = mean(eq(argmax(logits, 1), y).to(DType::f32)).item();
      return std::map<std::string, double>{{"loss", ce(logits, y).item()}, {"accuracy", acc}};
    };
  }
  std::unique_ptr<nn::Trainer> trainer(nn::TrainerOptions o) {
    o.progress = false;
    auto t = std::make_unique<nn::Trainer>(o, *model, *opt, sched.get(), loss_fn(), eval_fn());
    t->register_generator("batches", batches);
    return t;
  }
  std::vector<double> params() const {
    std::vector<double> v;
    for (const Tensor& p : model->parameters())
      for (double e : p.to_vector<double>()) v.push_back(e);
    return v;
  }
};

inline nn::TrainerOptions base_options(int64_t steps, const std::string& run_dir = "") {
  nn::TrainerOptions o;
  o.max_steps = steps;
  o.run_dir = run_dir;
  o.grad_accumulation = 2;
  o.clip_grad_norm = 1.0;
  o.eval_every = 4;
  o.config_json = R"({"model": "test"})";
  return o;
}

// base_options of a run that resumes from the checkpoint in run_dir.
inline nn::TrainerOptions resume_options(int64_t steps, const std::string& run_dir) {
  nn::TrainerOptions o = base_options(steps, run_dir);
  o.resume = true;
  return o;
}

// A fresh run (seed 1) of `steps` steps into run_dir, checkpointing every `every` steps and
// keeping the newest `keep` checkpoints.
inline void train_checkpointed(const std::string& run_dir, int64_t steps, int64_t every,
                               int64_t keep) {
  Run r(1);
  nn::TrainerOptions o = base_options(steps, run_dir);
  o.checkpoint_every = every;
  o.keep_checkpoints = keep;
  r.trainer(o)->fit();
}

// The uninterrupted reference: 20 steps in one go.
struct Reference {
  std::vector<double> losses, params;
  Reference() {
    Run r(1);
    auto t = r.trainer(base_options(20));
    nn::TrainResult res = t->fit();
    REQUIRE(res.step == 20);
    losses = t->losses();
    params = r.params();
  }
};
inline const Reference& reference() {
  static Reference ref;
  return ref;
}

inline std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));  // throws if bad
  return lines;
}

// The "loss" of every training line, in order, checking that steps run 1, 2, 3, ...
inline std::vector<double> logged_losses(const fs::path& run_dir) {
  std::vector<double> losses;
  for (const auto& j : read_jsonl(run_dir / "metrics.jsonl"))
    if (j.contains("loss")) {
      CHECK(j["step"].get<int64_t>() == int64_t(losses.size()) + 1);
      losses.push_back(j["loss"].get<double>());
    }
  return losses;
}

inline std::vector<double> concat(std::vector<double> a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}


}  // namespace trainer_test
