// The training loop, its checkpoints and its progress output. See nn/trainer.h for the step,
// the run directory layout and the crash-consistency scheme.
#include "nn/trainer.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "graft_config.h"
#include "nn/clip.h"
#include "nn/distributed.h"
#include "nn/interrupt.h"
#include "nn/run_files.h"
#include "ops/error.h"

namespace graft::nn {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr const char* kMetricsFile = "metrics.jsonl";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double now_seconds() { return monotonic_seconds(); }

// ---------------------------------------------------------------- formatting
std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int64_t t = int64_t(std::llround(s));
  if (t >= 3600) return fmt::format("{}:{:02d}:{:02d}", t / 3600, (t / 60) % 60, t % 60);
  return fmt::format("{}:{:02d}", t / 60, t % 60);
}

std::string format_rate(double r) {
  if (!std::isfinite(r) || r <= 0) return "?";
  if (r >= 1e6) return fmt::format("{:.1f}M", r / 1e6);
  if (r >= 1e4) return fmt::format("{:.0f}k", r / 1e3);
  if (r >= 1e3) return fmt::format("{:.1f}k", r / 1e3);
  if (r >= 10) return fmt::format("{:.0f}", r);
  return fmt::format("{:.2f}", r);
}

int terminal_width() {
  struct winsize ws {};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
  return 80;
}

// A JSON value for a double: null for NaN and infinities (JSON has no such numbers).
ojson num(double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); }

}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::max_steps: return "max_steps";
    case StopReason::early_stopping: return "early_stopping";
    case StopReason::interrupted: return "interrupted";
    case StopReason::time_budget: return "time_budget";
    case StopReason::target: return "target";
  }
  return "?";
}

// ---------------------------------------------------------------- progress
struct Trainer::Progress {
  bool enabled = false;
  bool tty = false;
  int width = 80;
  double start = 0;          // when this fit() began
  int64_t first_step = 0;    // the step it began at
  double last_draw = -1e300;  // when the bar was last drawn
  double window_start = 0;   // throughput window
  int64_t window_items = 0;
  double rate = kNaN;        // items (or steps) per second, last window
  bool line_open = false;    // a bar is on screen without its newline

  void clear() {
    if (line_open) {
      std::fputs("\r\x1b[K", stderr);
      line_open = false;
    }
  }
};

