// nn::Trainer: bit-identical resume (after a clean stop, a SIGINT, and a crash between
// checkpoints), crash-consistent checkpoints, metrics.jsonl, early stopping, gradient
// accumulation, and option checking.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/spirals.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/scheduler.h"
#include "nn/trainer.h"
#include "ops/error.h"
#include "ops/random.h"
#include "tests/nn/trainer_fixture.h"

using namespace graft;
using namespace trainer_test;
namespace fs = std::filesystem;

TEST_CASE("Trainer: 10 steps + checkpoint + fresh objects + resume == 20 steps, bit for bit") {
  const Reference& ref = reference();
  REQUIRE(ref.losses.size() == 20);
  TempDir tmp("resume");

  std::vector<double> first, second;
  {
    Run r(1);
    auto t = r.trainer(base_options(10, tmp.str()));
    nn::TrainResult res = t->fit();
    CHECK(res.reason == nn::StopReason::max_steps);
    CHECK(res.step == 10);
    first = t->losses();
  }
  CHECK(fs::exists(tmp.dir / "checkpoint.json"));
  CHECK(fs::exists(tmp.dir / "checkpoint" / "step-00000010" / "model.safetensors"));
  CHECK(fs::exists(tmp.dir / "checkpoint" / "step-00000010" / "train_state.safetensors"));
  {
    // a new "process": other initial weights and default-generator state, fresh optimizer,
    // scheduler and batch generator; everything must come from the checkpoint
    Run r(999);
    r.batches = Generator(77);
    nn::TrainerOptions o = resume_options(20, tmp.str());
    auto t = r.trainer(o);
    nn::TrainResult res = t->fit();
    CHECK(res.start_step == 10);
    CHECK(res.step == 20);
    second = t->losses();
    CHECK(r.params() == ref.params);  // exact
  }
  REQUIRE(first.size() == 10);
  REQUIRE(second.size() == 10);
  CHECK(concat(first, second) == ref.losses);  // operator== on doubles: bit-identical
  CHECK(logged_losses(tmp.dir) == ref.losses);  // metrics.jsonl round-trips the doubles

  // the train state carries its metadata
  nn::SafetensorsFile st =
      nn::load_safetensors((tmp.dir / "checkpoint" / "step-00000020" / "train_state.safetensors").string());
  CHECK(st.metadata.at("step") == "20");
  CHECK(st.metadata.at("optimizer") == "AdamW");
  CHECK(st.metadata.at("scheduler") == "CosineWithWarmup");
  CHECK(st.metadata.at("config") == R"({"model": "test"})");
  CHECK(!st.metadata.at("graft_version").empty());
  // only the newest checkpoint directory is kept (keep_checkpoints = 1)
  CHECK(!fs::exists(tmp.dir / "checkpoint" / "step-00000010"));
}

TEST_CASE("Trainer: SIGINT finishes the step, saves a checkpoint that resumes bit-identically") {
  const Reference& ref = reference();
  TempDir tmp("sigint");
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);

  std::vector<double> first, second;
  {
    Run r(1);
    r.hook = [](int64_t step, int micro) {
      if (step == 5 && micro == 1) ::raise(SIGINT);  // in the middle of step 6
    };
    nn::TrainerOptions o = base_options(20, tmp.str());
    o.checkpoint_every = 0;
    auto t = r.trainer(o);
    nn::TrainResult res = t->fit();
    CHECK(res.reason == nn::StopReason::interrupted);
    CHECK(res.step == 6);  // the interrupted step was completed
    first = t->losses();
  }
  // the previous SIGINT handler is back
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  const bool same_handler = after.sa_handler == before.sa_handler;
  CHECK(same_handler);

  auto ptr = nlohmann::json::parse(std::ifstream(tmp.dir / "checkpoint.json"));
  CHECK(ptr["step"] == 6);
  CHECK(ptr["dir"] == "checkpoint/step-00000006");
  {
    Run r(999);
    nn::TrainerOptions o = resume_options(20, tmp.str());
    auto t = r.trainer(o);
    nn::TrainResult res = t->fit();
    CHECK(res.start_step == 6);
    CHECK(res.reason == nn::StopReason::max_steps);
    second = t->losses();
  }
  CHECK(concat(first, second) == ref.losses);
  CHECK(logged_losses(tmp.dir) == ref.losses);
}

