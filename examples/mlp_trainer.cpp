// An MLP on nn::Trainer (nn/trainer.h): the training loop you do not write yourself. It trains
// the two-spirals classifier (data/spirals.h) with a run directory, stops half-way as if
// Ctrl-C had been pressed, resumes from the checkpoint in a fresh model and optimizer (as a new
// process would), and checks that the resumed losses are bit-identical to those of an
// uninterrupted run. Then it reloads the saved weights into a third model.
//
//   build/examples/mlp_trainer [--steps N] [--quick] [--run-dir DIR]
//
// --quick trains 1000 steps instead of 1500; DIR defaults to out/mlp_trainer and receives
// DIR/full (the uninterrupted run) and DIR/resumed. Each holds metrics.jsonl, config.json,
// best_model.safetensors, checkpoint.json and checkpoint/step-N/ (see nn/trainer.h); plot one
// with `build/tools/graft plot DIR/full`. Exits 1 if the losses differ after resuming or the
// final training accuracy is below 95%.
#include <algorithm>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "data/spirals.h"
#include "graft.h"
#include "nn/trainer.h"
#include "example_main.h"

using namespace graft;

// Everything one training process owns: the model, its optimizer and schedule, and the
// generator that draws the mini-batches.
struct Run {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::CosineWithWarmup> sched;
  Generator batches{7};

  explicit Run(int64_t steps) {
    manual_seed(1);  // parameter init draws from the default generator
    model = std::make_shared<nn::Sequential>(    // [B, 2] -> [B, 2] logits
        std::make_shared<nn::Linear>(2, 64), std::make_shared<nn::Tanh>(),
        std::make_shared<nn::Linear>(64, 64), std::make_shared<nn::Tanh>(),
        std::make_shared<nn::Linear>(64, 2));
    opt = std::make_unique<optim::AdamW>(model->parameters(),
                                         optim::AdamWOptions{.lr = 0.03, .weight_decay = 0});
    sched = std::make_unique<optim::CosineWithWarmup>(*opt, /*warmup=*/0, steps);
  }
};

double accuracy(nn::Module& model, const data::Spirals& d) {
  NoGradGuard no_grad;
  return mean(eq(argmax(model(d.x), 1), d.y).to(DType::f32)).item();
}

// Trains `run` to `steps` in `dir`; stop_at > 0 stops after that many steps, like Ctrl-C.
nn::TrainResult train(Run& run, const data::Spirals& d, const std::string& dir, int64_t steps,
                      bool resume, std::vector<double>& losses, int64_t stop_at = 0) {
  nn::CrossEntropyLoss ce;
  nn::Trainer* self = nullptr;
  nn::TrainerOptions o{.max_steps = steps, .eval_every = steps / 4, .run_dir = dir,
                       .resume = resume, .overwrite = !resume,
                       .config_json = R"({"hidden": 64, "lr": 0.03, "batch": 64})",
                       .log_every = steps / 4};
  nn::Trainer trainer(
      o, *run.model, *run.opt, run.sched.get(),
      [&](int64_t step, int) -> nn::MicroBatchLoss {  // the loss of one mini-batch
        if (stop_at > 0 && step + 1 == stop_at) self->request_stop();  // after this step
        data::Batch b = data::sample_batch(d.x, d.y, 64, run.batches);  // x [64, 2], y [64]
        return {ce(run.model->forward(b.x), b.y), 64};
      },
      [&] {  // evaluation: runs under NoGradGuard in eval mode, logged as eval_*
        Tensor logits = run.model->forward(d.x);
        double acc = mean(eq(argmax(logits, 1), d.y).to(DType::f32)).item();
        return std::map<std::string, double>{{"loss", ce(logits, d.y).item()}, {"accuracy", acc}};
      });
  self = &trainer;
  trainer.register_generator("batches", run.batches);  // saved and restored with checkpoints
  nn::TrainResult r = trainer.fit();
  losses = trainer.losses();  // the loss of every step this fit() ran
  return r;
}

