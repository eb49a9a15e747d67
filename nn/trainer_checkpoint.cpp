// nn::Trainer's run directory: preparing it, saving checkpoints, finding and loading them on
// resume. See nn/trainer.h for the layout and the crash-consistency scheme. Nothing here
// deletes a run's files unless options.overwrite asks for it.
#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "graft_config.h"
#include "nn/distributed.h"
#include "nn/run_files.h"
#include "nn/safetensors.h"
#include "nn/trainer.h"
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
constexpr const char* kBestModel = "best_model.safetensors";

std::string step_dir_name(int64_t step) { return fmt::format("step-{:08d}", step); }

// The step directories under run/checkpoint, newest first (nn/run_files.h).
std::vector<std::pair<int64_t, fs::path>> step_dirs(const fs::path& run) {
  return checkpoint_step_dirs(run.string());
}

// What a fresh start in `run` would throw away: the trainer's own files of an earlier run.
std::vector<std::string> earlier_run_files(const fs::path& run) {
  std::vector<std::string> found;
  std::error_code ec;
  if (fs::exists(run / kPointer, ec)) found.push_back(kPointer);
  if (fs::file_size(run / kMetricsFile, ec) > 0 && !ec) found.push_back(kMetricsFile);
  if (fs::exists(run / kBestModel, ec)) found.push_back(kBestModel);
  for (auto& [s, p] : step_dirs(run))
    found.push_back(fmt::format("{}/{}", kCheckpointDir, p.filename().string()));
  return found;
}

std::string new_checkpoint_id(int64_t step) {
  std::random_device rd;
  uint64_t r = (uint64_t(rd()) << 32) ^ uint64_t(rd());
  return fmt::format("{}-{:016x}", step, r);
}

Tensor i64_tensor(std::vector<int64_t> v) {
  const int64_t n = int64_t(v.size());
  return from_vector(v, {n});
}
Tensor f64_tensor(double v) { return from_vector(std::vector<double>{v}, {1}, DType::f64); }
Tensor generator_tensor(const Generator& g) {
  return i64_tensor({std::bit_cast<int64_t>(g.seed), std::bit_cast<int64_t>(g.offset)});
}

// A plain file name: no directories, nothing hidden.
bool plain_name(const std::string& s) {
  return !s.empty() && s.size() < 256 && s.find('/') == std::string::npos && s[0] != '.';
}

const Tensor* find_tensor(const NamedTensors& sd, const std::string& key) {
  for (auto& [k, t] : sd)
    if (k == key) return &t;
  return nullptr;
}
int64_t scalar_i64(const NamedTensors& sd, const std::string& key, const std::string& where) {
  const Tensor* t = find_tensor(sd, key);
  GRAFT_CHECK(t, "{}: missing '{}'", where, key);
  GRAFT_CHECK(t->dtype() == DType::i64 && t->numel() == 1, "{}: '{}' must be int64 [1], got {} {}",
              where, key, t->dtype(), t->shape().str());
  return t->to_vector<int64_t>()[0];
}
double scalar_f64(const NamedTensors& sd, const std::string& key, const std::string& where) {
  const Tensor* t = find_tensor(sd, key);
  GRAFT_CHECK(t, "{}: missing '{}'", where, key);
  GRAFT_CHECK(t->dtype() == DType::f64 && t->numel() == 1,
              "{}: '{}' must be float64 [1], got {} {}", where, key, t->dtype(), t->shape().str());
  return t->to_vector<double>()[0];
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

std::string meta_of(const std::map<std::string, std::string>& meta, const char* k) {
  auto it = meta.find(k);
  return it == meta.end() ? std::string() : it->second;
}

}  // namespace

// Both files of one checkpoint, read and checked against each other.
struct Trainer::LoadedCheckpoint {
  fs::path dir;
  int64_t step = 0;
  std::string where;  // "Trainer: resume from ..." for messages
  SafetensorsFile model, state;
};