TEST_CASE("Trainer: request_stop() stops after the step; resume continues exactly") {
  const Reference& ref = reference();
  TempDir tmp("request_stop");
  std::vector<double> first, second;
  {
    Run r(1);
    nn::Trainer* self = nullptr;
    r.hook = [&](int64_t step, int) {
      if (step == 12) self->request_stop();
    };
    auto t = r.trainer(base_options(20, tmp.str()));
    self = t.get();
    nn::TrainResult res = t->fit();
    CHECK(res.reason == nn::StopReason::interrupted);
    CHECK(res.step == 13);
    first = t->losses();
  }
  {
    Run r(3);
    nn::TrainerOptions o = resume_options(20, tmp.str());
    auto t = r.trainer(o);
    t->fit();
    second = t->losses();
  }
  CHECK(concat(first, second) == ref.losses);
}

TEST_CASE("Trainer: a crash after a checkpoint resumes from it and rewrites the metrics log") {
  const Reference& ref = reference();
  TempDir tmp("crash");
  {
    Run r(1);
    r.hook = [](int64_t step, int) {
      if (step == 7) throw std::runtime_error("simulated crash");
    };
    nn::TrainerOptions o = base_options(20, tmp.str());
    o.checkpoint_every = 5;
    auto t = r.trainer(o);
    CHECK_THROWS_WITH_AS(t->fit(), "simulated crash", std::runtime_error);
  }
  CHECK(logged_losses(tmp.dir).size() == 7);  // steps 1..7 were logged before the crash
  // an unfinished later save (no pointer update): must be ignored
  fs::create_directories(tmp.dir / "checkpoint" / "step-00000009");
  std::ofstream(tmp.dir / "checkpoint" / "step-00000009" / "model.safetensors") << "garbage";
  {
    Run r(999);
    nn::TrainerOptions o = resume_options(20, tmp.str());
    o.checkpoint_every = 5;
    auto t = r.trainer(o);
    nn::TrainResult res = t->fit();
    CHECK(res.start_step == 5);
    CHECK(res.step == 20);
    CHECK(t->losses() == std::vector<double>(ref.losses.begin() + 5, ref.losses.end()));
  }
  CHECK(logged_losses(tmp.dir) == ref.losses);  // lines 6, 7 of the crashed run were replaced
  CHECK(!fs::exists(tmp.dir / "checkpoint" / "step-00000009"));
}

