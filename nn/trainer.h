// graft::nn::Trainer — a reusable training loop: gradient accumulation, clipping, optimizer and
// scheduler steps, metrics, periodic evaluation with early stopping, progress output, atomic
// checkpoints, Ctrl-C handling and bit-identical resume.
//
//   Generator batches(7);
//   nn::Trainer trainer(
//       {.max_steps = 2000, .eval_every = 100, .checkpoint_every = 500, .run_dir = "runs/mlp"},
//       model, opt, &sched,
//       [&](int64_t step, int micro) -> nn::MicroBatchLoss {
//         data::Batch b = data::sample_batch(x, y, 64, batches);
//         return {ce(model(b.x), b.y), 64};            // the loss and its number of samples
//       },
//       [&] { return std::map<std::string, double>{{"loss", ...}, {"accuracy", ...}}; });
//   trainer.register_generator("batches", batches);    // saved and restored with checkpoints
//   nn::TrainResult r = trainer.fit();
//
// One step (step = the number of optimizer steps done so far, 0-based inside loss_fn):
//   zero grads; for micro = 0..k-1: (loss_fn(step, micro).loss / k).backward();
//   clip_grad_norm_ (if clip_grad_norm > 0); optimizer.step(); scheduler->step();
//   ++step; log {"step", "loss" (mean over the micro-batches), "lr" (used by the step), ...};
//   every eval_every steps: eval_fn() under NoGradGuard with model.eval(), logged with "eval_"
//   prefixed keys, early-stopping bookkeeping; every checkpoint_every steps: save.
// fit() also saves a checkpoint when it stops: at max_steps, on early stopping, and on Ctrl-C
// (SIGINT) or SIGTERM, which finish the current step first. A second Ctrl-C quits at once.
//
// Run directory (every file is written atomically: temporary file, fsync, rename):
//   run_dir/metrics.jsonl           one JSON object per line (see below)
//   run_dir/config.json             options.config_json, when given
//   run_dir/best_model.safetensors  the model at the best evaluation (with early_stopping_metric)
//   run_dir/checkpoint/step-00000500/model.safetensors        the model's state_dict
//   run_dir/checkpoint/step-00000500/train_state.safetensors  optimizer ("optimizer.*"),
//       scheduler ("scheduler.*"), trainer ("trainer.*": step, early-stopping state, elapsed
//       time, smoothed loss) and RNG state ("rng.default", "rng.<name>": int64 [seed, offset]),
//       with metadata: graft_version, step, checkpoint_id, optimizer, scheduler, config
//   run_dir/checkpoint.json         the pointer: {"step", "dir", "checkpoint_id", ...}
//
// Crash consistency: a checkpoint goes into a new directory of its own (model first, then the
// train state, then the directory is fsynced); only then is checkpoint.json replaced (atomically)
// to point at it, and only after that are older step directories removed. A crash at any
// moment therefore leaves checkpoint.json naming a complete pair of files; an unfinished
// directory is ignored and overwritten later. On load, both files must carry the pointer's
// checkpoint_id, so a mixed pair is never used.
//
// Resume (options.resume): loads the checkpoint that checkpoint.json names into the model,
// optimizer, scheduler, trainer, default_generator() and every registered generator, then drops
// the lines of metrics.jsonl past the checkpoint's step. With the same configuration and thread
// count, the losses that follow are bit-identical to those of an uninterrupted run. Without a
// checkpoint, resume starts from step 0. Without resume, a run_dir that already holds a
// checkpoint is an error unless options.overwrite (which starts the run over).
//
// metrics.jsonl lines:
//   {"step": 12, "loss": 0.41, "lr": 0.01, "elapsed": 1.93, "throughput": 5120.0,
//    "grad_norm": 0.7}                       (grad_norm with clip_grad_norm > 0)
//   {"step": 100, "elapsed": 9.1, "eval_loss": 0.12, "eval_accuracy": 0.97}
// throughput counts options.items_name (what loss_fn's items count) per second, or steps per
// second when loss_fn reports no items; elapsed is wall time in seconds, summed over resumes.
//
// Data parallel: under `mpirun -np N` (nn/distributed.h) every rank runs fit() with the same
// options; loss_fn computes the loss of this rank's share of each micro-batch (dist::shard).
// Parameters are broadcast from rank 0 when fit() starts, gradients are averaged across ranks
// before clipping and the optimizer step, the logged loss is the mean over ranks, and stop
// decisions (Ctrl-C, time budget, early stopping, request_stop) are agreed by all ranks after
// each step. Every rank evaluates (the same data, so the same result); rank 0 alone writes the
// run directory and prints progress; every rank reads the checkpoint it resumes from (for
// several machines, put the run directory on a shared file system). Dropout draws from a
// per-rank stream: rank r > 0 uses the default generator's seed mixed with r.
//
// Progress goes to stderr: a single line redrawn in place on a terminal (step/total, smoothed
// loss, throughput, lr, ETA), otherwise one plain line every log_every steps.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "ops/random.h"

