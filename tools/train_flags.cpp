// The common trainer flags of every `graft train` command (see train_flags.h) and --config.
#include "tools/train_flags.h"

#include <omp.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>

#include <fmt/format.h>

#include "nn/interrupt.h"

namespace graft::tools {

namespace {

// A --config file is a small JSON object; anything larger is a mistake (a dataset, a model).
constexpr size_t kMaxConfigBytes = size_t(1) << 20;

CLI::ValidationError config_error(const std::string& path, const std::string& what) {
  return CLI::ValidationError("--config", fmt::format("{}: {}", path, what));
}

// The whole file, or a config_error saying why not (missing, a directory, unreadable, too big).
std::string read_config_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw config_error(path, "no such file");
  if (fs::is_directory(st)) throw config_error(path, "is a directory; expected a JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw config_error(path, "cannot be opened for reading");
  std::string text;
  char buf[1 << 14];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, size_t(in.gcount()));
    if (text.size() > kMaxConfigBytes)
      throw config_error(path, fmt::format("is larger than {} KiB; a config is a small JSON object",
                                           kMaxConfigBytes >> 10));
  }
  if (in.bad()) throw config_error(path, "reading it failed");
  return text;
}

// A value as it reads in a message: scalars in full, containers by kind only (dumping a deeply
// nested value would recurse once per level).
std::string describe(const nlohmann::json& v) {
  if (v.is_structured()) return std::string("a JSON ") + v.type_name();
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

bool is_meta_option(const std::string& name) { return name == "config" || name == "help"; }

}  // namespace

CLI::Validator finite_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          return fmt::format("'{}' is not a number", text);
        }
        if (used != text.size() || !std::isfinite(v) || v < lo || v > hi)
          return fmt::format("'{}' must be a finite number in [{:g}, {:g}]", text, lo, hi);
        return "";
      },
      fmt::format("NUMBER in [{:g}, {:g}]", lo, hi));
}

