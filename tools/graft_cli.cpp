// graft — the command-line tool. Every subcommand takes --help.
//
//   graft ops       the op table: devices with kernels, differentiable, gradcheck cases
//   graft devices   the devices this build can run on (both take --json)
//   graft version   version and build configuration
//   graft train mlp the two-spirals MLP with nn::Trainer (run directory, checkpoints, resume)
//   graft plot DIR  draw a run's metrics.jsonl into DIR/loss.png and DIR/loss.svg (several DIRs + --out NAME: compared)
//   graft predict DIR   classify text with a bert-finetune or abcnn run (tools/cmd_predict.cpp)
//   graft sample DIR    sample text from a gpt run (tools/cmd_sample.cpp)
//   graft bleu HYP REF  corpus BLEU of a translation file (tools/cmd_bleu.cpp)
//
// Exit status: 0 done; 1 a graft::Error (printed as "graft: error: ..."); 2 a usage error
// (unknown subcommand, bad flag or value, bad --config file); 130 interrupted: Ctrl-C during
// training finishes the step, saves a checkpoint and exits, during decoding it stops at the next
// batch, and a second Ctrl-C quits at once. The train commands share one flag set
// (tools/train_flags.h, docs/trainer-flags.md).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/spirals.h"
#include "autograd/autocast.h"
#include "graft.h"
#include "graft_config.h"
#include "nn/layers.h"
#include "nn/distributed.h"
#include "nn/loss.h"
#include "tools/commands.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "nn/interrupt.h"
#include "nn/trainer.h"
#include "ops/kernels.h"
#include "ops/opencl/opencl.h"
#include "tools/plot.h"
#include "tools/train_device.h"
#include "tools/train_flags.h"

namespace graft::tools {
// tools/cmd_compile.cpp: the training loop of `graft train mlp --compile`.
int train_mlp_compiled(nn::Module& model, optim::Optimizer& opt, optim::LRScheduler* sched,
                       const data::Spirals& ds, int64_t batch, Generator& batch_gen,
                       int64_t steps, int64_t print_every);
}  // namespace graft::tools

namespace {

// The OpenCL back-end table, or nullptr when this build or machine has none.
const graft::Backend* opencl_backend() {
  try {
    return graft::backend_for(graft::Device::opencl(0));
  } catch (const std::exception&) {
    return nullptr;
  }
}

// Prints rows as a table whose columns are as wide as their widest cell.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < rows[r].size(); ++c)
      line += fmt::format("{:<{}}", rows[r][c], c + 1 < rows[r].size() ? width[c] + 2 : 0);
    fmt::print("{}\n", line);
    if (r == 0) {  // rule under the header
      size_t total = 0;
      for (size_t w : width) total += w + 2;
      fmt::print("{}\n", std::string(total - 2, '-'));
    }
  }
}

// One row of `graft ops`: what the table and --json print.
struct OpRow {
  std::string name;
  std::vector<std::string> devices;  // back-ends with kernels: "cpu", "opencl"
  bool differentiable = false;
  size_t cases = 0;                  // gradcheck cases
  std::string cases_error;           // set when building the cases threw
};