// ---------------------------------------------------------------- the run directory
void Trainer::prepare_run_dir() {
  const fs::path dir(opt_.run_dir);
  std::error_code ec;
  if (writer()) fs::create_directories(dir, ec);
  if (dp()) dist::barrier();
  GRAFT_CHECK(!ec && fs::is_directory(dir), "Trainer: cannot create the run directory {}: {}",
              opt_.run_dir, ec ? ec.message() : "it exists and is not a directory");

  bool resumed = false;
  if (opt_.resume) {
    resumed = load_checkpoint();
    if (resumed) {
      message(fmt::format("resumed from {} (step {})", last_checkpoint_, step_));
    } else {
      // resume never deletes: with files of an earlier run but no usable checkpoint, refuse
      const auto found = earlier_run_files(dir);
      GRAFT_CHECK(found.empty(),
                  "Trainer: cannot resume {}: it holds no complete checkpoint but has {} from an "
                  "earlier run; hint: start over with --overwrite (which deletes them), or choose "
                  "another run directory",
                  opt_.run_dir, fmt::join(found, ", "));
      message(fmt::format("no checkpoint in {}; starting from step 0", opt_.run_dir));
    }
  } else {
    const auto found = earlier_run_files(dir);
    GRAFT_CHECK(found.empty() || opt_.overwrite,
                "Trainer: {} already holds a checkpoint or the files of an earlier run ({}); "
                "hint: resume it (--resume), start over (--overwrite), or choose another run "
                "directory",
                opt_.run_dir, fmt::join(found, ", "));
  }
  // Every rank has checked (and read its checkpoint); from here on rank 0 alone writes.
  if (dp()) dist::barrier();
  if (!writer()) return;
  if (resumed) truncate_metrics(step_);
  if (!resumed) {
    // A fresh run (overwrite was checked above): only what the trainer writes is removed.
    fs::remove(dir / kPointer, ec);
    for (auto& [s, p] : step_dirs(dir)) fs::remove_all(p, ec);
    fs::remove(dir / kBestModel, ec);
    atomic_write((dir / kMetricsFile).string(), "");
  }
  if (!opt_.config_json.empty())
    atomic_write((dir / "config.json").string(),
                      ojson::parse(opt_.config_json).dump(2) + "\n");
  const std::string mpath = (dir / kMetricsFile).string();
  metrics_ = std::fopen(mpath.c_str(), "ae");
  GRAFT_CHECK(metrics_, "Trainer: cannot open {}", mpath);
}

// Keeps the lines of metrics.jsonl up to `last_step` (a resumed run rewrites what follows).
void Trainer::truncate_metrics(int64_t last_step) {
  const std::string path = (fs::path(opt_.run_dir) / kMetricsFile).string();
  if (!fs::exists(path)) return;
  std::istringstream in(read_file(path));
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
  if (dropped > 0) atomic_write(path, kept);
}

// ---------------------------------------------------------------- saving
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
  sd.emplace_back("trainer.loss_start", f64_tensor(loss_start_));
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

// x - x is 0 for every finite x and NaN for NaN and ±inf, and a sum of zeros cannot overflow:
// the sum is 0 exactly when every weight is finite.
void Trainer::check_finite_weights(const char* what) const {
  NoGradGuard no_grad;
  for (auto& [name, p] : model_.named_parameters()) {
    const Tensor d = p.detach();
    if (sum(sub(d, d)).item<double>() == 0.0) continue;
    throw Error(fmt::format(
        "Trainer: the weights are not finite after step {} ('{}' holds NaN or inf); {} was not "
        "written{}; hint: lower the learning rate or clip gradients (--clip-grad-norm), then "
        "resume from the last good checkpoint",
        step_, name, what,
        last_checkpoint_.empty() ? "" : fmt::format(" and {} is kept", last_checkpoint_)));
  }
}

std::string Trainer::save_checkpoint() {
  GRAFT_CHECK(!opt_.run_dir.empty(), "Trainer.save_checkpoint: no run_dir to save into");
  const fs::path run(opt_.run_dir);
  const std::string rel = fmt::format("{}/{}", kCheckpointDir, step_dir_name(step_));
  const fs::path dir = run / rel;
  if (last_saved_step_ == step_ && !last_checkpoint_.empty()) return last_checkpoint_;
  check_finite_weights("the checkpoint");
  if (!writer()) {  // rank 0 writes; the others only keep track
    last_saved_step_ = step_;
    last_checkpoint_ = dir.string();
    return last_checkpoint_;
  }

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
  atomic_write((run / kPointer).string(), ptr.dump(2) + "\n");
  last_saved_step_ = step_;
  last_checkpoint_ = dir.string();

  // 4. prune: keep this one and the newest keep_checkpoints - 1 older ones
  int64_t kept = 1;
  for (auto& [s, p] : step_dirs(run)) {
    if (s == step_) continue;
    if (s > step_ || kept >= opt_.keep_checkpoints)
      fs::remove_all(p, ec);  // newer ones are stale: from before a resume at an earlier step
    else
      ++kept;
  }
  return last_checkpoint_;
}

void Trainer::save_best_model(double value) {
  check_finite_weights(kBestModel);
  if (!writer()) return;
  save_safetensors((fs::path(opt_.run_dir) / kBestModel).string(), model_.state_dict(),
                   {{"format", "pt"},
                    {"graft_version", GRAFT_VERSION},
                    {"step", std::to_string(step_)},
                    {"metric", opt_.early_stopping_metric},
                    {"value", fmt::format("{}", value)}});
}