TEST_CASE("Trainer: checkpoint files are checked against the pointer before anything changes") {
  TempDir tmp("consistency");
  train_checkpointed(tmp.str(), 8, 4, 2);
  const fs::path c4 = tmp.dir / "checkpoint" / "step-00000004";
  const fs::path c8 = tmp.dir / "checkpoint" / "step-00000008";
  REQUIRE(fs::exists(c4));  // keep_checkpoints = 2
  REQUIRE(fs::exists(c8));

  SUBCASE("a mixed pair (model of another checkpoint) is refused, the model stays as it was") {
    fs::copy_file(c4 / "model.safetensors", c8 / "model.safetensors",
                  fs::copy_options::overwrite_existing);
    Run r(999);
    const std::vector<double> before = r.params();
    nn::TrainerOptions o = resume_options(20, tmp.str());
    auto t = r.trainer(o);
    CHECK_THROWS_WITH_AS(t->fit(), doctest::Contains("mixed checkpoint"), Error);
    CHECK(r.params() == before);
  }
  SUBCASE("a model of another shape is refused, the model stays as it was") {
    Run r(999);
    r.model = std::make_shared<nn::Sequential>(
        std::make_shared<nn::Linear>(2, 17), std::make_shared<nn::Tanh>(),
        std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(17, 2));
    r.opt = std::make_unique<optim::AdamW>(r.model->parameters(), optim::AdamWOptions{.lr = 0.02});
    r.sched = std::make_unique<optim::CosineWithWarmup>(*r.opt, 3, 20);
    const std::vector<double> before = r.params();
    nn::TrainerOptions o = resume_options(20, tmp.str());
    auto t = r.trainer(o);
    CHECK_THROWS_AS(t->fit(), Error);
    CHECK(r.params() == before);
    CHECK(t->step() == 0);
  }
  SUBCASE("an unregistered generator in the checkpoint is an error naming it") {
    Run r(1);
    nn::TrainerOptions o = resume_options(20, tmp.str());
    o.progress = false;
    nn::Trainer t(o, *r.model, *r.opt, r.sched.get(), r.loss_fn(), r.eval_fn());
    CHECK_THROWS_WITH_AS(t.fit(), doctest::Contains("'batches'"), Error);
  }
  SUBCASE("a corrupt pointer is an error") {
    std::ofstream(tmp.dir / "checkpoint.json") << "{not json";
    Run r(1);
    nn::TrainerOptions o = resume_options(20, tmp.str());
    CHECK_THROWS_WITH_AS(r.trainer(o)->fit(), doctest::Contains("checkpoint.json"), Error);
  }
  SUBCASE("a pointer leading outside the run directory is an error") {
    std::ofstream(tmp.dir / "checkpoint.json")
        << R"({"format": "graft-checkpoint", "step": 8, "dir": "../../etc",)"
        << R"( "model": "model.safetensors", "train_state": "train_state.safetensors",)"
        << R"( "checkpoint_id": "x"})";
    Run r(1);
    nn::TrainerOptions o = resume_options(20, tmp.str());
    CHECK_THROWS_AS(r.trainer(o)->fit(), Error);
  }
  SUBCASE("without resume, a run directory with a checkpoint is an error unless overwrite") {
    Run r(1);
    CHECK_THROWS_WITH_AS(r.trainer(base_options(20, tmp.str()))->fit(),
                         doctest::Contains("already holds a checkpoint"), Error);
    nn::TrainerOptions o = base_options(3, tmp.str());
    o.overwrite = true;
    nn::TrainResult res = r.trainer(o)->fit();
    CHECK(res.start_step == 0);
    CHECK(res.step == 3);
    CHECK(logged_losses(tmp.dir).size() == 3);
    CHECK(!fs::exists(c8));
  }
}

TEST_CASE("Trainer: resume without a checkpoint starts at step 0; resume past max_steps does nothing") {
  TempDir tmp("fresh");
  Run r(1);
  nn::TrainerOptions o = resume_options(4, tmp.str());
  nn::TrainResult res = r.trainer(o)->fit();
  CHECK(res.start_step == 0);
  CHECK(res.step == 4);
  Run r2(1);
  nn::TrainResult again = r2.trainer(o)->fit();  // already at step 4
  CHECK(again.start_step == 4);
  CHECK(again.step == 4);
  CHECK(std::isnan(again.last_loss));
}

TEST_CASE("Trainer: metrics.jsonl has one parseable object per step and per evaluation") {
  TempDir tmp("metrics");
  Run r(1);
  nn::TrainerOptions o = base_options(12, tmp.str());
  o.eval_every = 3;
  r.trainer(o)->fit();
  std::vector<nlohmann::json> lines = read_jsonl(tmp.dir / "metrics.jsonl");
  int train = 0, eval = 0;
  for (const auto& j : lines) {
    REQUIRE(j.is_object());
    REQUIRE(j["step"].is_number_integer());
    CHECK(j["elapsed"].is_number());
    if (j.contains("loss")) {
      ++train;
      CHECK(j["step"] == train);
      CHECK(j["loss"].is_number());
      CHECK(j["lr"].is_number());
      CHECK(j["throughput"].get<double>() > 0);
      CHECK(j["items"] == 8 * o.grad_accumulation);  // the fixture reports 8 per micro-batch
      CHECK(j["grad_norm"].is_number());  // clip_grad_norm > 0
    } else {
      ++eval;
      CHECK(j["step"] == 3 * eval);
      CHECK(j["eval_loss"].is_number());
      CHECK(j["eval_accuracy"].get<double>() >= 0);
    }
  }
  CHECK(train == 12);
  CHECK(eval == 4);
  // the first step uses the warmup's lr for epoch 0 (0), the next 1/3 of the base lr
  CHECK(lines[0]["lr"].get<double>() == 0.0);
  CHECK(lines[1]["lr"].get<double>() == doctest::Approx(0.02 / 3));
  auto cfg = nlohmann::json::parse(std::ifstream(tmp.dir / "config.json"));
  CHECK(cfg["model"] == "test");
  CHECK(fs::exists(tmp.dir / "best_model.safetensors"));
}