int cmd_ops(const std::string& filter, bool missing_only, bool json) {
  const graft::Backend& cpu = graft::cpu_backend();
  const graft::Backend* ocl = opencl_backend();
  std::vector<OpRow> ops;
  for (const graft::OpInfo& op : graft::op_table()) {
    OpRow r{op.name, {}, op.differentiable, 0, {}};
    if (!filter.empty() && r.name.find(filter) == std::string::npos) continue;
    if (op.has_kernels && op.has_kernels(cpu)) r.devices.push_back("cpu");
    if (ocl && op.has_kernels && op.has_kernels(*ocl)) r.devices.push_back("opencl");
    try {
      graft::Generator gen(0);
      r.cases = op.cases ? op.cases(gen).size() : 0;
    } catch (const std::exception& e) {
      r.cases_error = e.what();
    }
    if (missing_only && r.cases > 0) continue;
    ops.push_back(std::move(r));
  }
  int n_diff = 0, n_without = 0;
  for (const OpRow& r : ops) n_diff += r.differentiable, n_without += r.cases == 0;
  if (json) {  // {"ops": [{name, devices, differentiable, gradcheck_cases}...], counts}
    nlohmann::ordered_json j, list = nlohmann::ordered_json::array();
    for (const OpRow& r : ops) {
      nlohmann::ordered_json o;
      o["name"] = r.name;
      o["devices"] = r.devices;
      o["differentiable"] = r.differentiable;
      o["gradcheck_cases"] = r.cases;
      if (!r.cases_error.empty()) o["gradcheck_cases_error"] = r.cases_error;
      list.push_back(o);
    }
    j["ops"] = list;
    j["count"] = ops.size();
    j["differentiable"] = n_diff;
    j["without_gradcheck_cases"] = n_without;
    j["opencl_backend"] = ocl != nullptr;
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {
      {"op", "devices", "differentiable", "gradcheck cases"}};
  for (const OpRow& r : ops) {
    std::string cases = !r.cases_error.empty() ? fmt::format("error: {}", r.cases_error)
                        : r.cases             ? fmt::format("yes ({})", r.cases)
                                              : "NO";
    rows.push_back({r.name, r.devices.empty() ? "none" : fmt::format("{}", fmt::join(r.devices, ", ")),
                    r.differentiable ? "yes" : "no", cases});
  }
  print_table(rows);
  fmt::print("\n{} ops, {} differentiable, {} without gradcheck cases{}\n", ops.size(), n_diff,
             n_without, ocl ? "" : " (OpenCL back-end not available in this build)");
  return 0;
}

// `graft devices`: one entry per device (and one for an unavailable OpenCL back-end).
int cmd_devices(bool json) {
  const graft::Backend& cpu = graft::cpu_backend();
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  const uint64_t cpu_mem = pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
  const auto cl_devices = graft::opencl::devices();
  std::string cl_missing;  // why there is no OpenCL device, if there is none
  if (!graft::opencl::built() || !opencl_backend())
    cl_missing = "this build has no OpenCL support (meson -Dopencl=enabled)";
  else if (cl_devices.empty())
    cl_missing = "no OpenCL platform/device found (install an ICD, e.g. pocl-opencl-icd)";
  if (json) {  // {"devices": [{name, kind, available, memory_bytes, ...}]}
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    nlohmann::ordered_json c;
    c["name"] = "cpu";
    c["kind"] = "cpu";
    c["available"] = true;
    c["memory_bytes"] = cpu_mem;
    c["kernels"] = cpu.name;
    c["isa"] = graft::cpu_isa();  // the CPU kernel copy in use (ops/kernels.h)
    c["isa_available"] = graft::cpu_isa_available();
    c["openmp_threads"] = omp_get_max_threads();
    list.push_back(c);
    if (!cl_missing.empty()) {
      nlohmann::ordered_json u;
      u["name"] = "opencl";
      u["kind"] = "opencl";
      u["available"] = false;
      u["reason"] = cl_missing;
      list.push_back(u);
    }
    for (const auto& d : cl_devices) {
      nlohmann::ordered_json o;
      o["name"] = fmt::format("opencl:{}", d.index);
      o["kind"] = "opencl";
      o["available"] = true;
      o["memory_bytes"] = d.global_mem;
      o["index"] = d.index;
      o["platform"] = d.platform;
      o["device"] = d.name;
      o["type"] = d.type;
      o["compute_units"] = d.compute_units;
      o["fp64"] = d.fp64;
      o["version"] = d.version;
      list.push_back(o);
    }
    nlohmann::ordered_json j;
    j["devices"] = list;
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("cpu        available    kernels: {} ({}), OpenMP threads: {}, {} MiB\n", cpu.name,
             graft::cpu_isa(), omp_get_max_threads(), cpu_mem >> 20);
  if (!cl_missing.empty()) fmt::print("opencl     unavailable  {}\n", cl_missing);
  for (const auto& d : cl_devices)
    fmt::print("opencl:{:<3} available    {} / {} ({}), {} compute units, {} MiB, fp64 {}, {}\n",
               d.index, d.platform, d.name, d.type, d.compute_units, d.global_mem >> 20,
               d.fp64 ? "yes" : "no", d.version);
  return 0;
}

// " (rank 1 of 2)" under mpirun, else "".
std::string rank_tag() {
  return graft::dist::world_size() > 1
             ? fmt::format(" (rank {} of {})", graft::dist::rank(), graft::dist::world_size())
             : std::string();
}

int cmd_version() {
  const char* isa = graft::cpu_isa();  // first: a bad GRAFT_CPU_ISA stops before any output
  fmt::print("graft {}\n", GRAFT_VERSION);
  fmt::print("compiler: g++ {}, C++ {}\n", __VERSION__, __cplusplus);
  fmt::print("CPU kernels: {} (this CPU and build: {}; GRAFT_CPU_ISA=NAME picks one)\n",
             isa, graft::cpu_isa_available());
  fmt::print("OpenMP threads: {}, OpenCL: {}\n", omp_get_max_threads(),
             GRAFT_HAVE_OPENCL ? "built" : "not built");
  fmt::print("MPI: {}{}\n", graft::dist::mpi_version(),
             graft::dist::built() ? fmt::format(" (data parallel: this process is rank {} of {})",
                                                graft::dist::rank(), graft::dist::world_size())
                                  : " (data-parallel training needs a build with libopenmpi-dev)");
  return 0;
}

// ---------------------------------------------------------------- graft train mlp
struct MlpArgs {
  graft::tools::TrainFlags train;  // --steps, --run-dir, --resume, ... (tools/train_flags.h)
  double lr = 0.03;
  int64_t batch = 64;
  int64_t hidden = 128;
  int64_t points = 200;
  double noise = 0.02;
  double weight_decay = 0.0;
  std::string schedule = "cosine";
  int64_t warmup = 0;
  bool compile = false;  // trace the step with graft::compile (tools/cmd_compile.cpp)
};

// The run's configuration as saved with it (config.json): the common trainer flags and the
// model's, keyed by their long names so that --config takes the file back.
std::string mlp_config_json(const MlpArgs& a) {
  nlohmann::ordered_json j = graft::tools::train_config("mlp", a.train);
  j["lr"] = a.lr;
  j["batch"] = a.batch;
  j["hidden"] = a.hidden;
  j["points"] = a.points;
  j["noise"] = a.noise;
  j["weight-decay"] = a.weight_decay;
  j["schedule"] = a.schedule;
  j["warmup"] = a.warmup;
  return j.dump();
}

double accuracy(const graft::Tensor& logits, const graft::Tensor& y) {
  return graft::mean(graft::eq(graft::argmax(logits, 1), y).to(graft::DType::f32)).item();
}

int cmd_train_mlp(const MlpArgs& a) {
  using namespace graft;
  const tools::TrainFlags& f = a.train;
  tools::set_threads(f);
  const int64_t micro = a.batch / f.grad_accumulation;
  {  // weights, gradients and AdamW's two moments, in float32: refuse before allocating
    const double params = double(a.hidden) * double(a.hidden + 5) + 2;
    const double need = 16 * params;
    const double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
    GRAFT_CHECK(have <= 0 || need < 0.5 * have,
                "train mlp: --hidden {} means {:.0f}M parameters, {:.1f} GiB for weights, gradients "
                "and AdamW state; this machine has {:.1f} GiB of memory",
                a.hidden, params / 1e6, need / double(1 << 30), have / double(1 << 30));
  }

  Generator data_gen(uint64_t(f.seed));
  const data::Spirals ds = data::make_spirals(a.points, a.noise, data_gen);
  manual_seed(uint64_t(f.seed));  // parameter init draws from the default generator
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(2, a.hidden), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(a.hidden, a.hidden), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(a.hidden, 2));
  const Device dev = tools::train_device(f.device);
  GRAFT_CHECK(!a.compile || dev.is_cpu(),
              "train mlp: --compile runs on the CPU only; drop --device {} (or GRAFT_DEVICE)",
              dev.str());
  model->to(dev);  // before the optimizer takes the parameters
  const Tensor all_x = ds.x.to(dev), all_y = ds.y.to(dev);
  nn::CrossEntropyLoss ce;
  optim::AdamW opt(model->parameters(), {.lr = a.lr, .weight_decay = a.weight_decay});
  std::unique_ptr<optim::LRScheduler> sched;
  if (a.schedule == "cosine")
    sched = std::make_unique<optim::CosineWithWarmup>(opt, a.warmup, f.steps);
  Generator batch_gen(uint64_t(f.seed) + 1);

  fmt::print("two spirals: {} points, MLP 2 -> {} -> {} -> 2 (tanh), {} parameters\n",
             ds.x.size(0), a.hidden, a.hidden, model->num_parameters());
  fmt::print("AdamW lr {} ({} schedule), batch {}{}, {} steps, seed {}{}\n", a.lr, a.schedule,
             a.batch,
             f.grad_accumulation > 1 ? fmt::format(" ({} x {})", f.grad_accumulation, micro) : "",
             f.steps, f.seed, f.run_dir.empty() ? "" : ", run directory " + f.run_dir);
  if (!dev.is_cpu()) fmt::print("device: {}\n", dev.str());
  std::fflush(stdout);

  if (a.compile)
    return tools::train_mlp_compiled(*model, opt, sched.get(), ds, micro, batch_gen, f.steps,
                                     f.eval_every);

  nn::TrainerOptions to = tools::to_trainer_options(f);
  if (a.schedule == "cosine") tools::schedule_spans_steps(to);  // the cosine ends at --steps
  to.config_json = mlp_config_json(a);
  to.items_name = "samples";
  nn::Trainer trainer(
      to, *model, opt, sched.get(),
      [&](int64_t, int) -> nn::MicroBatchLoss {
        data::Batch b = data::sample_batch(ds.x, ds.y, micro, batch_gen);
        // under mpirun: this rank's rows of the (same) global micro-batch
        const dist::Range mine = dist::shard(micro, "the micro-batch (--batch / --grad-accumulation)");
        const Tensor x = b.x.narrow(0, mine.begin, mine.count), y = b.y.narrow(0, mine.begin, mine.count);
        AutocastGuard ac(f.bf16 ? Precision::bf16 : Precision::f32);
        return {ce(model->forward(x.to(dev)), y.to(dev)), mine.count};
      },
      [&] {
        Tensor logits = model->forward(all_x);
        return std::map<std::string, double>{{"loss", ce(logits, all_y).item()},
                                             {"accuracy", accuracy(logits, all_y)}};
      });
  trainer.register_generator("batches", batch_gen);
  const nn::TrainResult r = trainer.fit();

  double acc = 0, loss = 0;
  {
    NoGradGuard no_grad;
    model->eval();
    Tensor logits = model->forward(all_x);
    acc = accuracy(logits, all_y);
    loss = ce(logits, all_y).item();
  }
  fmt::print("final train accuracy: {:.2f}% ({} points), loss {:.4f}, after {} steps ({})\n",
             100 * acc, ds.x.size(0), loss, r.step, nn::stop_reason_name(r.reason));
  if (!f.run_dir.empty())
    fmt::print("run directory: {} (metrics.jsonl, checkpoint/); plot it with: graft plot {}\n",
               f.run_dir, f.run_dir);
  return nn::exit_status(r.reason);
}

struct PlotArgs {
  std::vector<std::string> run_dirs;
  int width = 640, height = 400;
  std::string out, x = "step";
  std::vector<std::string> labels;
};

// One run without --out: RUN_DIR/loss.{png,svg}; several runs (or --out): OUT.{png,svg}.
int cmd_plot(const PlotArgs& a) {
  std::vector<std::string> files;
  const graft::tools::PlotOptions po{.panel_width = a.width, .panel_height = a.height};
  try {
    if (a.run_dirs.size() == 1 && a.out.empty() && a.labels.empty() && a.x == "step") {
      files = graft::tools::plot_run(a.run_dirs[0], po);
    } else {
      GRAFT_CHECK(!a.out.empty(), "plot: {} needs --out NAME (writes NAME.png and NAME.svg)",
                  a.run_dirs.size() > 1 ? "comparing runs" : "--labels or --x time");
      files = graft::tools::plot_compare(a.run_dirs, a.out, {.panel = po, .labels = a.labels, .x_time = a.x == "time"});
    }
  } catch (...) {
    graft::tools::release_plot_caches();
    throw;
  }
  graft::tools::release_plot_caches();  // the process ends here: leave nothing for leak checkers
  fmt::print("wrote {}\n", fmt::join(files, " and "));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Under mpirun: MPI for the whole command; rank 0 alone prints results (nn/distributed.h).
  graft::dist::Session mpi(&argc, &argv);
  if (graft::dist::rank() > 0 && !std::freopen("/dev/null", "w", stdout))
    std::fprintf(stderr, "graft: rank %d: cannot silence stdout\n", graft::dist::rank());
  const auto on_error = [](int rc) {  // one rank's error ends every rank (no hang in a collective)
    if (graft::dist::world_size() > 1) {
      std::fflush(nullptr);
      graft::dist::abort_all(rc);
    }
    return rc;
  };
  CLI::App app{"graft: a small C++20 deep-learning framework (autodiff, compile-time graphs)",
               "graft"};
  app.set_version_flag("--version", std::string("graft ") + GRAFT_VERSION);
  app.require_subcommand(0, 1);

  std::string filter;
  bool missing_only = false;
  CLI::App* ops = app.add_subcommand("ops", "List the op table: devices, differentiable, gradcheck cases");
  ops->add_option("filter", filter, "Show only ops whose name contains this text");
  ops->add_flag("--missing", missing_only, "Show only ops without gradcheck cases");
  bool ops_json = false, devices_json = false;
  ops->add_flag("--json", ops_json, "Print the table as JSON (name, devices, differentiable, gradcheck_cases)");
  CLI::App* devices = app.add_subcommand("devices", "List the devices this build can run on");
  devices->add_flag("--json", devices_json, "Print the devices as JSON (name, kind, available, memory_bytes, ...)");
  CLI::App* version = app.add_subcommand("version", "Print the version and build configuration");
  std::vector<std::string> help_path;
  CLI::App* help = app.add_subcommand("help", "List every subcommand, or show one's help: graft help train seq2seq");
  help->add_option("command", help_path, "The subcommand (and its subcommand) to explain");

  CLI::App* train = app.add_subcommand("train", "Train a model with nn::Trainer (progress, metrics, checkpoints, resume)");
  train->require_subcommand(1);
  MlpArgs mlp_args;
  CLI::App* mlp = train->add_subcommand(
      "mlp", "The two-spirals MLP (Linear-Tanh-Linear-Tanh-Linear, cross-entropy, AdamW)");
  mlp->footer(
      "\nThe run directory gets metrics.jsonl (one JSON object per step and per evaluation),\n"
      "config.json, best_model.safetensors and checkpoint/ (see nn/trainer.h); draw it with\n"
      "'graft plot DIR'. Ctrl-C finishes the current step, saves a checkpoint and exits with\n"
      "status 130; --resume continues from it with bit-identical losses.");
  {
    MlpArgs& a = mlp_args;
    const auto every = CLI::Range(int64_t(0), int64_t(1) << 40);
    mlp->add_option("--lr", a.lr, "Peak learning rate of AdamW")->capture_default_str()->check(graft::tools::finite_in(1e-12, 1e3));
    mlp->add_option("--batch", a.batch, "Samples per step, drawn with replacement")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1000000)));
    mlp->add_option("--hidden", a.hidden, "Width of the two hidden layers")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000)));
    mlp->add_option("--points", a.points, "Points per spiral")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1000000)));
    mlp->add_option("--noise", a.noise, "Std of the Gaussian noise added to the points")->capture_default_str()->check(graft::tools::finite_in(0.0, 10.0));
    mlp->add_option("--weight-decay", a.weight_decay, "AdamW's decoupled weight decay")->capture_default_str()->check(graft::tools::finite_in(0.0, 1e3));
    mlp->add_option("--schedule", a.schedule, "Learning-rate schedule: cosine (with --warmup) or constant")->capture_default_str()->check(CLI::IsMember({"cosine", "constant"}));
    mlp->add_option("--warmup", a.warmup, "Linear warmup steps of the cosine schedule")->capture_default_str()->check(every);
    mlp->add_flag("--compile", a.compile, "Trace the step (forward, loss, backward) once with graft::compile and replay it; no run directory, checkpoints or evaluations");
    graft::tools::add_train_flags(
        mlp, a.train,
        {.steps = 2000, .eval_every = 100, .clip_grad_norm = 0.0, .run_dir = "runs/mlp",
         .eval_help = "loss and accuracy on the whole set"},
        [&a] {
          const graft::tools::TrainFlags& f = a.train;
          graft::tools::require_divisible(a.batch, "--batch", f);
          if (a.schedule == "cosine" && a.warmup >= f.steps)
            throw CLI::ValidationError("--warmup", fmt::format("{} must be below --steps {}", a.warmup, f.steps));
          if (a.compile && (f.grad_accumulation != 1 || f.clip_grad_norm != 0 || f.patience != 0 ||
                            f.resume || f.time_budget != 0 || f.bf16))
            throw CLI::ValidationError("--compile", "the traced loop has no --grad-accumulation, "
                                       "--clip-grad-norm, --patience, --resume, --time-budget or --bf16 "
                                       "(train without --compile for them)");
        });
  }

  PlotArgs pa;
  CLI::App* plot = app.add_subcommand("plot", "Draw a run's metrics.jsonl into RUN_DIR/loss.png and RUN_DIR/loss.svg, or compare runs (--out NAME)");
  plot->add_option("run_dir", pa.run_dirs, "Run directories (as given to graft train --run-dir); several: one curve each")->required();
  plot->add_option("--out", pa.out, "Compare the runs into NAME.png and NAME.svg");
  plot->add_option("--labels", pa.labels, "Comparison: one legend label per run (default: directory names)")->delimiter(',');
  plot->add_option("--x", pa.x, "Comparison: x axis, step or time (the seconds of metrics.jsonl's elapsed)")->capture_default_str()->check(CLI::IsMember({"step", "time"}));
  plot->add_option("--width", pa.width, "Width of each panel in pixels")->capture_default_str()->check(CLI::Range(200, 4000));
  plot->add_option("--height", pa.height, "Height of each panel in pixels")->capture_default_str()->check(CLI::Range(150, 4000));

  graft::tools::Commands extra;  // subcommands defined in tools/cmd_*.cpp (tools/commands.h)
