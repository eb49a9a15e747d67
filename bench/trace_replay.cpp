// trace_replay: an MLP training step (forward, cross-entropy, backward into existing .grad)
// replayed from a graft::compile plan vs the same step run eagerly on the tape.
//
// JSON lines: name, value, unit, reference, ratio.
//  * trace_replay_<mlp>_time: median microseconds per step, replay (value) vs eager (reference);
//    ratio = eager / replay (issue target: >= 1.3 on the MLP step at batch 32).
//  * trace_replay_<mlp>_peak_bytes: bytes of intermediates alive at the peak: the plan's arena
//    plus its pinned outputs (value) vs the most bytes of storage made during an eager step alive
//    at once (reference, measured with a StorageObserver); ratio = value / reference (target
//    <= 0.7).
//  * trace_replay_transformer_time: the Transformer training step (bench_transformer's, dropout
//    on), replay (value; replay_onednn with oneDNN matmuls) against the eager step (reference);
//    ratio = eager / replay (issue target: a traced Transformer step is not slower than eager).
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <omp.h>

#include "ops/threads.h"
#include "autograd/compile.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "data/batching.h"
#include "models/transformer.h"
#include "ops/random.h"

using namespace graft;

namespace {

std::shared_ptr<nn::Sequential> make_mlp(const std::vector<int64_t>& sizes) {
  manual_seed(1);
  auto m = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    m->push_back(std::make_shared<nn::Linear>(sizes[i], sizes[i + 1]));
    if (i + 2 < sizes.size()) m->push_back(std::make_shared<nn::Tanh>());
  }
  return m;
}

// Live bytes of the storages made while installed, and their peak.
struct LiveBytes final : StorageObserver {
  size_t live = 0, peak = 0;
  void on_create(const Storage& s) override { peak = std::max(peak, live += s.nbytes()); }
  void on_destroy(const Storage& s) override { live -= std::min(live, s.nbytes()); }
};