int count_lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

int run(int argc, char** argv) {
  std::string dir = "out/mlp_trainer";
  const int64_t steps = parse_steps(argc, argv, 1500, 1000, "mlp_trainer [--steps N] [--quick] [--run-dir DIR]",
                                    [&](int& i) {
                                      if (std::strcmp(argv[i], "--run-dir") || i + 1 >= argc) return false;
                                      dir = argv[++i];
                                      return true;
                                    });
  GRAFT_CHECK(steps >= 8, "--steps must be at least 8, got {}", steps);
  Generator data_gen(42);
  const data::Spirals d = data::make_spirals(200, 0.02, data_gen);  // x [400, 2], y [400]
  fmt::print("two spirals, {} points; MLP 2 -> 64 -> 64 -> 2; AdamW 0.03, cosine; {} steps\n",
             d.x.size(0), steps);

  fmt::print("\n-- 1. an uninterrupted run in {}/full\n", dir);
  Run full(steps);
  std::vector<double> la, lb1, lb2;
  nn::TrainResult a = train(full, d, dir + "/full", steps, false, la);
  fmt::print("stopped: {} at step {}; last loss {:.4f}; eval accuracy {:.3f}\n",
             nn::stop_reason_name(a.reason), a.step, a.last_loss, a.last_eval["accuracy"]);

  fmt::print("\n-- 2. the same run stopped at step {} (as Ctrl-C would), then resumed\n", steps / 2);
  nn::TrainResult b1;
  {
    Run first(steps);
    b1 = train(first, d, dir + "/resumed", steps, false, lb1, steps / 2);
  }  // the process "ends": model, optimizer and generators are gone
  fmt::print("stopped: {} at step {}; checkpoint {}\n", nn::stop_reason_name(b1.reason), b1.step,
             b1.checkpoint);
  Run second(steps);  // fresh weights, fresh optimizer state, fresh generators
  nn::TrainResult b2 = train(second, d, dir + "/resumed", steps, /*resume=*/true, lb2);
  fmt::print("resumed at step {}, stopped: {} at step {}\n", b2.start_step,
             nn::stop_reason_name(b2.reason), b2.step);

  // The resumed run's losses must be the uninterrupted run's, bit for bit: the checkpoint
  // restored the weights, AdamW's moments, the schedule's step and the batch generator.
  std::vector<double> tail(la.begin() + std::min<size_t>(la.size(), size_t(b2.start_step)), la.end());
  bool same = b2.start_step == steps / 2 && tail == lb2 && lb1.size() == size_t(steps / 2) &&
              std::equal(lb1.begin(), lb1.end(), la.begin());
  fmt::print("losses of steps {}..{}: uninterrupted vs resumed -> {} (last {:.17g} vs {:.17g})\n",
             b2.start_step + 1, b2.step, same ? "bit-identical" : "DIFFERENT", a.last_loss,
             b2.last_loss);

  fmt::print("\n-- 3. the run directory and reloading the weights\n");
  fmt::print("{}/resumed/metrics.jsonl: {} lines (one per step and per evaluation)\n", dir,
             count_lines(dir + "/resumed/metrics.jsonl"));
  Run third(steps);
  nn::load_into(*third.model, b2.checkpoint + "/model.safetensors");  // validates, then copies
  double acc_full = accuracy(*full.model, d), acc_loaded = accuracy(*third.model, d);
  fmt::print("train accuracy: uninterrupted model {:.2f}%, reloaded from {} {:.2f}%\n",
             100 * acc_full, b2.checkpoint, 100 * acc_loaded);

  return verdict(!same ? "resuming changed the losses"
                 : acc_full < 0.95 ? "accuracy below 95%"
                 : acc_loaded != accuracy(*second.model, d) ? "reloaded weights differ"
                                                            : "");
}

int main(int argc, char** argv) {
  return run_example("mlp_trainer", [&] { return run(argc, argv); });
}
