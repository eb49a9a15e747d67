// nn::Trainer never loses a run: non-finite weights are not checkpointed, resume never deletes
// and finds a checkpoint without its pointer, a changed hyperparameter on resume is refused,
// early stopping survives a resume, Ctrl-C in every phase, time budgets, stop reasons and the
// divergence warning.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "nn/interrupt.h"
#include "nn/safetensors.h"
#include "nn/trainer.h"
#include "ops/error.h"
#include "tests/nn/trainer_fixture.h"

using namespace graft;
using namespace trainer_test;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool all_finite(const nn::SafetensorsFile& f) {
  for (auto& [k, t] : f.tensors)
    for (double v : t.to_vector<double>())
      if (!std::isfinite(v)) return false;
  return true;
}

}  // namespace

TEST_CASE("Trainer: weights that became non-finite are never checkpointed") {
  TempDir tmp("nan_weights");
  Run r(1);
  // AdamW's decoupled decay multiplies the weights by (1 - lr * wd) = -1e6 per step: they
  // overflow to inf within a few steps while each step's loss is still finite.
  r.opt = std::make_unique<optim::AdamW>(r.model->parameters(),
                                         optim::AdamWOptions{.lr = 1000, .weight_decay = 1000});
  nn::TrainerOptions o = base_options(50, tmp.str());
  o.checkpoint_every = 1;
  o.clip_grad_norm = 0;
  o.eval_every = 0;
  o.progress = false;
  nn::Trainer t(o, *r.model, *r.opt, nullptr, r.loss_fn());
  t.register_generator("batches", r.batches);
  CHECK_THROWS_WITH_AS(t.fit(), doctest::Contains("not finite"), Error);
  // the live checkpoint is the last good one, and it is still there
  auto ptr = nlohmann::json::parse(std::ifstream(tmp.dir / "checkpoint.json"));
  const fs::path live = tmp.dir / ptr["dir"].get<std::string>();
  REQUIRE(fs::exists(live / "model.safetensors"));
  CHECK(all_finite(nn::load_safetensors((live / "model.safetensors").string())));
  CHECK(ptr["step"].get<int64_t>() < t.step());
}

TEST_CASE("Trainer: resume without checkpoint.json uses the newest complete step directory") {
  const Reference& ref = reference();
  TempDir tmp("no_pointer");
  train_checkpointed(tmp.str(), 10, 5, 2);
  REQUIRE(fs::exists(tmp.dir / "best_model.safetensors"));
  const std::string best = slurp(tmp.dir / "best_model.safetensors");
  fs::remove(tmp.dir / "checkpoint.json");

  SUBCASE("the newest one, bit-identical to an uninterrupted run; nothing deleted") {
    Run r(999);
    nn::TrainerOptions o = resume_options(20, tmp.str());
    auto t = r.trainer(o);
    nn::TrainResult res = t->fit();
    CHECK(res.start_step == 10);
    CHECK(logged_losses(tmp.dir) == ref.losses);
    CHECK(fs::exists(tmp.dir / "best_model.safetensors"));
  }
  SUBCASE("a damaged newest directory is skipped for the one before it") {
    std::ofstream(tmp.dir / "checkpoint" / "step-00000010" / "model.safetensors") << "garbage";
    Run r(999);
    nn::TrainerOptions o = resume_options(20, tmp.str());
    nn::TrainResult res = r.trainer(o)->fit();
    CHECK(res.start_step == 5);
    CHECK(logged_losses(tmp.dir) == ref.losses);
  }
  SUBCASE("no complete directory: refused, and every file stays") {
    for (const char* d : {"step-00000005", "step-00000010"})
      std::ofstream(tmp.dir / "checkpoint" / d / "train_state.safetensors") << "cut short";
    const std::string metrics = slurp(tmp.dir / "metrics.jsonl");
    Run r(999);
    nn::TrainerOptions o = resume_options(20, tmp.str());
    CHECK_THROWS_WITH_AS(r.trainer(o)->fit(), doctest::Contains("no complete checkpoint"), Error);
    CHECK(slurp(tmp.dir / "metrics.jsonl") == metrics);
    CHECK(slurp(tmp.dir / "best_model.safetensors") == best);
    CHECK(fs::exists(tmp.dir / "checkpoint" / "step-00000010" / "model.safetensors"));
  }
  SUBCASE("only the metrics of an earlier run: resume and a fresh start both refuse") {
    fs::remove_all(tmp.dir / "checkpoint");
    const std::string metrics = slurp(tmp.dir / "metrics.jsonl");
    for (bool resume : {true, false}) {
      Run r(999);
      nn::TrainerOptions o = base_options(20, tmp.str());
      o.resume = resume;
      CHECK_THROWS_WITH_AS(r.trainer(o)->fit(), doctest::Contains("metrics.jsonl"), Error);
      CHECK(slurp(tmp.dir / "metrics.jsonl") == metrics);
      CHECK(slurp(tmp.dir / "best_model.safetensors") == best);
    }
  }
}