TEST_CASE("Trainer: early stopping after `patience` evaluations without improvement") {
  Run r(1);
  std::vector<double> script = {1.0, 0.8, 0.9, 0.85, 0.7, 0.6};  // evaluated at 2, 4, 6, 8, ...
  size_t calls = 0;
  nn::TrainerOptions o;
  o.max_steps = 100;
  o.eval_every = 2;
  o.early_stopping_patience = 2;
  o.early_stopping_metric = "loss";
  o.progress = false;
  nn::Trainer t(o, *r.model, *r.opt, nullptr, r.loss_fn(),
                [&] { return std::map<std::string, double>{{"loss", script.at(calls++)}}; });
  nn::TrainResult res = t.fit();
  CHECK(res.reason == nn::StopReason::early_stopping);
  CHECK(res.step == 8);
  CHECK(calls == 4);
  CHECK(res.best_metric == 0.8);
  CHECK(res.best_step == 4);
  CHECK(res.last_eval.at("loss") == 0.85);
  CHECK(r.model->is_training());  // eval mode was only for eval_fn

  SUBCASE("mode max and min_delta") {
    Run r2(1);
    std::vector<double> acc = {0.5, 0.6, 0.605, 0.9};
    size_t n = 0;
    nn::TrainerOptions o2 = o;
    o2.early_stopping_metric = "accuracy";
    o2.early_stopping_mode = "max";
    o2.early_stopping_min_delta = 0.01;
    o2.early_stopping_patience = 1;
    nn::Trainer t2(o2, *r2.model, *r2.opt, nullptr, r2.loss_fn(),
                   [&] { return std::map<std::string, double>{{"accuracy", acc.at(n++)}}; });
    nn::TrainResult res2 = t2.fit();
    CHECK(res2.reason == nn::StopReason::early_stopping);
    CHECK(res2.step == 6);  // 0.605 is not 0.01 better than 0.6
    CHECK(res2.best_metric == 0.6);
  }
  SUBCASE("a metric eval_fn does not return is an error naming the ones it does") {
    Run r3(1);
    nn::TrainerOptions o3 = o;
    o3.early_stopping_metric = "bleu";
    nn::Trainer t3(o3, *r3.model, *r3.opt, nullptr, r3.loss_fn(),
                   [&] { return std::map<std::string, double>{{"loss", 1.0}}; });
    CHECK_THROWS_WITH_AS(t3.fit(), doctest::Contains("[loss]"), Error);
  }
}