// ---------------------------------------------------------------- finding a checkpoint
// Fills `out` from the checkpoint that checkpoint.json names or, without a pointer, from the
// newest complete step directory; false when the run directory has no checkpoint at all.
bool Trainer::locate_checkpoint(LoadedCheckpoint& out) {
  const fs::path run(opt_.run_dir);
  const std::string pointer = (run / kPointer).string();
  auto check_pair = [](LoadedCheckpoint& c, const std::string& id) {
    for (const SafetensorsFile* f : {&c.model, &c.state}) {
      const std::string got = meta_of(f->metadata, "checkpoint_id");
      GRAFT_CHECK(!got.empty() && got == id,
                  "{}: {} belongs to checkpoint '{}', expected '{}' (a mixed checkpoint)", c.where,
                  f == &c.model ? "the model file" : "the train state", got.empty() ? "?" : got,
                  id);
    }
    const int64_t saved = scalar_i64(c.state.tensors, "trainer.step", c.where);
    GRAFT_CHECK(saved == c.step, "{}: the train state is at step {}, expected {}", c.where, saved,
                c.step);
  };

  if (fs::exists(pointer)) {
    out.where = "Trainer: resume from " + pointer;
    nlohmann::json ptr;
    try {
      ptr = nlohmann::json::parse(read_file(pointer));
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: not valid JSON ({})", out.where, e.what()));
    }
    auto str_field = [&](const char* k) {
      GRAFT_CHECK(ptr.is_object() && ptr.contains(k) && ptr[k].is_string(),
                  "{}: missing string field \"{}\"", out.where, k);
      return ptr[k].get<std::string>();
    };
    GRAFT_CHECK(ptr.is_object() && ptr.value("format", "") == "graft-checkpoint",
                "{}: not a graft checkpoint pointer (\"format\" is not \"graft-checkpoint\")",
                out.where);
    GRAFT_CHECK(ptr.contains("step") && ptr["step"].is_number_integer() &&
                    ptr["step"].get<int64_t>() >= 0,
                "{}: missing or invalid \"step\"", out.where);
    out.step = ptr["step"].get<int64_t>();
    const std::string rel = str_field("dir"), model_name = str_field("model"),
                      state_name = str_field("train_state"), id = str_field("checkpoint_id");
    const std::string expected_rel = fmt::format("{}/{}", kCheckpointDir, step_dir_name(out.step));
    GRAFT_CHECK(rel == expected_rel, "{}: \"dir\" is \"{}\", expected \"{}\"", out.where, rel,
                expected_rel);
    GRAFT_CHECK(plain_name(model_name) && plain_name(state_name),
                "{}: \"model\" and \"train_state\" must be plain file names", out.where);
    out.dir = run / rel;
    out.model = load_safetensors((out.dir / model_name).string());
    out.state = load_safetensors((out.dir / state_name).string());
    check_pair(out, id);
    return true;
  }

  // No pointer (deleted, or a crash before the first one was written): the newest step
  // directory whose two files are complete and belong together.
  const auto dirs = step_dirs(run);
  std::vector<std::string> rejected;
  for (auto& [s, p] : dirs) {
    LoadedCheckpoint c;
    c.dir = p;
    c.step = s;
    c.where = fmt::format("Trainer: resume from {} (no {})", p.string(), kPointer);
    try {
      c.model = load_safetensors((p / kModelFile).string());
      c.state = load_safetensors((p / kStateFile).string());
      check_pair(c, meta_of(c.model.metadata, "checkpoint_id"));
    } catch (const Error& e) {
      rejected.push_back(fmt::format("{}: {}", p.filename().string(), e.what()));
      continue;
    }
    message(fmt::format("note: {} is missing; using the newest complete checkpoint, {}", kPointer,
                        p.string()));
    out = std::move(c);
    return true;
  }
  GRAFT_CHECK(rejected.empty(),
              "Trainer: cannot resume {}: no {} and no complete checkpoint directory ({}); "
              "nothing was changed",
              opt_.run_dir, kPointer, fmt::join(rejected, "; "));
  return false;
}