void Trainer::message(const std::string& text) {
  if (!opt_.progress || !writer()) return;
  if (progress_) progress_->clear();
  std::fputs(text.c_str(), stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

// ---------------------------------------------------------------- construction
Trainer::Trainer(TrainerOptions options, Module& model, optim::Optimizer& optimizer,
                 optim::LRScheduler* scheduler, LossFn loss_fn, EvalFn eval_fn)
    : opt_(std::move(options)),
      model_(model),
      optimizer_(optimizer),
      scheduler_(scheduler),
      loss_fn_(std::move(loss_fn)),
      eval_fn_(std::move(eval_fn)),
      best_metric_(kNaN),
      session_start_(now_seconds()),
      loss_start_(kNaN) {
  validate_options();
}

Trainer::~Trainer() {
  if (metrics_) std::fclose(metrics_);
}

void Trainer::validate_options() const {
  const TrainerOptions& o = opt_;
  GRAFT_CHECK(bool(loss_fn_), "Trainer: loss_fn is empty");
  GRAFT_CHECK(o.max_steps >= 1, "Trainer: max_steps must be >= 1, got {}", o.max_steps);
  GRAFT_CHECK(o.grad_accumulation >= 1 && o.grad_accumulation <= 1'000'000,
              "Trainer: grad_accumulation must be in [1, 1000000], got {}", o.grad_accumulation);
  GRAFT_CHECK(o.eval_every >= 0, "Trainer: eval_every must be >= 0 (0 = never), got {}",
              o.eval_every);
  GRAFT_CHECK(o.eval_every == 0 || eval_fn_,
              "Trainer: eval_every = {} needs an eval_fn; hint: pass one, or set eval_every = 0",
              o.eval_every);
  GRAFT_CHECK(o.checkpoint_every >= 0, "Trainer: checkpoint_every must be >= 0, got {}",
              o.checkpoint_every);
  GRAFT_CHECK(o.checkpoint_every == 0 || !o.run_dir.empty(),
              "Trainer: checkpoint_every = {} needs a run_dir to write checkpoints to",
              o.checkpoint_every);
  GRAFT_CHECK(!o.resume || !o.run_dir.empty(), "Trainer: resume needs a run_dir");
  GRAFT_CHECK(o.early_stopping_patience >= 0, "Trainer: early_stopping_patience must be >= 0, got {}",
              o.early_stopping_patience);
  GRAFT_CHECK(o.early_stopping_patience == 0 || o.eval_every > 0,
              "Trainer: early stopping (patience {}) needs evaluations; hint: set eval_every > 0 "
              "and pass an eval_fn",
              o.early_stopping_patience);
  GRAFT_CHECK(o.early_stopping_mode == "min" || o.early_stopping_mode == "max",
              "Trainer: early_stopping_mode must be \"min\" or \"max\", got \"{}\"",
              o.early_stopping_mode);
  GRAFT_CHECK(std::isfinite(o.early_stopping_min_delta) && o.early_stopping_min_delta >= 0,
              "Trainer: early_stopping_min_delta must be a finite number >= 0, got {}",
              o.early_stopping_min_delta);
  GRAFT_CHECK(std::isfinite(o.clip_grad_norm) && o.clip_grad_norm >= 0,
              "Trainer: clip_grad_norm must be a finite number >= 0 (0 = off), got {}",
              o.clip_grad_norm);
  GRAFT_CHECK(o.log_every >= 0, "Trainer: log_every must be >= 0, got {}", o.log_every);
  GRAFT_CHECK(o.keep_checkpoints >= 1, "Trainer: keep_checkpoints must be >= 1, got {}",
              o.keep_checkpoints);
  GRAFT_CHECK(std::isfinite(o.time_budget) && o.time_budget >= 0,
              "Trainer: time_budget must be a finite number of seconds >= 0 (0 = none), got {}",
              o.time_budget);
  GRAFT_CHECK(std::isfinite(o.divergence_factor) && (o.divergence_factor == 0 || o.divergence_factor > 1),
              "Trainer: divergence_factor must be 0 (off) or a finite number > 1, got {}",
              o.divergence_factor);
  if (!o.config_json.empty()) {
    try {
      const auto parsed = nlohmann::json::parse(o.config_json);
      (void)parsed;
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("Trainer: config_json is not valid JSON: {}", e.what()));
    }
  }
}

void Trainer::register_generator(const std::string& name, Generator& gen) {
  GRAFT_CHECK(!name.empty() && name.size() <= 64 &&
                  name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-") == std::string::npos,
              "Trainer.register_generator: invalid name '{}' (use 1-64 letters, digits, '_', '-')",
              name);
  GRAFT_CHECK(name != "default",
              "Trainer.register_generator: 'default' is default_generator(), always saved");
  for (auto& [n, g] : generators_)
    GRAFT_CHECK(n != name, "Trainer.register_generator: '{}' is already registered", name);
  generators_.emplace_back(name, &gen);
}

double Trainer::elapsed() const { return elapsed_before_ + (now_seconds() - session_start_); }

void Trainer::log_json(const std::string& line) {
  if (!metrics_) return;
  std::string s = line + "\n";
  if (std::fwrite(s.data(), 1, s.size(), metrics_) != s.size() || std::fflush(metrics_) != 0)
    throw Error(fmt::format("Trainer: cannot write to {}/{}: {}", opt_.run_dir, kMetricsFile,
                            std::strerror(errno)));
}

// ---------------------------------------------------------------- one step
void Trainer::train_step(double& loss, int64_t& items, double& grad_norm, double& lr) {
  const int64_t k = opt_.grad_accumulation;
  model_.zero_grad();
  optimizer_.zero_grad();
  loss = 0;
  items = 0;
  for (int micro = 0; micro < int(k); ++micro) {
    if (reducer_ && micro == int(k) - 1) reducer_->arm();  // gradients final after this one
    MicroBatchLoss mb = loss_fn_(step_, micro);
    GRAFT_CHECK(mb.loss.defined() && mb.loss.numel() == 1 && is_floating(mb.loss.dtype()),
                "Trainer: loss_fn must return a one-element floating tensor, got {}",
                mb.loss.defined() ? fmt::format("{} {}", mb.loss.dtype(), mb.loss.shape().str())
                                  : std::string("an undefined tensor"));
    GRAFT_CHECK(mb.items >= 0, "Trainer: loss_fn reported {} items", mb.items);
    const double v = mb.loss.item<double>();
    if (!std::isfinite(v)) {
      model_.zero_grad();
      optimizer_.zero_grad();
      throw Error(fmt::format(
          "Trainer: the loss is {} at step {} (micro-batch {}); nothing was updated; hint: lower "
          "the learning rate or clip gradients (clip_grad_norm), then resume from the last "
          "checkpoint",
          v, step_ + 1, micro));
    }
    GRAFT_CHECK(mb.loss.requires_grad(),
                "Trainer: the loss does not require grad (no parameter took part, or it was "
                "computed under NoGradGuard)");
    // the mean over micro-batches: each loss / k (exactly the loss itself when k = 1)
    (k == 1 ? mb.loss : mb.loss / double(k)).backward();
    loss += v;
    items += mb.items;
  }
  loss /= double(k);
  if (reducer_) {  // average the gradients, the loss and the items over the ranks
    reducer_->finish();
    loss = dist::all_reduce_sum(loss) / double(dist::world_size());
    items = int64_t(std::llround(dist::all_reduce_sum(double(items))));
  }
  grad_norm = opt_.clip_grad_norm > 0 ? clip_grad_norm_(model_.parameters(), opt_.clip_grad_norm)
                                      : kNaN;
  if (opt_.clip_grad_norm > 0 && !std::isfinite(grad_norm)) {
    model_.zero_grad();
    optimizer_.zero_grad();
    throw Error(fmt::format(
        "Trainer: the gradient norm is {} at step {}; nothing was updated; hint: lower the "
        "learning rate, then resume from the last checkpoint",
        grad_norm, step_ + 1));
  }
  lr = optimizer_.param_groups().empty() ? kNaN : optimizer_.param_groups()[0].lr;
  optimizer_.step();
  if (scheduler_) scheduler_->step();
}

// Runs eval_fn, logs it and updates the early-stopping state; true when training should stop.
bool Trainer::evaluate_and_check(std::map<std::string, double>& last_eval) {
  const bool was_training = model_.is_training();
  model_.eval();
  std::map<std::string, double> res;
  try {
    NoGradGuard no_grad;
    res = eval_fn_();
  } catch (...) {
    model_.train(was_training);
    throw;
  }
  model_.train(was_training);
  last_eval = res;

  ojson j;
  j["step"] = step_;
  j["elapsed"] = elapsed();
  for (auto& [k, v] : res) j["eval_" + k] = num(v);
  log_json(j.dump());

  std::string text = fmt::format("step {}: eval", step_);
  for (auto& [k, v] : res) text += fmt::format(" {} {:.6g}", k, v);

  bool stop = false;
  auto it = res.find(opt_.early_stopping_metric);
  if (it == res.end()) {
    std::vector<std::string> keys;
    for (auto& kv : res) keys.push_back(kv.first);
    GRAFT_CHECK(opt_.early_stopping_patience == 0,
                "Trainer: early_stopping_metric '{}' is not among eval_fn's metrics [{}]",
                opt_.early_stopping_metric, fmt::join(keys, ", "));
  } else {
    const double v = it->second;
    const bool maximize = opt_.early_stopping_mode == "max";
    const double d = opt_.early_stopping_min_delta;
    const bool improved =
        std::isfinite(v) && (std::isnan(best_metric_) ||
                             (maximize ? v > best_metric_ + d : v < best_metric_ - d));
    if (improved) {
      best_metric_ = v;
      best_step_ = step_;
      bad_evals_ = 0;
      text += " (best)";
      if (!opt_.run_dir.empty()) save_best_model(v);
    } else {
      ++bad_evals_;
      if (opt_.early_stopping_patience > 0 && bad_evals_ >= opt_.early_stopping_patience) {
        stop = true;
        text += fmt::format("; early stopping: no improvement of {} in {} evaluations (best {:.6g} "
                            "at step {})",
                            opt_.early_stopping_metric, bad_evals_, best_metric_, best_step_);
      }
    }
  }
  message(text);
  return stop;
}

bool Trainer::dp() const { return opt_.data_parallel && dist::world_size() > 1; }
bool Trainer::writer() const { return !dp() || dist::is_main(); }

// Data parallel: every rank starts from rank 0's weights, with its own dropout stream, and
// averages its gradients through a bucketed reducer.
void Trainer::start_data_parallel() {
  NoGradGuard no_grad;
  for (Tensor& p : model_.parameters()) {
    Tensor d = p.detach();
    dist::broadcast(d, 0);
  }
  if (dist::rank() > 0) {  // a stream of its own, derived from the seed (offsets stay in step)
    Generator& g = default_generator();
    g.seed = g.seed ^ (0x9E3779B97F4A7C15ull * uint64_t(dist::rank()));
  }
  reducer_ = std::make_unique<dist::GradReducer>(model_.parameters(), opt_.dp_bucket_bytes,
                                                 opt_.dp_overlap);
  message(fmt::format("data parallel: {} ranks, gradients in {} bucket(s) of <= {} KiB, {}",
                      dist::world_size(), reducer_->num_buckets(), opt_.dp_bucket_bytes >> 10,
                      opt_.dp_overlap ? "overlapped with backward" : "after backward"));
}

// The divergence warning: the smoothed loss far above the run's first one (saved with
// checkpoints, so a resumed run compares with the same baseline).
void Trainer::update_divergence(double smoothed) {
  if (std::isnan(loss_start_) && std::isfinite(smoothed)) loss_start_ = smoothed;
  const bool now = opt_.divergence_factor > 0 && loss_start_ > 0 &&
                   smoothed > opt_.divergence_factor * loss_start_;
  if (now && !diverging_)
    message(fmt::format("warning: the loss is diverging at step {}: smoothed {:.4g}, more than "
                        "{:g}x its start {:.4g}; hint: lower the learning rate, or clip "
                        "gradients (--clip-grad-norm)",
                        step_, smoothed, opt_.divergence_factor, loss_start_));
  diverging_ = now;
}

// ---------------------------------------------------------------- the loop
// Runs steps until max_steps or a stop; fills result.reason, last_loss and last_eval.
void Trainer::run_loop(TrainResult& result, int64_t log_every) {
  Progress& pr = *progress_;
  while (step_ < opt_.max_steps) {
    const double t0 = now_seconds();
    double loss = 0, grad_norm = kNaN, lr = kNaN;
    int64_t items = 0;
    train_step(loss, items, grad_norm, lr);
    ++step_;
    const double t1 = now_seconds();
    losses_.push_back(loss);
    result.last_loss = loss;
    ++ema_steps_;
    loss_ema_ = 0.98 * loss_ema_ + 0.02 * loss;
    const double smoothed = loss_ema_ / (1 - std::pow(0.98, double(std::min<int64_t>(ema_steps_, 100000))));
    update_divergence(smoothed);

    const double dt = std::max(t1 - t0, 1e-9);
    const double counted = items > 0 ? double(items) : 1.0;
    ojson j;
    j["step"] = step_;
    j["loss"] = num(loss);
    j["lr"] = num(lr);
    j["elapsed"] = elapsed();
    j["throughput"] = counted / dt;
    if (items > 0) j["items"] = items;  // e.g. target tokens of this step
    if (!std::isnan(grad_norm)) j["grad_norm"] = num(grad_norm);
    if (diverging_) j["diverging"] = true;
    log_json(j.dump());

    // ---- progress
    pr.window_items += int64_t(counted);
    const bool last = step_ == opt_.max_steps;
    if (pr.enabled) {
      const std::string unit = items > 0 ? opt_.items_name : "steps";
      const double session = t1 - pr.start;
      const double per_step = session / double(step_ - pr.first_step);
      const double eta = per_step * double(opt_.max_steps - step_);
      if (pr.tty) {
        if (t1 - pr.last_draw >= 0.1 || last) {
          if (t1 > pr.window_start) pr.rate = double(pr.window_items) / (t1 - pr.window_start);
          pr.window_start = t1;
          pr.window_items = 0;
          pr.last_draw = t1;
          std::string line = fmt::format("{}/{}  loss {:.4f}{}  {} {}/s  lr {:.3g}  ETA {}", step_,
                                         opt_.max_steps, smoothed, diverging_ ? " DIVERGING" : "",
                                         format_rate(pr.rate), unit, lr, format_duration(eta));
          // a bar in the room left on the line (none on a narrow terminal)
          const int bar = std::min(30, pr.width - 1 - int(line.size()) - 3);
          if (bar >= 5) {
            const int filled = int(double(bar) * double(step_) / double(opt_.max_steps));
            line = fmt::format("[{}{}] {}", std::string(size_t(filled), '#'),
                               std::string(size_t(bar - filled), '.'), line);
          }
          if (int(line.size()) > pr.width - 1) line.resize(size_t(pr.width - 1));
          std::fprintf(stderr, "\r\x1b[K%s", line.c_str());
          std::fflush(stderr);
          pr.line_open = true;
        }
      } else if (step_ % log_every == 0 || last || step_ == pr.first_step + 1) {
        if (t1 > pr.window_start) pr.rate = double(pr.window_items) / (t1 - pr.window_start);
        pr.window_start = t1;
        pr.window_items = 0;
        std::fprintf(stderr, "step %lld/%lld  loss %.4f%s  %s %s/s  lr %.3g  elapsed %s  ETA %s\n",
                     (long long)step_, (long long)opt_.max_steps, smoothed,
                     diverging_ ? " DIVERGING" : "", format_rate(pr.rate).c_str(), unit.c_str(), lr,
                     format_duration(elapsed()).c_str(), format_duration(eta).c_str());
        std::fflush(stderr);
      }
    }

    // ---- evaluation, stop requests, checkpoints. A Ctrl-C before or during the evaluation
    // skips it (the step itself is complete and is saved).
    bool stop = false;
    if (opt_.eval_every > 0 && step_ % opt_.eval_every == 0 && !interrupt_requested()) {
      try {
        if (evaluate_and_check(result.last_eval)) {
          stop = true;
          result.reason = StopReason::early_stopping;
        }
      } catch (const Interrupted&) {
        message(fmt::format("step {}: evaluation interrupted", step_));
      }
    }
    if (!stop && interrupt_requested()) {
      stop = true;
      result.reason = StopReason::interrupted;
    } else if (!stop && stop_requested_.load()) {
      stop = true;
      result.reason = StopReason(stop_why_.load());
    } else if (!stop && opt_.time_budget > 0 && now_seconds() - pr.start >= opt_.time_budget) {
      stop = true;
      result.reason = StopReason::time_budget;
      message(fmt::format("time budget of {:g} s used up at step {}: stopping", opt_.time_budget,
                          step_));
    }
    if (reducer_) {  // every rank stops at the same step, for one reason
      const int64_t code = dist::all_reduce_max(stop ? int64_t(result.reason) + 1 : 0);
      stop = code > 0;
      if (stop) result.reason = StopReason(code - 1);
    }
    const bool periodic = opt_.checkpoint_every > 0 && step_ % opt_.checkpoint_every == 0;
    if (!opt_.run_dir.empty() && (stop || last || periodic)) save_checkpoint();
    if (stop) break;
  }
}

TrainResult Trainer::fit() {
  TrainResult result;
  stop_requested_.store(false);
  stop_why_.store(int(StopReason::interrupted));
  progress_ = std::make_unique<Progress>();
  Progress& pr = *progress_;
  pr.enabled = opt_.progress && writer();
  pr.tty = pr.enabled && ::isatty(::fileno(stderr));
  pr.width = pr.tty ? terminal_width() : 80;

  if (metrics_) {
    std::fclose(metrics_);
    metrics_ = nullptr;
  }
  if (!opt_.run_dir.empty()) prepare_run_dir();
  struct DropReducer {  // the hooks go when fit() returns or throws
    std::unique_ptr<dist::GradReducer>& r;
    ~DropReducer() { r.reset(); }
  } drop_reducer{reducer_};
  if (dp()) start_data_parallel();

  result.start_step = step_;
  result.step = step_;
  result.last_loss = kNaN;
  if (step_ >= opt_.max_steps) {
    message(fmt::format("nothing to do: already at step {} (max_steps {})", step_, opt_.max_steps));
    result.best_metric = best_metric_;
    result.best_step = best_step_;
    result.checkpoint = last_checkpoint_;
    return result;
  }

  const int64_t log_every =
      opt_.log_every > 0 ? opt_.log_every : std::max<int64_t>(1, opt_.max_steps / 20);
  session_start_ = now_seconds();
  pr.start = session_start_;
  pr.first_step = step_;
  pr.window_start = pr.start;

  // Ctrl-C: the caller's handler if it has one (a CLI command), else ours for this fit().
  std::optional<InterruptHandler> signals;
  if (opt_.handle_signals && !InterruptHandler::active()) signals.emplace();
  try {
    run_loop(result, log_every);
  } catch (...) {
    if (pr.line_open) {  // an error message must not land on the progress line
      std::fputc('\n', stderr);
      pr.line_open = false;
    }
    throw;
  }
  if (pr.line_open) {  // leave the last bar on screen
    std::fputc('\n', stderr);
    pr.line_open = false;
  }

  result.step = step_;
  result.best_metric = best_metric_;
  result.best_step = best_step_;
  result.checkpoint = opt_.run_dir.empty() ? "" : last_checkpoint_;
  if (result.reason == StopReason::interrupted)
    message(fmt::format("stopped at step {}/{}{}", step_, opt_.max_steps,
                        opt_.run_dir.empty()
                            ? std::string(" (no run_dir: nothing saved)")
                            : fmt::format("; checkpoint saved in {}; continue with resume "
                                          "(--resume --run-dir {})",
                                          last_checkpoint_, opt_.run_dir)));
  if (metrics_) {
    std::fclose(metrics_);
    metrics_ = nullptr;
  }
  elapsed_before_ = elapsed();  // the clock stands still between fit() calls
  session_start_ = now_seconds();
  return result;
}

}  // namespace graft::nn
