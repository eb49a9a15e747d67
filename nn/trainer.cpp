// The training loop, its checkpoints and its progress output. See nn/trainer.h for the step,
// the run directory layout and the crash-consistency scheme.
#include "nn/trainer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "graft_config.h"
#include "nn/clip.h"
#include "nn/safetensors.h"
#include "ops/error.h"

namespace graft::nn {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr const char* kPointer = "checkpoint.json";
constexpr const char* kCheckpointDir = "checkpoint";
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kStateFile = "train_state.safetensors";
constexpr const char* kMetricsFile = "metrics.jsonl";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------- signals
// The handler only sets this flag (and writes a fixed message): fit() polls it between steps.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal flag must be lock-free");

void on_signal(int sig) {
  if (g_signal.exchange(sig) != 0) {  // the second Ctrl-C: quit now, the default way
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
    raise(sig);
    return;
  }
  static const char msg[] =
      "\ngraft: interrupted; finishing this step and saving a checkpoint (press Ctrl-C again to "
      "quit at once)\n";
  ssize_t r = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)r;
}

// Installs on_signal for SIGINT and SIGTERM for its lifetime, then puts the old handlers back.
class SignalGuard {
 public:
  explicit SignalGuard(bool on) : on_(on) {
    g_signal.store(0);
    if (!on_) return;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalGuard() {
    if (!on_) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  bool on_;
  struct sigaction old_int_ {}, old_term_ {};
};

// ---------------------------------------------------------------- files
[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  throw Error(fmt::format("Trainer: {} {}: {}", what, path, std::strerror(err)));
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  while (::fsync(fd) != 0) {
    if (errno == EINTR) continue;
    if (errno == EINVAL || errno == EROFS || errno == ENOTSUP) break;
    int err = errno;
    ::close(fd);
    io_error("cannot fsync the directory", dir, err);
  }
  ::close(fd);
}

// Writes `text` to `path` atomically: a temporary file, fsync, rename, fsync of the directory.
void write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wbe");
  if (!f) io_error("cannot create", tmp, errno);
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  while (ok && ::fsync(::fileno(f)) != 0)
    if (errno != EINTR) ok = false;
  int err = errno;
  if (std::fclose(f) != 0 && ok) ok = false, err = errno;
  if (!ok) {
    std::remove(tmp.c_str());
    io_error("cannot write", tmp, err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    io_error("cannot rename a temporary file over", path, err);
  }
  fsync_dir(fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) io_error("cannot read", path, errno ? errno : ENOENT);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string step_dir_name(int64_t step) { return fmt::format("step-{:08d}", step); }

// The step of a directory named like step_dir_name(), or -1.
int64_t parse_step_dir(const std::string& name) {
  if (name.size() < 6 || name.size() > 5 + 18 || name.rfind("step-", 0) != 0) return -1;
  int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

std::string new_checkpoint_id(int64_t step) {
  std::random_device rd;
  uint64_t r = (uint64_t(rd()) << 32) ^ uint64_t(rd());
  return fmt::format("{}-{:016x}", step, r);
}

// ---------------------------------------------------------------- small tensors
Tensor i64_tensor(std::vector<int64_t> v) {
  const int64_t n = int64_t(v.size());
  return from_vector(v, {n});
}
Tensor f64_tensor(double v) { return from_vector(std::vector<double>{v}, {1}, DType::f64); }

Tensor generator_tensor(const Generator& g) {
  return i64_tensor({std::bit_cast<int64_t>(g.seed), std::bit_cast<int64_t>(g.offset)});
}

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
  if (!opt_.progress) return;
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
      session_start_(now_seconds()) {
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

// ---------------------------------------------------------------- the run directory
void Trainer::prepare_run_dir() {
  const fs::path dir(opt_.run_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  GRAFT_CHECK(!ec && fs::is_directory(dir), "Trainer: cannot create the run directory {}: {}",
              opt_.run_dir, ec ? ec.message() : "it exists and is not a directory");

  bool resumed = false;
  if (opt_.resume) {
    resumed = load_checkpoint();
    if (resumed) {
      message(fmt::format("resumed from {} (step {})", last_checkpoint_, step_));
      truncate_metrics(step_);
    } else {
      message(fmt::format("no checkpoint in {}; starting from step 0", opt_.run_dir));
    }
  } else if (fs::exists(dir / kPointer)) {
    GRAFT_CHECK(opt_.overwrite,
                "Trainer: {} already holds a checkpoint; hint: resume it (--resume), start over "
                "(--overwrite), or choose another run directory",
                opt_.run_dir);
    fs::remove(dir / kPointer, ec);
    GRAFT_CHECK(!ec, "Trainer: cannot remove {}: {}", (dir / kPointer).string(), ec.message());
  }
  if (!resumed) {
    // A fresh run: no old checkpoints, best model or metrics may be mistaken for this run's.
    // (Only what the trainer writes is removed: step-N directories, not the whole folder.)
    if (fs::is_directory(dir / kCheckpointDir, ec))
      for (const auto& e : fs::directory_iterator(dir / kCheckpointDir, ec))
        if (parse_step_dir(e.path().filename().string()) >= 0) fs::remove_all(e.path(), ec);
    fs::remove(dir / "best_model.safetensors", ec);
    write_text_atomic((dir / kMetricsFile).string(), "");
  }
  if (!opt_.config_json.empty())
    write_text_atomic((dir / "config.json").string(),
                      ojson::parse(opt_.config_json).dump(2) + "\n");
  const std::string mpath = (dir / kMetricsFile).string();
  metrics_ = std::fopen(mpath.c_str(), "ae");
  if (!metrics_) io_error("cannot open", mpath, errno);
}

// Keeps the lines of metrics.jsonl up to `last_step` (a resumed run rewrites what follows).
void Trainer::truncate_metrics(int64_t last_step) {
  const std::string path = (fs::path(opt_.run_dir) / kMetricsFile).string();
  if (!fs::exists(path)) return;
  std::istringstream in(read_text(path));
  std::string line, kept;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    bool keep = false;
    try {
      auto j = nlohmann::json::parse(line);
      keep = j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
             j["step"].get<int64_t>() <= last_step;
    } catch (const nlohmann::json::exception&) {
      keep = false;  // a line cut short by a crash
    }
    if (keep)
      kept += line + "\n";
    else
      ++dropped;
  }
  if (dropped > 0) write_text_atomic(path, kept);
}

void Trainer::log_json(const std::string& line) {
  if (!metrics_) return;
  std::string s = line + "\n";
  if (std::fwrite(s.data(), 1, s.size(), metrics_) != s.size() || std::fflush(metrics_) != 0)
    io_error("cannot write to", (fs::path(opt_.run_dir) / kMetricsFile).string(), errno);
}

// ---------------------------------------------------------------- checkpoints
NamedTensors Trainer::train_state() const {
  NamedTensors sd;
  for (auto& [k, t] : optimizer_.state_dict()) sd.emplace_back("optimizer." + k, t);
  if (scheduler_)
    for (auto& [k, t] : scheduler_->state_dict()) sd.emplace_back("scheduler." + k, t);
  sd.emplace_back("trainer.step", i64_tensor({step_}));
  sd.emplace_back("trainer.best_metric", f64_tensor(best_metric_));
  sd.emplace_back("trainer.best_step", i64_tensor({best_step_}));
  sd.emplace_back("trainer.bad_evals", i64_tensor({bad_evals_}));
  sd.emplace_back("trainer.elapsed", f64_tensor(elapsed()));
  sd.emplace_back("trainer.loss_ema", f64_tensor(loss_ema_));
  sd.emplace_back("trainer.ema_steps", i64_tensor({ema_steps_}));
  sd.emplace_back("rng.default", generator_tensor(default_generator()));
  for (auto& [n, g] : generators_) sd.emplace_back("rng." + n, generator_tensor(*g));
  return sd;
}

std::map<std::string, std::string> Trainer::checkpoint_metadata(const std::string& id) const {
  return {{"format", "pt"},
          {"graft_version", GRAFT_VERSION},
          {"step", std::to_string(step_)},
          {"checkpoint_id", id},
          {"optimizer", optimizer_.name()},
          {"scheduler", scheduler_ ? scheduler_->name() : ""},
          {"config", opt_.config_json}};
}

std::string Trainer::save_checkpoint() {
  GRAFT_CHECK(!opt_.run_dir.empty(), "Trainer.save_checkpoint: no run_dir to save into");
  const fs::path run(opt_.run_dir);
  const std::string rel = fmt::format("{}/{}", kCheckpointDir, step_dir_name(step_));
  const fs::path dir = run / rel;
  if (last_saved_step_ == step_ && !last_checkpoint_.empty()) return last_checkpoint_;

  std::error_code ec;
  fs::remove_all(dir, ec);  // leftovers of an unfinished save, never the live checkpoint
  fs::create_directories(dir, ec);
  GRAFT_CHECK(!ec, "Trainer: cannot create {}: {}", dir.string(), ec.message());
  fsync_dir((run / kCheckpointDir).string());

  const std::string id = new_checkpoint_id(step_);
  const auto meta = checkpoint_metadata(id);
  // 1. the model, 2. the train state (each atomic and fsynced, with its directory entry)
  save_safetensors((dir / kModelFile).string(), model_.state_dict(), meta);
  save_safetensors((dir / kStateFile).string(), train_state(), meta);
  // 3. the pointer, last: until it is replaced, the previous checkpoint stays the live one
  ojson ptr;
  ptr["format"] = "graft-checkpoint";
  ptr["version"] = 1;
  ptr["step"] = step_;
  ptr["dir"] = rel;
  ptr["model"] = kModelFile;
  ptr["train_state"] = kStateFile;
  ptr["checkpoint_id"] = id;
  ptr["graft_version"] = GRAFT_VERSION;
  write_text_atomic((run / kPointer).string(), ptr.dump(2) + "\n");
  last_saved_step_ = step_;
  last_checkpoint_ = dir.string();

  // 4. prune: keep this one and the newest keep_checkpoints - 1 older ones
  std::vector<std::pair<int64_t, fs::path>> older;
  for (const auto& e : fs::directory_iterator(run / kCheckpointDir, ec)) {
    const int64_t s = parse_step_dir(e.path().filename().string());
    if (s < 0 || s == step_) continue;
    if (s > step_)
      fs::remove_all(e.path(), ec);  // stale: from before a resume at an earlier step
    else
      older.emplace_back(s, e.path());
  }
  std::sort(older.rbegin(), older.rend());
  for (size_t i = size_t(opt_.keep_checkpoints - 1); i < older.size(); ++i)
    fs::remove_all(older[i].second, ec);
  return last_checkpoint_;
}

namespace {

// A plain file name: no directories, nothing hidden.
bool plain_name(const std::string& s) {
  return !s.empty() && s.size() < 256 && s.find('/') == std::string::npos && s[0] != '.';
}

int64_t scalar_i64(const NamedTensors& sd, const std::string& key, const std::string& where) {
  for (auto& [k, t] : sd)
    if (k == key) {
      GRAFT_CHECK(t.dtype() == DType::i64 && t.numel() == 1,
                  "{}: '{}' must be int64 [1], got {} {}", where, key, t.dtype(), t.shape().str());
      return t.to_vector<int64_t>()[0];
    }
  throw Error(fmt::format("{}: missing '{}'", where, key));
}
double scalar_f64(const NamedTensors& sd, const std::string& key, const std::string& where) {
  for (auto& [k, t] : sd)
    if (k == key) {
      GRAFT_CHECK(t.dtype() == DType::f64 && t.numel() == 1,
                  "{}: '{}' must be float64 [1], got {} {}", where, key, t.dtype(),
                  t.shape().str());
      return t.to_vector<double>()[0];
    }
  throw Error(fmt::format("{}: missing '{}'", where, key));
}
Generator generator_from(const Tensor& t, const std::string& key, const std::string& where) {
  GRAFT_CHECK(t.dtype() == DType::i64 && t.dim() == 1 && t.numel() == 2,
              "{}: '{}' must be int64 [2] (seed, offset), got {} {}", where, key, t.dtype(),
              t.shape().str());
  auto v = t.to_vector<int64_t>();
  Generator g(std::bit_cast<uint64_t>(v[0]));
  g.offset = std::bit_cast<uint64_t>(v[1]);
  return g;
}

NamedTensors clone_all(const NamedTensors& sd) {
  NamedTensors out;
  for (auto& [k, t] : sd) out.emplace_back(k, t.detach().clone());
  return out;
}

}  // namespace

bool Trainer::load_checkpoint() {
  GRAFT_CHECK(!opt_.run_dir.empty(), "Trainer.load_checkpoint: no run_dir to load from");
  const fs::path run(opt_.run_dir);
  const std::string pointer = (run / kPointer).string();
  if (!fs::exists(pointer)) return false;

  // ---- the pointer
  const std::string where = "Trainer: resume from " + pointer;
  nlohmann::json ptr;
  try {
    ptr = nlohmann::json::parse(read_text(pointer));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", where, e.what()));
  }
  auto str_field = [&](const char* k) {
    GRAFT_CHECK(ptr.is_object() && ptr.contains(k) && ptr[k].is_string(),
                "{}: missing string field \"{}\"", where, k);
    return ptr[k].get<std::string>();
  };
  GRAFT_CHECK(ptr.is_object() && ptr.value("format", "") == "graft-checkpoint",
              "{}: not a graft checkpoint pointer (\"format\" is not \"graft-checkpoint\")", where);
  GRAFT_CHECK(ptr.contains("step") && ptr["step"].is_number_integer() && ptr["step"].get<int64_t>() >= 0,
              "{}: missing or invalid \"step\"", where);
  const int64_t step = ptr["step"].get<int64_t>();
  const std::string rel = str_field("dir"), model_name = str_field("model"),
                    state_name = str_field("train_state"), id = str_field("checkpoint_id");
  const std::string expected_rel = fmt::format("{}/{}", kCheckpointDir, step_dir_name(step));
  GRAFT_CHECK(rel == expected_rel, "{}: \"dir\" is \"{}\", expected \"{}\"", where, rel,
              expected_rel);
  GRAFT_CHECK(plain_name(model_name) && plain_name(state_name),
              "{}: \"model\" and \"train_state\" must be plain file names", where);
  const fs::path dir = run / rel;

  // ---- both files, fully read and checked against the pointer
  SafetensorsFile model_file = load_safetensors((dir / model_name).string());
  SafetensorsFile state_file = load_safetensors((dir / state_name).string());
  for (const SafetensorsFile* f : {&model_file, &state_file}) {
    auto it = f->metadata.find("checkpoint_id");
    GRAFT_CHECK(it != f->metadata.end() && it->second == id,
                "{}: {} belongs to checkpoint '{}', the pointer names '{}' (a mixed checkpoint)",
                where, f == &model_file ? model_name : state_name,
                it == f->metadata.end() ? "?" : it->second, id);
  }
  const auto& meta = state_file.metadata;
  auto meta_of = [&](const char* k) {
    auto it = meta.find(k);
    return it == meta.end() ? std::string() : it->second;
  };
  GRAFT_CHECK(meta_of("optimizer") == optimizer_.name(),
              "{}: the checkpoint was saved with optimizer {}, this run uses {}", where,
              meta_of("optimizer"), optimizer_.name());
  const std::string sched_name = scheduler_ ? scheduler_->name() : "";
  GRAFT_CHECK(meta_of("scheduler") == sched_name,
              "{}: the checkpoint was saved with scheduler '{}', this run uses '{}'", where,
              meta_of("scheduler"), sched_name);

  // ---- split the train state
  NamedTensors opt_sd, sched_sd, trainer_sd;
  std::map<std::string, Tensor> rngs;
  for (auto& [k, t] : state_file.tensors) {
    if (k.rfind("optimizer.", 0) == 0)
      opt_sd.emplace_back(k.substr(10), t);
    else if (k.rfind("scheduler.", 0) == 0)
      sched_sd.emplace_back(k.substr(10), t);
    else if (k.rfind("trainer.", 0) == 0)
      trainer_sd.emplace_back(k, t);
    else if (k.rfind("rng.", 0) == 0)
      rngs.emplace(k.substr(4), t);
    else
      throw Error(fmt::format("{}: unexpected tensor '{}' in {}", where, k, state_name));
  }
  const int64_t saved_step = scalar_i64(trainer_sd, "trainer.step", where);
  GRAFT_CHECK(saved_step == step, "{}: the train state is at step {}, the pointer says {}", where,
              saved_step, step);
  const double best_metric = scalar_f64(trainer_sd, "trainer.best_metric", where);
  const int64_t best_step = scalar_i64(trainer_sd, "trainer.best_step", where);
  const int64_t bad_evals = scalar_i64(trainer_sd, "trainer.bad_evals", where);
  const double elapsed_s = scalar_f64(trainer_sd, "trainer.elapsed", where);
  const double loss_ema = scalar_f64(trainer_sd, "trainer.loss_ema", where);
  const int64_t ema_steps = scalar_i64(trainer_sd, "trainer.ema_steps", where);
  GRAFT_CHECK(bad_evals >= 0 && ema_steps >= 0, "{}: invalid trainer counters", where);
  GRAFT_CHECK(rngs.count("default"), "{}: missing 'rng.default'", where);
  std::vector<std::pair<Generator*, Generator>> gens;
  gens.emplace_back(&default_generator(), generator_from(rngs["default"], "rng.default", where));
  std::set<std::string> registered{"default"};
  for (auto& [n, g] : generators_) {
    auto it = rngs.find(n);
    GRAFT_CHECK(it != rngs.end(),
                "{}: the checkpoint has no state for generator '{}'; hint: register the same "
                "generators as the run that saved it",
                where, n);
    gens.emplace_back(g, generator_from(it->second, "rng." + n, where));
    registered.insert(n);
  }
  for (auto& [n, t] : rngs)
    GRAFT_CHECK(registered.count(n),
                "{}: the checkpoint saved generator '{}', which this run has not registered; "
                "hint: call register_generator(\"{}\", gen) before fit()",
                where, n, n);

  // ---- apply, all or nothing (the model and optimizer are put back if a later part fails)
  NamedTensors model_backup = clone_all(model_.state_dict());
  NamedTensors opt_backup = clone_all(optimizer_.state_dict());
  try {
    model_.load_state_dict(model_file.tensors, /*strict=*/true);
    optimizer_.load_state_dict(opt_sd);
    if (scheduler_) scheduler_->load_state_dict(sched_sd);
  } catch (const Error& e) {
    try {
      model_.load_state_dict(model_backup, true);
      optimizer_.load_state_dict(opt_backup);
    } catch (const Error&) {
    }
    throw Error(fmt::format("{}: {}", where, e.what()));
  }
  step_ = step;
  best_metric_ = best_metric;
  best_step_ = best_step;
  bad_evals_ = bad_evals;
  elapsed_before_ = std::isfinite(elapsed_s) && elapsed_s >= 0 ? elapsed_s : 0;
  session_start_ = now_seconds();
  loss_ema_ = loss_ema;
  ema_steps_ = ema_steps;
  for (auto& [dst, g] : gens) *dst = g;
  last_saved_step_ = step;
  last_checkpoint_ = dir.string();

  // A different configuration is allowed (e.g. more steps) but worth a note.
  const std::string saved_cfg = meta_of("config");
  if (!saved_cfg.empty() && !opt_.config_json.empty() && saved_cfg != opt_.config_json) {
    try {
      auto a = nlohmann::json::parse(saved_cfg), b = nlohmann::json::parse(opt_.config_json);
      if (a.is_object() && b.is_object()) {
        std::vector<std::string> diffs;
        for (auto& [k, v] : b.items())
          if (!a.contains(k))
            diffs.push_back(fmt::format("{} (new) = {}", k, v.dump()));
          else if (a[k] != v)
            diffs.push_back(fmt::format("{}: {} -> {}", k, a[k].dump(), v.dump()));
        for (auto& [k, v] : a.items())
          if (!b.contains(k)) diffs.push_back(fmt::format("{} (dropped)", k));
        if (!diffs.empty())
          message(fmt::format("note: resuming with a different configuration: {}",
                              fmt::join(diffs, ", ")));
      }
    } catch (const nlohmann::json::exception&) {
    }
  }
  return true;
}

// ---------------------------------------------------------------- one step
void Trainer::train_step(double& loss, int64_t& items, double& grad_norm, double& lr) {
  const int64_t k = opt_.grad_accumulation;
  model_.zero_grad();
  optimizer_.zero_grad();
  loss = 0;
  items = 0;
  for (int micro = 0; micro < int(k); ++micro) {
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
  grad_norm = opt_.clip_grad_norm > 0 ? clip_grad_norm_(model_.parameters(), opt_.clip_grad_norm)
                                      : kNaN;
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
      if (!opt_.run_dir.empty())
        save_safetensors((fs::path(opt_.run_dir) / "best_model.safetensors").string(),
                         model_.state_dict(),
                         {{"format", "pt"},
                          {"graft_version", GRAFT_VERSION},
                          {"step", std::to_string(step_)},
                          {"metric", opt_.early_stopping_metric},
                          {"value", fmt::format("{}", v)}});
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

    const double dt = std::max(t1 - t0, 1e-9);
    const double counted = items > 0 ? double(items) : 1.0;
    ojson j;
    j["step"] = step_;
    j["loss"] = num(loss);
    j["lr"] = num(lr);
    j["elapsed"] = elapsed();
    j["throughput"] = counted / dt;
    if (!std::isnan(grad_norm)) j["grad_norm"] = num(grad_norm);
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
          std::string line = fmt::format("{}/{}  loss {:.4f}  {} {}/s  lr {:.3g}  ETA {}", step_,
                                         opt_.max_steps, smoothed, format_rate(pr.rate), unit,
                                         lr, format_duration(eta));
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
        std::fprintf(stderr, "step %lld/%lld  loss %.4f  %s %s/s  lr %.3g  elapsed %s  ETA %s\n",
                     (long long)step_, (long long)opt_.max_steps, smoothed,
                     format_rate(pr.rate).c_str(), unit.c_str(), lr,
                     format_duration(elapsed()).c_str(), format_duration(eta).c_str());
        std::fflush(stderr);
      }
    }

    // ---- evaluation, stop requests, checkpoints
    bool stop = false;
    if (opt_.eval_every > 0 && step_ % opt_.eval_every == 0 &&
        evaluate_and_check(result.last_eval)) {
      stop = true;
      result.reason = StopReason::early_stopping;
    }
    if (!stop && (stop_requested_.load() || g_signal.load() != 0)) {
      stop = true;
      result.reason = StopReason::interrupted;
    }
    const bool periodic = opt_.checkpoint_every > 0 && step_ % opt_.checkpoint_every == 0;
    if (!opt_.run_dir.empty() && (stop || last || periodic)) save_checkpoint();
    if (stop) break;
  }
}

TrainResult Trainer::fit() {
  TrainResult result;
  stop_requested_.store(false);
  progress_ = std::make_unique<Progress>();
  Progress& pr = *progress_;
  pr.enabled = opt_.progress;
  pr.tty = opt_.progress && ::isatty(::fileno(stderr));
  pr.width = pr.tty ? terminal_width() : 80;

  if (metrics_) {
    std::fclose(metrics_);
    metrics_ = nullptr;
  }
  if (!opt_.run_dir.empty()) prepare_run_dir();

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

  SignalGuard signals(opt_.handle_signals);
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