TEST_CASE("Trainer: a changed hyperparameter on resume is refused, naming it; steps may change") {
  TempDir tmp("resume_config");
  {
    Run r(1);
    nn::TrainerOptions o = base_options(4, tmp.str());
    o.config_json = R"({"lr": 0.03, "batch": 8, "steps": 4})";
    r.trainer(o)->fit();
  }
  const std::string state =
      slurp(tmp.dir / "checkpoint" / "step-00000004" / "train_state.safetensors");
  {
    Run r(999);
    const std::vector<double> before = r.params();
    nn::TrainerOptions o = resume_options(8, tmp.str());
    o.config_json = R"({"lr": 0.001, "batch": 8, "steps": 8})";
    CHECK_THROWS_WITH_AS(r.trainer(o)->fit(), doctest::Contains("lr: 0.03 -> 0.001"), Error);
    CHECK(r.params() == before);  // nothing was loaded
  }
  CHECK(slurp(tmp.dir / "checkpoint" / "step-00000004" / "train_state.safetensors") == state);
  {
    Run r(999);
    nn::TrainerOptions o = resume_options(8, tmp.str());
    o.config_json = R"({"lr": 0.03, "batch": 8, "steps": 8})";
    nn::TrainResult res = r.trainer(o)->fit();
    CHECK(res.start_step == 4);
    CHECK(res.step == 8);
  }
}

TEST_CASE("Trainer: early stopping state (patience counter, best) survives a resume") {
  // evaluations at steps 2, 4, 6, 8, ...: best at 4, worse at 6 and 8 -> stop at 8 (patience 2)
  const std::vector<double> script = {1.0, 0.8, 0.9, 0.85, 0.7, 0.6, 0.5, 0.4};
  TempDir tmp("early_resume");
  auto run = [&](int64_t steps, bool resume, size_t first_eval) {
    Run r(1);
    size_t calls = first_eval;
    nn::TrainerOptions o;
    o.max_steps = steps;
    o.eval_every = 2;
    o.early_stopping_patience = 2;
    o.run_dir = tmp.str();
    o.resume = resume;
    o.progress = false;
    nn::Trainer t(o, *r.model, *r.opt, nullptr, r.loss_fn(),
                  [&] { return std::map<std::string, double>{{"loss", script.at(calls++)}}; });
    t.register_generator("batches", r.batches);
    return t.fit();
  };
  nn::TrainResult first = run(6, false, 0);  // evaluations 1.0, 0.8, 0.9: one bad so far
  CHECK(first.reason == nn::StopReason::max_steps);
  nn::TrainResult second = run(100, true, 3);  // continues with 0.85: the second bad one
  CHECK(second.start_step == 6);
  CHECK(second.reason == nn::StopReason::early_stopping);
  CHECK(second.step == 8);
  CHECK(second.best_step == 4);
  CHECK(second.best_metric == 0.8);
}