void apply_json_config(CLI::App* sub, const std::string& path) {
  const std::string text = read_config_file(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw config_error(path, fmt::format("not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw config_error(path, "must hold a JSON object keyed by long option names");
  if (j.contains("model")) {  // which command wrote it (a run's config.json): checked first
    const nlohmann::json& m = j["model"];
    if (!m.is_string() || m.get<std::string>() != sub->get_name())
      throw config_error(path, fmt::format("\"model\" is {}, but this is 'train {}'", describe(m),
                                           sub->get_name()));
  }
  for (auto& [key, value] : j.items()) {
    if (key == "model") continue;
    CLI::Option* opt = is_meta_option(key) ? nullptr : sub->get_option_no_throw("--" + key);
    if (!opt) {
      std::vector<std::string> known;
      for (const CLI::Option* o : sub->get_options())
        if (!o->get_lnames().empty() && !is_meta_option(o->get_lnames()[0]))
          known.push_back(o->get_lnames()[0]);
      throw config_error(path, fmt::format("unknown key '{}'; known keys: {}", key,
                                           fmt::join(known, ", ")));
    }
    if (opt->count() > 0) continue;  // the command line wins
    try {
      if (opt->get_expected_min() == 0) {  // a flag
        if (!value.is_boolean())
          throw CLI::ValidationError(key, fmt::format("expected true or false, got {}", describe(value)));
        if (value.get<bool>()) {
          opt->add_result("true");
          opt->run_callback();
        }
        continue;
      }
      std::string s;
      if (value.is_string())
        s = value.get<std::string>();
      else if (value.is_number())
        s = value.dump();
      else
        throw CLI::ValidationError(key, fmt::format("expected a number or a string, got {}",
                                                    describe(value)));
      opt->add_result(s);
      opt->run_callback();
    } catch (const CLI::ParseError& e) {
      throw config_error(path, fmt::format("key '{}': {}", key, e.what()));
    }
  }
}

void add_train_flags(CLI::App* sub, TrainFlags& f, const TrainFlagDefaults& d,
                     std::function<void()> check) {
  f.steps = d.steps;
  f.eval_every = d.eval_every;
  f.clip_grad_norm = d.clip_grad_norm;
  f.run_dir = d.run_dir;
  f.has_bf16 = d.bf16;
  const auto steps = CLI::Range(int64_t(1), int64_t(1) << 40);
  const auto every = CLI::Range(int64_t(0), int64_t(1) << 40);
  const std::string g = "Trainer (the same for every 'graft train' command)";

  CLI::Option* run_dir = sub->add_option(
      "--run-dir", f.run_dir,
      "Run directory: metrics.jsonl, config.json, checkpoint/, best_model.safetensors, the "
      "command's results (\"\" = none)" +
          (d.run_dir_help.empty() ? std::string() : " [default: " + d.run_dir_help + "]"));
  if (d.run_dir_help.empty()) run_dir->capture_default_str();
  run_dir->group(g);
  sub->add_flag("--resume", f.resume, "Continue from the run directory's checkpoint (bit-identical losses)")->group(g);
  sub->add_flag("--overwrite", f.overwrite, "Start over in a run directory that holds a checkpoint")->group(g);
  sub->add_option("--config", f.config, "JSON file of options by long name, e.g. {\"steps\": 500}; a run's "
                  "config.json works as it is; flags on the command line win")->group(g);
  sub->add_option("--steps", f.steps, "Optimizer steps in total, across resumes")->capture_default_str()->check(steps)->group(g);
  sub->add_option("--time-budget", f.time_budget, "Stop after SECONDS of training in this session, "
                  "saving a checkpoint (0 = no limit); the final evaluation runs after it")
      ->capture_default_str()->check(finite_in(0, 1e9))->group(g);
  sub->add_option("--checkpoint-every", f.checkpoint_every, "Save a checkpoint every N steps "
                  "(0 = only when training stops; needs a run directory)")
      ->capture_default_str()->check(every)->group(g);
  sub->add_option("--keep-checkpoints", f.keep_checkpoints, "Checkpoints kept (the newest)")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1000000)))->group(g);
  sub->add_option("--eval-every", f.eval_every, "Evaluate every N steps (0 = never)" +
                  (d.eval_help.empty() ? std::string() : ": " + d.eval_help))
      ->capture_default_str()->check(every)->group(g);
  sub->add_option("--log-every", f.log_every, "Progress line every N steps when stderr is not a "
                  "terminal (0 = about 20 per run)")->capture_default_str()->check(every)->group(g);
  sub->add_option("--grad-accumulation", f.grad_accumulation, "Micro-batches per optimizer step: "
                  "the batch is split into this many equal parts whose gradients add up")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1000000)))->group(g);
  sub->add_option("--clip-grad-norm", f.clip_grad_norm, "Clip the gradients' total L2 norm to this (0 = off)")
      ->capture_default_str()->check(finite_in(0, 1e12))->group(g);
  sub->add_option("--patience", f.patience, "Early stopping: evaluations without improvement "
                  "before stopping (0 = off; needs --eval-every)")->capture_default_str()->check(every)->group(g);
  sub->add_option("--seed", f.seed, "Seed of the data, the initial weights, dropout and the batches")
      ->capture_default_str()->check(CLI::Range(int64_t(0), std::numeric_limits<int64_t>::max()))->group(g);
  sub->add_option("--threads", f.threads, "OpenMP threads (0 = OpenMP's default: $OMP_NUM_THREADS, "
                  "else one per core)")->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1024)))->group(g);
  sub->add_option("--device", f.device, "cpu or opencl:N for the training steps (default: "
                  "$GRAFT_DEVICE, else cpu); decoding runs on the CPU")->group(g);
  if (d.bf16)
    sub->add_flag("--bf16", f.bf16, "bf16 mixed precision: matmuls in bfloat16 with f32 "
                  "accumulation (weights, gradients, optimizer state and loss stay f32)")->group(g);
  sub->add_option("--dp-bucket-mb", f.dp_bucket_mb, "Under mpirun: gradients are averaged across "
                  "ranks in buckets of this many MiB (docs/distributed.md)")
      ->capture_default_str()->check(finite_in(0.001, 1024))->group(g);
  sub->add_flag("--dp-no-overlap", f.dp_no_overlap, "Under mpirun: all-reduce the gradients after "
                "backward instead of overlapping it with backward")->group(g);

  const bool derived_run_dir = !d.run_dir_help.empty();
  sub->callback([sub, &f, derived_run_dir, check = std::move(check)] {
    if (!f.config.empty()) apply_json_config(sub, f.config);
    if (f.patience > 0 && f.eval_every == 0)
      throw CLI::ValidationError("--patience", "early stopping needs evaluations: set --eval-every N (N > 0)");
    if (f.resume && f.overwrite)
      throw CLI::ValidationError("--resume", "--resume continues a run and --overwrite starts it over: give one");
    if (f.resume && f.run_dir.empty() && !derived_run_dir)
      throw CLI::ValidationError("--resume", "needs --run-dir (the run to continue)");
    if (check) check();
  });
}