namespace graft::dist {
class GradReducer;
}

namespace graft::nn {

// What loss_fn returns for one micro-batch: a one-element floating loss (the mean over the
// micro-batch) and, for throughput, the number of samples or tokens in it (0: not counted).
// Converts implicitly from a Tensor, so loss_fn may simply return the loss.
struct MicroBatchLoss {
  Tensor loss;
  int64_t items = 0;
  MicroBatchLoss(Tensor l, int64_t n = 0) : loss(std::move(l)), items(n) {}  // NOLINT: implicit
};

// loss_fn(step, micro): the loss of micro-batch `micro` (0..grad_accumulation-1) of the step
// that follows `step` completed steps.
using LossFn = std::function<MicroBatchLoss(int64_t step, int micro)>;
// eval_fn(): named metrics, e.g. {{"loss", 0.12}, {"accuracy", 0.97}} (logged as eval_loss, ...).
using EvalFn = std::function<std::map<std::string, double>()>;

struct TrainerOptions {
  int64_t max_steps = 1000;       // fit() runs until `step` reaches this
  int64_t eval_every = 0;         // 0: never (needs eval_fn otherwise)
  int64_t checkpoint_every = 0;   // 0: only when fit() stops (needs run_dir)
  std::string run_dir;            // "" = no files (no metrics log, no checkpoints)
  bool resume = false;            // continue from run_dir's checkpoint, if there is one
  bool overwrite = false;         // without resume: start over in a run_dir with a checkpoint
  int64_t early_stopping_patience = 0;  // stop after this many evaluations without improvement; 0 = off
  std::string early_stopping_metric = "loss";  // a key of eval_fn's result
  std::string early_stopping_mode = "min";     // "min" (e.g. a loss) or "max" (e.g. accuracy)
  double early_stopping_min_delta = 0.0;       // the least change that counts as improvement
  double clip_grad_norm = 0.0;    // max total L2 norm of the gradients; 0 = off
  int64_t grad_accumulation = 1;  // micro-batches per optimizer step
  std::string config_json;        // the run's configuration, saved in run_dir and checkpoints
  std::string items_name = "samples";  // what MicroBatchLoss::items counts ("tokens", ...)
  bool progress = true;           // progress and messages on stderr
  int64_t log_every = 0;          // plain progress lines when stderr is not a TTY; 0 = about 20 per run
  bool handle_signals = true;     // SIGINT/SIGTERM during fit(): finish the step, save, return
  int64_t keep_checkpoints = 1;   // step directories kept (the newest ones)
  // Wall-clock seconds of training in this fit() call (0 = no limit): fit() stops after the
  // step that reaches it and saves a checkpoint (StopReason::time_budget). A resumed run gets
  // a fresh budget.
  double time_budget = 0.0;
  // Keys of config_json that may differ between a checkpoint and the run that resumes it (how
  // long to train, how often to log/evaluate/save, where to run). A difference in any other key
  // (lr, batch, model size, ...) makes resume refuse with graft::Error naming the keys, before
  // anything is loaded: a changed hyperparameter is never printed and silently ignored.
  std::vector<std::string> resume_may_change = {
      "steps", "time-budget", "eval-every", "checkpoint-every", "keep-checkpoints", "log-every",
      "threads", "device", "patience", "progress", "dp-bucket-mb", "dp-no-overlap"};
  // Warn (progress line and a "diverging" key in metrics.jsonl) when the smoothed loss grows
  // beyond this many times its value after the first steps (0 = never).
  double divergence_factor = 10.0;
  // Data parallel (under mpirun, nn/distributed.h): gradients are averaged across ranks in
  // buckets of this many bytes, started during backward() (overlap) or after it.
  bool data_parallel = true;  // false: under mpirun each rank trains on its own
  size_t dp_bucket_bytes = size_t(4) << 20;
  bool dp_overlap = true;
};

// Why fit() returned. max_steps, early_stopping, time_budget and target count as a finished run
// (exit status 0 in the CLI); interrupted (Ctrl-C, SIGTERM, request_stop()) as 130.
enum class StopReason { max_steps, early_stopping, interrupted, time_budget, target };
const char* stop_reason_name(StopReason r);
// The exit status a command reports for a run that stopped this way: 130 when interrupted,
// else 0.
inline int exit_status(StopReason r) { return r == StopReason::interrupted ? 130 : 0; }

struct TrainResult {
  StopReason reason = StopReason::max_steps;
  int64_t start_step = 0;  // the step fit() started from (the checkpoint's when resuming)
  int64_t step = 0;        // the steps completed when fit() returned
  double last_loss = 0;    // the loss of the last step (NaN if fit() ran none)
  std::map<std::string, double> last_eval;  // the last evaluation's metrics (no prefix)
  double best_metric = 0;  // early_stopping_metric's best value (NaN before any evaluation)
  int64_t best_step = -1;
  std::string checkpoint;  // the directory of the last checkpoint saved ("" if none)
};

class Trainer {
 public:
  // The model, optimizer and scheduler (nullable) must outlive the trainer. graft::Error for
  // invalid options (non-positive max_steps or grad_accumulation, eval_every without eval_fn,
  // early stopping without evaluation, an unknown early_stopping_mode, ...).
  Trainer(TrainerOptions options, Module& model, optim::Optimizer& optimizer,
          optim::LRScheduler* scheduler, LossFn loss_fn, EvalFn eval_fn = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // A generator that loss_fn (or eval_fn) draws from: its {seed, offset} is saved in every
  // checkpoint as "rng.<name>" and restored on resume. default_generator() is always saved.
  void register_generator(const std::string& name, Generator& gen);

  // Trains until max_steps, early stopping, or a stop request; resumes first if
  // options.resume. graft::Error on a non-finite loss (nothing is updated by that step), on a
  // bad checkpoint, or when an I/O operation fails.
  TrainResult fit();

  // Asks a running fit() to stop after the current step (and save a checkpoint), returning
  // `why` as its reason (e.g. StopReason::target when a metric reached its goal). Safe from any
  // thread and from loss_fn or eval_fn; fit() clears earlier requests when it starts.
  void request_stop(StopReason why = StopReason::interrupted) {
    stop_why_.store(int(why));
    stop_requested_.store(true);
  }

  // Saves a checkpoint of the current state in options.run_dir (see the scheme above); returns
  // its directory. Saving twice at the same step writes once.
  std::string save_checkpoint();
  // Loads the checkpoint that run_dir/checkpoint.json names; false if there is none.
  // Validates both files before changing anything; if applying them fails part-way, the model
  // is put back as it was and graft::Error is thrown.
  bool load_checkpoint();

  int64_t step() const { return step_; }
  const TrainerOptions& options() const { return opt_; }
  // The loss of every step fit() ran in this process, in order (step start_step+1, ...).
  const std::vector<double>& losses() const { return losses_; }

 private:
  struct Progress;
  struct LoadedCheckpoint;
  void validate_options() const;
  void prepare_run_dir();
  bool locate_checkpoint(LoadedCheckpoint& out);
  void check_resume_config(const std::string& saved_config, const std::string& where);
  void check_finite_weights(const char* what) const;
  void save_best_model(double value);
  void update_divergence(double smoothed);
  void start_data_parallel();
  // Data parallel across ranks; then rank 0 alone writes files and prints.
  bool dp() const;
  bool writer() const;
  void train_step(double& loss, int64_t& items, double& grad_norm, double& lr);
  bool evaluate_and_check(std::map<std::string, double>& last_eval);
  void run_loop(TrainResult& result, int64_t log_every);
  void log_json(const std::string& line);
  void truncate_metrics(int64_t last_step);
  NamedTensors train_state() const;
  std::map<std::string, std::string> checkpoint_metadata(const std::string& id) const;
  void message(const std::string& text);
  double elapsed() const;

  TrainerOptions opt_;
  Module& model_;
  optim::Optimizer& optimizer_;
  optim::LRScheduler* scheduler_;
  LossFn loss_fn_;
  EvalFn eval_fn_;
  std::vector<std::pair<std::string, Generator*>> generators_;

  int64_t step_ = 0;
  double best_metric_;
  int64_t best_step_ = -1;
  int64_t bad_evals_ = 0;
  double elapsed_before_ = 0;  // seconds of earlier sessions (restored from checkpoints)
  double session_start_ = 0;   // monotonic seconds when this session's clock started
  double loss_ema_ = 0;        // smoothed loss for progress (bias-corrected by ema_steps_)
  int64_t ema_steps_ = 0;
  double loss_start_;          // the run's first smoothed loss, the divergence baseline
  bool diverging_ = false;
  int64_t last_saved_step_ = -1;
  std::string last_checkpoint_;
  std::vector<double> losses_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<int> stop_why_{int(StopReason::interrupted)};
  std::FILE* metrics_ = nullptr;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<dist::GradReducer> reducer_;  // with more than one rank
};

}  // namespace graft::nn