// A resumed run must train with the configuration it was saved with, except for the keys in
// options.resume_may_change; anything else would be printed, recorded and then ignored.
void Trainer::check_resume_config(const std::string& saved_config, const std::string& where) {
  if (saved_config.empty() || opt_.config_json.empty() || saved_config == opt_.config_json) return;
  nlohmann::json a, b;
  try {
    a = nlohmann::json::parse(saved_config);
    b = nlohmann::json::parse(opt_.config_json);
  } catch (const nlohmann::json::exception&) {
    return;  // not JSON objects: nothing to compare key by key
  }
  if (!a.is_object() || !b.is_object()) return;
  const std::set<std::string> may(opt_.resume_may_change.begin(), opt_.resume_may_change.end());
  std::vector<std::string> diffs, allowed;
  auto show = [](const nlohmann::json& j, const std::string& k) {
    return j.contains(k) ? j[k].dump() : std::string("(none)");
  };
  std::set<std::string> keys;
  for (auto& [k, v] : a.items()) keys.insert(k);
  for (auto& [k, v] : b.items()) keys.insert(k);
  for (const std::string& k : keys) {
    if (a.contains(k) && b.contains(k) && a[k] == b[k]) continue;
    const std::string d = fmt::format("{}: {} -> {}", k, show(a, k), show(b, k));
    (may.count(k) ? allowed : diffs).push_back(d);
  }
  GRAFT_CHECK(diffs.empty(),
              "{}: the run was saved with another configuration ({}); a resumed run keeps its "
              "hyperparameters; hint: resume with the saved values (pass --config {}/config.json), "
              "or start a new run (--overwrite or another run directory)",
              where, fmt::join(diffs, ", "), opt_.run_dir);
  if (!allowed.empty())
    message(fmt::format("note: resuming with {}", fmt::join(allowed, ", ")));
}

// ---------------------------------------------------------------- loading
bool Trainer::load_checkpoint() {
  GRAFT_CHECK(!opt_.run_dir.empty(), "Trainer.load_checkpoint: no run_dir to load from");
  LoadedCheckpoint c;
  if (!locate_checkpoint(c)) return false;
  const std::string& where = c.where;
  const auto& meta = c.state.metadata;
  GRAFT_CHECK(meta_of(meta, "optimizer") == optimizer_.name(),
              "{}: the checkpoint was saved with optimizer {}, this run uses {}", where,
              meta_of(meta, "optimizer"), optimizer_.name());
  const std::string sched_name = scheduler_ ? scheduler_->name() : "";
  GRAFT_CHECK(meta_of(meta, "scheduler") == sched_name,
              "{}: the checkpoint was saved with scheduler '{}', this run uses '{}'", where,
              meta_of(meta, "scheduler"), sched_name);
  check_resume_config(meta_of(meta, "config"), where);

  // ---- split the train state
  NamedTensors opt_sd, sched_sd, trainer_sd;
  std::map<std::string, Tensor> rngs;
  for (auto& [k, t] : c.state.tensors) {
    if (k.rfind("optimizer.", 0) == 0)
      opt_sd.emplace_back(k.substr(10), t);
    else if (k.rfind("scheduler.", 0) == 0)
      sched_sd.emplace_back(k.substr(10), t);
    else if (k.rfind("trainer.", 0) == 0)
      trainer_sd.emplace_back(k, t);
    else if (k.rfind("rng.", 0) == 0)
      rngs.emplace(k.substr(4), t);
    else
      throw Error(fmt::format("{}: unexpected tensor '{}' in the train state", where, k));
  }
  const double best_metric = scalar_f64(trainer_sd, "trainer.best_metric", where);
  const int64_t best_step = scalar_i64(trainer_sd, "trainer.best_step", where);
  const int64_t bad_evals = scalar_i64(trainer_sd, "trainer.bad_evals", where);
  const double elapsed_s = scalar_f64(trainer_sd, "trainer.elapsed", where);
  const double loss_ema = scalar_f64(trainer_sd, "trainer.loss_ema", where);
  const int64_t ema_steps = scalar_i64(trainer_sd, "trainer.ema_steps", where);
  const double loss_start = find_tensor(trainer_sd, "trainer.loss_start")
                                ? scalar_f64(trainer_sd, "trainer.loss_start", where)
                                : std::numeric_limits<double>::quiet_NaN();  // older checkpoints
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
    model_.load_state_dict(c.model.tensors, /*strict=*/true);
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
  step_ = c.step;
  best_metric_ = best_metric;
  best_step_ = best_step;
  bad_evals_ = bad_evals;
  elapsed_before_ = std::isfinite(elapsed_s) && elapsed_s >= 0 ? elapsed_s : 0;
  session_start_ = monotonic_seconds();
  loss_ema_ = loss_ema;
  ema_steps_ = ema_steps;
  loss_start_ = loss_start;
  for (auto& [dst, g] : gens) *dst = g;
  last_saved_step_ = c.step;
  last_checkpoint_ = c.dir.string();
  return true;
}

}  // namespace graft::nn