nn::TrainerOptions to_trainer_options(const TrainFlags& f) {
  nn::TrainerOptions to;
  to.max_steps = f.steps;
  to.eval_every = f.eval_every;
  to.run_dir = f.run_dir;
  to.checkpoint_every = f.run_dir.empty() ? 0 : f.checkpoint_every;
  to.keep_checkpoints = f.keep_checkpoints;
  to.resume = f.resume;
  to.overwrite = f.overwrite;
  to.early_stopping_patience = f.patience;
  to.clip_grad_norm = f.clip_grad_norm;
  to.grad_accumulation = f.grad_accumulation;
  to.log_every = f.log_every;
  to.time_budget = f.time_budget;
  to.dp_bucket_bytes = size_t(f.dp_bucket_mb * 1048576.0);
  to.dp_overlap = !f.dp_no_overlap;
  return to;
}

void schedule_spans_steps(nn::TrainerOptions& to) {
  std::erase(to.resume_may_change, std::string("steps"));
}

nlohmann::ordered_json train_config(const std::string& model, const TrainFlags& f) {
  nlohmann::ordered_json j;
  j["model"] = model;
  j["steps"] = f.steps;
  j["time-budget"] = f.time_budget;
  j["checkpoint-every"] = f.checkpoint_every;
  j["keep-checkpoints"] = f.keep_checkpoints;
  j["eval-every"] = f.eval_every;
  j["log-every"] = f.log_every;
  j["grad-accumulation"] = f.grad_accumulation;
  j["clip-grad-norm"] = f.clip_grad_norm;
  j["patience"] = f.patience;
  j["seed"] = f.seed;
  j["threads"] = f.threads;
  j["device"] = f.device;
  if (f.has_bf16) j["bf16"] = f.bf16;
  j["dp-bucket-mb"] = f.dp_bucket_mb;
  j["dp-no-overlap"] = f.dp_no_overlap;
  return j;
}

void set_threads(const TrainFlags& f) {
  if (f.threads > 0) omp_set_num_threads(int(f.threads));
}

void require_divisible(int64_t value, const char* flag, const TrainFlags& f) {
  if (value % f.grad_accumulation != 0)
    throw CLI::ValidationError(flag, fmt::format("{} must be a multiple of --grad-accumulation {} "
                                                 "(each step averages that many equal micro-batches)",
                                                 value, f.grad_accumulation));
}

void for_each_chunk(size_t n, size_t batch, const std::function<void(size_t, size_t)>& decode) {
  for (size_t i = 0; i < n; i += batch) {
    nn::check_interrupt("decoding");
    decode(i, std::min(n, i + batch));
  }
}

}  // namespace graft::tools