TEST_CASE("Trainer: time budget, request_stop reasons and exit statuses") {
  TempDir tmp("budget");
  Run r(1);
  nn::TrainerOptions o = base_options(20, tmp.str());
  o.time_budget = 1e-9;  // below one step: exactly one step runs
  nn::TrainResult res = r.trainer(o)->fit();
  CHECK(res.reason == nn::StopReason::time_budget);
  CHECK(res.step == 1);
  CHECK(fs::exists(tmp.dir / "checkpoint" / "step-00000001" / "model.safetensors"));
  CHECK(nn::exit_status(res.reason) == 0);
  CHECK(nn::exit_status(nn::StopReason::interrupted) == 130);

  Run r2(1);
  nn::Trainer* self = nullptr;
  r2.hook = [&](int64_t step, int) {
    if (step == 2) self->request_stop(nn::StopReason::target);
  };
  auto t = r2.trainer(base_options(20));
  self = t.get();
  nn::TrainResult res2 = t->fit();
  CHECK(res2.reason == nn::StopReason::target);
  CHECK(res2.step == 3);
  CHECK(std::string(nn::stop_reason_name(res2.reason)) == "target");
}

TEST_CASE("Trainer: Ctrl-C during an evaluation skips it, saves the step and stops") {
  TempDir tmp("eval_interrupt");
  Run r(1);
  nn::TrainerOptions o = base_options(20, tmp.str());
  o.eval_every = 3;
  o.progress = false;
  int evals = 0;
  nn::Trainer t(o, *r.model, *r.opt, r.sched.get(), r.loss_fn(), [&] {
    ++evals;
    nn::set_interrupt_for_testing(SIGINT);  // as if Ctrl-C came in the middle of it
    nn::check_interrupt("evaluation");
    return std::map<std::string, double>{{"loss", 1.0}};
  });
  t.register_generator("batches", r.batches);
  nn::TrainResult res;
  {
    nn::InterruptHandler outer;  // the command's handler: the trainer uses it
    res = t.fit();
    CHECK(nn::interrupt_requested());  // still pending for the command to see
    CHECK_THROWS_AS(nn::check_interrupt("decoding"), nn::Interrupted);
  }
  nn::set_interrupt_for_testing(0);
  CHECK(evals == 1);
  CHECK(res.reason == nn::StopReason::interrupted);
  CHECK(res.step == 3);
  auto ptr = nlohmann::json::parse(std::ifstream(tmp.dir / "checkpoint.json"));
  CHECK(ptr["step"] == 3);
  CHECK(r.model->is_training());
}

TEST_CASE("InterruptHandler: the first signal is a request, the second quits at once") {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the child: survives one SIGINT, dies of the second
    nn::InterruptHandler h;
    ::raise(SIGINT);
    if (!nn::interrupt_requested()) ::_exit(3);
    ::raise(SIGINT);
    ::_exit(4);  // not reached when the second signal kills
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGINT);
}

TEST_CASE("Trainer: a loss that grows far beyond its start is flagged in metrics.jsonl") {
  TempDir tmp("diverge");
  Run r(1);
  nn::TrainerOptions o;
  o.max_steps = 30;
  o.run_dir = tmp.str();
  o.progress = false;
  // a loss that doubles every step: the smoothed loss passes 10x its start after a few steps
  nn::Trainer t(o, *r.model, *r.opt, nullptr, [&](int64_t step, int) -> nn::MicroBatchLoss {
    return sum(r.model->forward(r.x)) * 0.0 + std::pow(2.0, double(step));
  });
  t.fit();
  int64_t first_flag = 0;
  for (const auto& j : read_jsonl(tmp.dir / "metrics.jsonl"))
    if (j.contains("diverging") && first_flag == 0) first_flag = j["step"].get<int64_t>();
  CHECK(first_flag > 1);
  CHECK(first_flag < 30);
}
