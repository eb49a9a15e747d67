// graft compile-info: traces an MLP training step with graft::compile and prints what the
// plan holds (kernel counts, dead code, fused groups, arena vs intermediates); --dot FILE
// writes the Graphviz graph. Also the traced training loop behind `graft train mlp --compile`.
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/compile.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/spirals.h"
#include "nn/interrupt.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "tools/commands.h"

namespace graft::tools {

namespace {

struct InfoArgs {
  std::string sizes = "784,256,256,10";
  int64_t batch = 32;
  int64_t tile_bytes = 8192;
  bool no_dce = false, no_fuse = false, no_reuse = false;
  std::string dot;
};

std::vector<int64_t> parse_sizes(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int64_t n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    GRAFT_CHECK(used == item.size() && used > 0 && n > 0 && n <= 100000,
                "compile-info: --sizes: '{}' is not a layer width in 1..100000 (expected e.g. "
                "784,256,256,10)",
                item);
    v.push_back(n);
  }
  GRAFT_CHECK(v.size() >= 2, "compile-info: --sizes needs at least an input and an output width, "
              "got '{}'", s);
  return v;
}

int cmd_compile_info(const InfoArgs& a) {
  const std::vector<int64_t> sizes = parse_sizes(a.sizes);
  manual_seed(1);
  nn::Sequential model;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    model.push_back(std::make_shared<nn::Linear>(sizes[i], sizes[i + 1]));
    if (i + 2 < sizes.size()) model.push_back(std::make_shared<nn::Tanh>());
  }
  Generator g(2);
  Tensor x = randn({a.batch, sizes.front()}, {}, &g), y = randint(0, sizes.back(), {a.batch}, &g);
  {  // give every parameter its .grad, so that the plan is the steady-state one
    Tensor l = cross_entropy(model.forward(x), y);
    l.backward();
  }
  CompileOptions opt;
  opt.dce = !a.no_dce;
  opt.fuse = !a.no_fuse;
  opt.reuse = !a.no_reuse;
  opt.in_place = !a.no_reuse;
  opt.tile_bytes = a.tile_bytes;
  CompiledFunction step = compile(nn::cross_entropy_step(model), model.parameters(), opt);
  step({x, y});
  const trace::Graph& plan = *step.plan_for({x, y});
  fmt::print("MLP {} training step, batch {} (forward, cross-entropy, backward)\n",
             fmt::join(sizes, "-"), a.batch);
  fmt::print("{}", plan.summary());
  if (!a.dot.empty()) {
    std::ofstream out(a.dot);
    GRAFT_CHECK(out.good(), "compile-info: cannot write '{}'", a.dot);
    out << plan.to_dot();
    GRAFT_CHECK(out.good(), "compile-info: writing '{}' failed", a.dot);
    fmt::print("wrote {} (render it with: dot -Tsvg {} -o step.svg)\n", a.dot, a.dot);
  }
  return 0;
}

}  // namespace

int train_mlp_compiled(nn::Module& model, optim::Optimizer& opt, optim::LRScheduler* sched,
                       const data::Spirals& ds, int64_t batch, Generator& batch_gen,
                       int64_t steps, int64_t print_every) {
  CompiledFunction step = compile(nn::cross_entropy_step(model), model.parameters());
  double loss = 0;
  for (int64_t s = 1; s <= steps; ++s) {
    nn::check_interrupt("training");  // no checkpoints here: Ctrl-C just stops (exit 130)
    data::Batch b = data::sample_batch(ds.x, ds.y, batch, batch_gen);
    loss = step({b.x, b.y})[0].item<double>();
    GRAFT_CHECK(std::isfinite(loss), "train mlp --compile: the loss is {} at step {}; hint: lower "
                "the learning rate", loss, s);
    opt.step();  // outside the traced step: its lr and bias corrections change every step
    if (sched) sched->step();
    if (print_every > 0 && (s % print_every == 0 || s == steps))
      fmt::print(stderr, "step {:>6}  loss {:.4f}\n", s, loss);
  }
  double acc = 0;
  {
    NoGradGuard ng;
    Tensor logits = model.forward(ds.x);
    acc = mean(eq(argmax(logits, 1), ds.y).to(DType::f32)).item<double>();
  }
  fmt::print("final train accuracy: {:.2f}% ({} points), last batch loss {:.4f}, after {} steps "
             "(traced {} time(s), replayed {})\n",
             100 * acc, ds.x.size(0), loss, steps, step.traces(), step.replays());
  return 0;
}

void register_compile_commands(CLI::App& app, CLI::App& /*train*/, Commands& cmds) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* c = app.add_subcommand(
      "compile-info", "Trace an MLP training step with graft::compile and show its plan");
  c->footer("\nPrints the kernels the plan replays (by kind), what dead-code elimination removed,\n"
            "the fused elementwise groups and the arena size against the sum of the\n"
            "intermediates eager mode allocates one by one. --dot FILE writes Graphviz DOT.");
  c->add_option("--sizes", args->sizes, "Layer widths, comma-separated (input,hidden...,classes)")->capture_default_str();
  c->add_option("--batch", args->batch, "Batch size")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000)));
  c->add_option("--tile-bytes", args->tile_bytes, "Bytes per buffer in a fused tile")->capture_default_str()->check(CLI::Range(int64_t(64), int64_t(1) << 30));
  c->add_flag("--no-dce", args->no_dce, "Keep dead kernels");
  c->add_flag("--no-fuse", args->no_fuse, "Do not fuse elementwise kernels");
  c->add_flag("--no-reuse", args->no_reuse, "Give every buffer its own arena bytes (no in-place, no reuse)");
  c->add_option("--dot", args->dot, "Write the traced graph as Graphviz DOT to this file");
  cmds.push_back({c, [args] { return cmd_compile_info(*args); }});
}

}  // namespace graft::tools