template <class F> double median_us(F&& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void run(const std::vector<int64_t>& sizes, int64_t B, int reps) {
  std::string name = "mlp";
  for (int64_t s : sizes) name += fmt::format("_{}", s);
  name += fmt::format("_b{}", B);
  auto model = make_mlp(sizes);
  Generator g(7);
  Tensor x = randn({B, sizes.front()}, {}, &g), y = randint(0, sizes.back(), {B}, &g);
  const std::vector<Tensor> in{x, y};
  {  // every parameter gets its .grad first (the step zeroes them in place)
    Tensor l = cross_entropy(model->forward(x), y);
    l.backward();
  }
  StepFunction eager = nn::cross_entropy_step(*model);
  // Eager with graft's own matmul kernel: the kernels a default plan replays (oneDNN's execute
  // allocates, so plans avoid it), i.e. the comparison that isolates what compiling buys.
  auto eager_own = [&](const std::vector<Tensor>& v) {
    cpu::set_use_onednn(false);
    eager(v);
    cpu::set_use_onednn(true);
  };
  CompiledFunction step = compile(nn::cross_entropy_step(*model), model->parameters());
  CompiledFunction step_dnnl = compile(nn::cross_entropy_step(*model), model->parameters(), {.onednn = true});
  step(in);  // trace
  step_dnnl(in);
  const trace::Graph& plan = *step.plan_for(in);
  // the same loss (the plan replays the eager kernels; oneDNN's rounding differs slightly)
  cpu::set_use_onednn(false);
  const double le = eager(in)[0].item<double>();
  cpu::set_use_onednn(true);
  const double lr = step(in)[0].item<double>();

  for (int i = 0; i < 5; ++i) eager(in), eager_own(in), step(in), step_dnnl(in);  // warm-up
  const double t_eager = median_us([&] { eager_own(in); }, reps);
  const double t_replay = median_us([&] { step(in); }, reps);
  const double t_eager_dnnl = median_us([&] { eager(in); }, reps);
  const double t_replay_dnnl = median_us([&] { step_dnnl(in); }, reps);

  LiveBytes obs;
  StorageObserver* prev = set_storage_observer(&obs);
  eager(in);
  set_storage_observer(prev);
  const size_t replay_peak = plan.stats.arena_bytes + plan.stats.pinned_bytes;

  fmt::print("{{\"name\": \"trace_replay_{}_time\", \"value\": {:.1f}, \"unit\": \"us/step\", "
             "\"reference\": {:.1f}, \"reference_source\": \"eager tape step, same kernels (own "
             "matmul)\", \"ratio\": {:.2f}, \"kernels\": {}, \"fused_groups\": {}, "
             "\"loss_abs_diff\": {:.1e}, \"threads\": {}}}\n",
             name, t_replay, t_eager, t_eager / t_replay, plan.stats.live, plan.stats.fused_groups,
             std::abs(le - lr), graft::requested_threads());
  fmt::print("{{\"name\": \"trace_replay_{}_time_onednn\", \"value\": {:.1f}, \"unit\": "
             "\"us/step\", \"reference\": {:.1f}, \"reference_source\": \"eager tape step with "
             "oneDNN matmuls (the default)\", \"ratio\": {:.2f}, \"replay_own_matmul\": {:.1f}, "
             "\"ratio_default_replay_vs_default_eager\": {:.2f}}}\n",
             name, t_replay_dnnl, t_eager_dnnl, t_eager_dnnl / t_replay_dnnl, t_replay,
             t_eager_dnnl / t_replay);
  fmt::print("{{\"name\": \"trace_replay_{}_peak_bytes\", \"value\": {}, \"unit\": \"bytes\", "
             "\"reference\": {}, \"reference_source\": \"eager step: peak live bytes of storages "
             "made during the step\", \"ratio\": {:.2f}, \"arena\": {}, \"pinned\": {}, "
             "\"intermediates_sum\": {}}}\n",
             name, replay_peak, obs.peak, double(replay_peak) / double(std::max<size_t>(obs.peak, 1)),
             plan.stats.arena_bytes, plan.stats.pinned_bytes, plan.stats.intermediate_bytes);
  std::fflush(stdout);
}

// The Transformer training step of bench_transformer (3+3 layers, d 256, FFN 1024, vocab 8000,
// batch 32 x 64 tokens, dropout 0.1 everywhere, attention included): forward, loss, backward,
// replayed from a plan (with graft's own matmul, and with oneDNN's) against the eager step.
void run_transformer(int reps) {
  const int64_t V = 8000, B = 32, L = 64;
  manual_seed(0);
  models::Transformer model({.src_vocab = V, .tgt_vocab = V, .d_model = 256, .nhead = 4,
                             .num_encoder_layers = 3, .num_decoder_layers = 3,
                             .dim_feedforward = 1024, .dropout = 0.1, .tie_output = false, .max_len = L});
  model.train();
  Generator g(0);
  std::vector<std::vector<int64_t>> src(static_cast<size_t>(B)), tgt(static_cast<size_t>(B));
  for (size_t b = 0; b < size_t(B); ++b) {
    for (int64_t t = 0; t < L - 1; ++t) src[b].push_back(4 + int64_t(philox_uniform(g.seed, g.advance(1)) * double(V - 4)));
    tgt[b].assign(src[b].rbegin(), src[b].rend());
  }
  const data::Seq2SeqBatch batch = data::make_seq2seq_batch(src, tgt);
  const std::vector<Tensor> in{batch.src, batch.src_lengths, batch.src_key_padding_mask,
                               batch.tgt_in, batch.tgt_out, batch.tgt_lengths};
  std::vector<Tensor> state = model.parameters();
  for (auto& [n, t] : model.named_buffers()) state.push_back(t);
  StepFunction fn = [&](const std::vector<Tensor>& v) -> std::vector<Tensor> {
    {
      NoGradGuard ng;
      for (Tensor& p : model.parameters())
        if (p.grad().defined()) p.grad().zero_();
    }
    Tensor loss = model.loss(data::Seq2SeqBatch{v[0], v[1], v[2], v[3], v[4], v[5]}, 0.0).loss;
    loss.backward();
    return {loss};
  };
  fn(in);  // every parameter gets its .grad
  CompiledFunction step = compile(fn, state), step_dnnl = compile(fn, state, {.onednn = true});
  for (int i = 0; i < 2; ++i) fn(in), step(in), step_dnnl(in);  // trace, warm up
  const double t_eager = median_us([&] { fn(in); }, reps) / 1000;
  const double t_replay = median_us([&] { step(in); }, reps) / 1000;
  const double t_replay_dnnl = median_us([&] { step_dnnl(in); }, reps) / 1000;
  fmt::print("{{\"name\": \"trace_replay_transformer_time\", \"value\": {:.1f}, \"unit\": \"ms/step\", "
             "\"reference\": {:.1f}, \"reference_source\": \"eager tape step (oneDNN matmuls, the "
             "default)\", \"ratio\": {:.2f}, \"replay_onednn\": {:.1f}, \"ratio_onednn\": {:.2f}, "
             "\"kernels\": {}, \"threads\": {}}}\n",
             t_replay, t_eager, t_eager / t_replay, t_replay_dnnl, t_eager / t_replay_dnnl,
             step.plan_for(in)->stats.live, graft::requested_threads());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  // --no-transformer: the MLP steps only
  const bool transformer = !(argc > 1 && std::string(argv[1]) == "--no-transformer");
  run({784, 256, 256, 10}, 32, 200);  // the MLP step
  run({2, 64, 64, 2}, 32, 2000);      // the two-spirals MLP (graft train mlp): op overhead rules
  if (transformer) run_transformer(5);
  return 0;
}
