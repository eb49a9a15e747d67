// The trainer flags every `graft train <model>` command takes, declared once: the same names,
// meanings, defaults and range checks for mlp, seq2seq, transformer, gpt, bert-*, abcnn.
// docs/trainer-flags.md has the table of them.
//
// How a command uses them:
//
//   struct MyArgs { tools::TrainFlags train; int64_t batch = 32; ... };   // its own flags next to them
//
//   void register_my_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
//     auto a = std::make_shared<MyArgs>();
//     CLI::App* c = train.add_subcommand("mine", "...");
//     c->add_option("--batch", a->batch, "...")->capture_default_str()->check(...);
//     tools::add_train_flags(c, a->train, {.steps = 1000, .eval_every = 100},
//                            [a] { tools::require_divisible(a->batch, "--batch", a->train); });
//     cmds.push_back({c, [a] { return train_mine(*a); }});
//   }
//
//   int train_mine(const MyArgs& a) {
//     tools::set_threads(a.train);                     // --threads
//     nn::TrainerOptions to = tools::to_trainer_options(a.train);
//     nlohmann::ordered_json cfg = tools::train_config("mine", a.train);  // {"model": "mine", "steps": ...}
//     cfg["batch"] = a.batch;                          // the command's own flags, by long name
//     to.config_json = cfg.dump();
//     { AutocastGuard ac(a.train.bf16 ? Precision::bf16 : Precision::f32); ... }   // in loss_fn
//     ...
//     const nn::TrainResult r = trainer.fit();
//     for (each batch of the final test decoding) nn::check_interrupt("decoding");
//     return nn::exit_status(r.reason);                 // 0 done, 130 interrupted
//   }
//
// --config FILE is applied when the subcommand's parse completes (add_train_flags installs the
// callback): options the command line did not give are read from the file, then the checks
// run. Errors there are CLI11 errors, so main() prints them and exits with status 2. main()
// installs one nn::InterruptHandler for the whole command, returns 130 for nn::Interrupted and
// 1 for graft::Error.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "nn/trainer.h"

namespace graft::tools {

// The common flags' values (the defaults here are the defaults of every command, except those
// TrainFlagDefaults sets).
struct TrainFlags {
  std::string run_dir;            // --run-dir: "" = no files (no metrics, checkpoints)
  bool resume = false;            // --resume
  bool overwrite = false;         // --overwrite
  std::string config;             // --config FILE
  int64_t steps = 2000;           // --steps: optimizer steps in total, across resumes
  double time_budget = 0;         // --time-budget SECONDS of training in this session; 0 = none
  int64_t checkpoint_every = 500; // --checkpoint-every N steps (0 = only when training stops)
  int64_t keep_checkpoints = 1;   // --keep-checkpoints: newest step directories kept
  int64_t eval_every = 0;         // --eval-every N steps (0 = never)
  int64_t log_every = 0;          // --log-every: progress line every N steps off a terminal
  int64_t grad_accumulation = 1;  // --grad-accumulation: micro-batches per optimizer step
  double clip_grad_norm = 0;      // --clip-grad-norm (0 = off)
  int64_t patience = 0;           // --patience: evaluations without improvement (0 = off)
  int64_t seed = 1;               // --seed
  int64_t threads = 1;            // --threads (0 = OpenMP's default)
  std::string device;             // --device: "" = $GRAFT_DEVICE, else cpu
  bool bf16 = false;              // --bf16 (only where TrainFlagDefaults::bf16 offers it)
  bool has_bf16 = false;          // whether this command offers --bf16
  double dp_bucket_mb = 4;        // --dp-bucket-mb: gradient bucket size under mpirun
  bool dp_no_overlap = false;     // --dp-no-overlap: all-reduce after backward, not during it
};

// The few defaults a command may set differently, and what its help says.
struct TrainFlagDefaults {
  int64_t steps = 2000;
  int64_t eval_every = 0;
  double clip_grad_norm = 1.0;
  std::string run_dir;        // the default --run-dir ("" = none)
  std::string run_dir_help;   // replaces the "(default ...)" text, e.g. "runs/seq2seq-TASK"
  std::string eval_help;      // what one evaluation does, for --eval-every's help
  bool bf16 = true;           // offer --bf16 (models with matmuls)
};

// Adds the common flags to `sub` (values go to `flags`, which must outlive parsing) and a parse
// callback that applies --config, then checks the flags together (e.g. --patience needs
// --eval-every, --resume needs a run directory), then runs `check` (the command's own checks:
// throw CLI::ValidationError for a usage error).
void add_train_flags(CLI::App* sub, TrainFlags& flags, const TrainFlagDefaults& defaults,
                     std::function<void()> check = {});

// The nn::TrainerOptions the flags set (config_json, items_name and early-stopping metric are
// the command's). checkpoint_every is 0 without a run directory.
nn::TrainerOptions to_trainer_options(const TrainFlags& f);
// For a command whose learning-rate schedule is built from --steps (cosine or linear decay to
// the last step): --steps may then not change on --resume, because the restored schedule would
// jump to another curve; resume refuses, naming the flag.
void schedule_spans_steps(nn::TrainerOptions& to);

// A run's configuration as config.json stores it: {"model": model, then the common flags by
// long name}; run-dir, resume, overwrite and config are left out. Commands add their own flags
// by long name, so that `--config RUN/config.json` takes the file back as it is.
nlohmann::ordered_json train_config(const std::string& model, const TrainFlags& f);

// --threads: omp_set_num_threads(threads) when threads > 0.
void set_threads(const TrainFlags& f);

// Throws CLI::ValidationError unless value (named flag, e.g. "--batch") is a multiple of
// --grad-accumulation (each optimizer step averages that many equal micro-batches).
void require_divisible(int64_t value, const char* flag, const TrainFlags& f);

// Fills the options of `sub` that the command line did not give from a JSON object keyed by
// their long names ({"steps": 500, "lr": 0.005}); a "model" key must name this subcommand.
// Every problem (missing, unreadable or oversized file, a directory, bad JSON, an unknown key,
// a bad value) is a CLI::ParseError naming the file and key: exit status 2.
void apply_json_config(CLI::App* sub, const std::string& path);

// A finite number in [lo, hi] (CLI::Range lets NaN through).
CLI::Validator finite_in(double lo, double hi);

// Runs decode(first, last) over [0, n) in chunks of `batch` and calls
// nn::check_interrupt("decoding") before each chunk, so Ctrl-C stops a long decode promptly.
void for_each_chunk(size_t n, size_t batch, const std::function<void(size_t, size_t)>& decode);

}  // namespace graft::tools