#define GRAFT_CALL_REGISTRAR(fn) graft::tools::fn(app, *train, extra);
  GRAFT_TOOL_REGISTRARS(GRAFT_CALL_REGISTRAR)
#undef GRAFT_CALL_REGISTRAR

  try {
    app.parse(argc, argv);  // --config files are read here too (tools/train_flags.h)
  } catch (const CLI::ParseError& e) {
    // A first word that is not a subcommand reads better as "unknown subcommand".
    auto known = app.get_subcommands([&](CLI::App* s) { return argc > 1 && s->check_name(argv[1]); });
    if (dynamic_cast<const CLI::ExtrasError*>(&e) && argc > 1 && argv[1][0] != '-' && known.empty()) {
      fmt::print(stderr, "graft: unknown subcommand '{}'; run 'graft --help' for the list\n",
                 argv[1]);
      return 2;
    }
    int rc = app.exit(e);  // prints help/version (rc 0) or the error message
    return rc == 0 ? 0 : 2;
  } catch (const std::exception& e) {  // anything else while reading the command line is usage
    fmt::print(stderr, "graft: error: {}\n", e.what());
    return 2;
  }

  // One Ctrl-C policy for the commands that poll it (training, evaluation, decoding): the first
  // SIGINT/SIGTERM asks them to stop at the next safe point, a second one quits at once.
  std::optional<graft::nn::InterruptHandler> on_ctrl_c;
  if (train->parsed() || app.got_subcommand("translate")) on_ctrl_c.emplace();
  try {
    if (ops->parsed()) return cmd_ops(filter, missing_only, ops_json);
    if (devices->parsed()) return cmd_devices(devices_json);
    if (version->parsed()) return cmd_version();
    if (help->parsed()) {
      CLI::App* at = &app;
      for (const std::string& w : help_path) {
        CLI::App* next = nullptr;
        for (CLI::App* s : at->get_subcommands([](CLI::App*) { return true; }))
          if (s->check_name(w)) next = s;
        if (!next) {
          fmt::print(stderr, "graft help: no subcommand '{}'; run 'graft help' for the list\n", w);
          return 2;
        }
        at = next;
      }
      fmt::print("{}", at->get_formatter()->make_help(at, at->get_name(), CLI::AppFormatMode::Normal));
      return 0;
    }
    if (mlp->parsed()) return cmd_train_mlp(mlp_args);
    if (plot->parsed()) return cmd_plot(pa);
    for (auto& c : extra)
      if (c.app->parsed()) return c.run();
    fmt::print("{}", app.help());
    return 0;
  } catch (const graft::nn::Interrupted& e) {  // Ctrl-C outside a training loop
    fmt::print(stderr, "graft: interrupted ({})\n", e.what());
    return 130;
  } catch (const graft::Error& e) {
    fmt::print(stderr, "graft: error{}: {}\n", rank_tag(), e.what());
    return on_error(1);
  } catch (const std::exception& e) {
    fmt::print(stderr, "graft: internal error{}: {}\n", rank_tag(), e.what());
    return on_error(1);
  }
}