TEST_CASE("Trainer: 2 micro-batches of half the batch == 1 full batch (one update)") {
  Tensor x = randn({8, 4}, {}, nullptr);
  Tensor y = from_vector(std::vector<int64_t>{0, 1, 2, 0, 1, 2, 2, 1}, {8});
  nn::CrossEntropyLoss ce;
  auto one_step = [&](int64_t k, bool adam) {
    manual_seed(11);
    nn::Linear lin(4, 3);
    std::unique_ptr<optim::Optimizer> opt;
    if (adam)
      opt = std::make_unique<optim::AdamW>(lin.parameters(), optim::AdamWOptions{.lr = 0.01});
    else
      opt = std::make_unique<optim::SGD>(lin.parameters(), optim::SGDOptions{.lr = 0.5});
    nn::TrainerOptions o;
    o.max_steps = 1;
    o.grad_accumulation = k;
    o.progress = false;
    const int64_t rows = 8 / k;
    nn::Trainer t(o, lin, *opt, nullptr, [&](int64_t, int micro) -> nn::MicroBatchLoss {
      return {ce(lin.forward(x.narrow(0, micro * rows, rows)), y.narrow(0, micro * rows, rows)),
              rows};
    });
    nn::TrainResult res = t.fit();
    REQUIRE(res.step == 1);
    std::vector<double> v = lin.weight.to_vector<double>();
    for (double b : lin.bias.to_vector<double>()) v.push_back(b);
    v.push_back(res.last_loss);
    return v;
  };
  for (bool adam : {false, true}) {
    CAPTURE(adam);
    const std::vector<double> full = one_step(1, adam), half = one_step(2, adam),
                              quarter = one_step(4, adam);
    REQUIRE(full.size() == half.size());
    for (size_t i = 0; i < full.size(); ++i) {
      CHECK(half[i] == doctest::Approx(full[i]).epsilon(1e-5));
      CHECK(quarter[i] == doctest::Approx(full[i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("Trainer: a non-finite loss is an error and updates nothing") {
  Run r(1);
  const std::vector<double> before = r.params();
  nn::TrainerOptions o;
  o.max_steps = 5;
  o.progress = false;
  nn::Trainer t(o, *r.model, *r.opt, nullptr, [&](int64_t, int) -> nn::MicroBatchLoss {
    return sum(r.model->forward(r.x)) * std::numeric_limits<double>::quiet_NaN();
  });
  CHECK_THROWS_WITH_AS(t.fit(), doctest::Contains("the loss is nan at step 1"), Error);
  CHECK(r.params() == before);
  CHECK(t.step() == 0);
}

TEST_CASE("Trainer: invalid options are graft::Error") {
  Run r(1);
  auto make = [&](nn::TrainerOptions o, bool with_eval = true) {
    o.progress = false;
    nn::Trainer t(o, *r.model, *r.opt, nullptr, r.loss_fn(),
                  with_eval ? r.eval_fn() : nn::EvalFn{});
  };
  nn::TrainerOptions o;
  o.max_steps = 0;
  CHECK_THROWS_AS(make(o), Error);
  o = {};
  o.grad_accumulation = 0;
  CHECK_THROWS_AS(make(o), Error);
  o = {};
  o.eval_every = 10;
  CHECK_THROWS_WITH_AS(make(o, false), doctest::Contains("eval_fn"), Error);
  o = {};
  o.early_stopping_patience = 3;
  CHECK_THROWS_AS(make(o), Error);  // no evaluations
  o = {};
  o.eval_every = 1;
  o.early_stopping_mode = "lowest";
  CHECK_THROWS_AS(make(o), Error);
  o = {};
  o.checkpoint_every = 5;
  CHECK_THROWS_WITH_AS(make(o), doctest::Contains("run_dir"), Error);
  o = {};
  o.resume = true;
  CHECK_THROWS_AS(make(o), Error);
  o = {};
  o.clip_grad_norm = -1;
  CHECK_THROWS_AS(make(o), Error);
  o = {};
  o.config_json = "{not json";
  CHECK_THROWS_WITH_AS(make(o), doctest::Contains("config_json"), Error);

  o = {};
  o.progress = false;
  nn::Trainer t(o, *r.model, *r.opt, nullptr, r.loss_fn());
  t.register_generator("batches", r.batches);
  CHECK_THROWS_AS(t.register_generator("batches", r.batches), Error);
  CHECK_THROWS_AS(t.register_generator("default", r.batches), Error);
  CHECK_THROWS_AS(t.register_generator("a/b", r.batches), Error);
  CHECK_THROWS_AS(t.save_checkpoint(), Error);  // no run_dir

  nn::Trainer bad(o, *r.model, *r.opt, nullptr, [](int64_t, int) -> nn::MicroBatchLoss {
    return zeros({2});
  });
  CHECK_THROWS_WITH_AS(bad.fit(), doctest::Contains("one-element"), Error);
}
