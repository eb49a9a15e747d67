// `graft train gpt`: a GPT-style causal LM (models/gpt.h) at character level, trained with
// nn::Trainer (AdamW, Noam schedule, clipping) on random context windows of a token stream in
// which every line ends with <eos>. The text is the date task's lines ("source -> target") by
// default, or --data FILE: a text file (one line per document) or a TSV such as the Bible's
// (--side source = the English column, target = the Spanish one). Reports the validation
// perplexity (per character) over the whole validation stream and seeded samples.
//
//   graft data prepare bible-en-es
//   graft train gpt --data datasets/bible-en-es/train.tsv --valid-data datasets/bible-en-es/dev.tsv
//                   --context 128 --steps 3000 --run-dir runs/gpt-bible
//
// The run directory holds the trainer's files (metrics.jsonl, checkpoint/ for --resume), then
// model.safetensors (metadata "gpt": the options), vocab.txt and results.json.
#include <omp.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "data/parallel_corpus.h"
#include "data/seq2seq_tasks.h"
#include "data/tokenizer.h"
#include "models/gpt.h"
#include "nn/distributed.h"
#include "nn/interrupt.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/scheduler.h"
#include "nn/trainer.h"
#include "ops/error.h"
#include "ops/file_io.h"
#include "tools/cmd_transformer.h"
#include "tools/train_device.h"
#include "tools/train_flags.h"

namespace graft::tools {

namespace {

struct GptArgs {
  TrainFlags train;  // --steps, --run-dir, --resume, --time-budget, --bf16, ... (tools/train_flags.h)
  std::string data, valid_data, side = "source", prompt;
  int64_t batch = 32, context = 64;
  TransformerFlags model;  // --d-model, --heads, --dropout, --warmup, --lr-scale
  int64_t layers = 4, ffn = 0;
  double temperature = 0.8, top_p = 1.0;
  int64_t train_size = 5000, valid_lines = 200, eval_windows = 64;
  int64_t samples = 3, sample_len = 80, top_k = 20;
};

// The run's config.json: the trainer flags and this command's, by long name (--config reads it
// back as it is).
nlohmann::ordered_json gpt_config(const GptArgs& a) {
  nlohmann::ordered_json j = train_config("gpt", a.train);
  j["data"] = a.data;
  j["valid-data"] = a.valid_data;
  j["side"] = a.side;
  j["valid-lines"] = a.valid_lines;
  j["train-size"] = a.train_size;
  j["context"] = a.context;
  j["batch"] = a.batch;
  add_transformer_config(j, a.model);
  j["layers"] = a.layers;
  j["ffn"] = a.ffn;
  j["eval-windows"] = a.eval_windows;
  j["samples"] = a.samples;
  j["sample-len"] = a.sample_len;
  j["prompt"] = a.prompt;
  j["temperature"] = a.temperature;
  j["top-k"] = a.top_k;
  j["top-p"] = a.top_p;
  return j;
}

std::vector<std::string> read_lines(const std::string& path, const std::string& side, int64_t limit) {
  std::vector<std::string> out;
  if (path.size() > 4 && path.substr(path.size() - 4) == ".tsv") {
    for (const auto& e : data::read_parallel_tsv(path, limit)) out.push_back(side == "source" ? e.source : e.target);
    return out;
  }
  std::ifstream f(path);
  GRAFT_CHECK(f.good(), "train gpt: cannot read --data file '{}'", path);
  for (std::string line; std::getline(f, line) && (limit <= 0 || int64_t(out.size()) < limit);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<int64_t> stream(const data::Tokenizer& tok, const std::vector<std::string>& lines) {
  std::vector<int64_t> ids;
  for (const auto& s : lines) {
    auto e = tok.encode(s, false, true);  // each line ends with <eos>
    ids.insert(ids.end(), e.begin(), e.end());
  }
  return ids;
}

// Next-token cross-entropy per token over consecutive windows of `ids` (at most max_windows
// windows of L + 1 tokens, batches of 16): the whole stream when it fits. With `interruptible`
// (the final evaluation) a pending Ctrl-C throws nn::Interrupted between batches.
double stream_nll(models::GPT& lm, const std::vector<int64_t>& ids, int64_t L, int64_t max_windows,
                  bool interruptible = false) {
  const int64_t n = std::min<int64_t>((int64_t(ids.size()) - 1) / L, max_windows);
  double sum = 0;
  for (int64_t w = 0; w < n; w += 16) {
    if (interruptible) nn::check_interrupt("evaluation");
    const int64_t B = std::min<int64_t>(16, n - w);
    std::vector<int64_t> batch;
    for (int64_t b = 0; b < B; ++b) {
      const auto first = ids.begin() + long((w + b) * L);
      batch.insert(batch.end(), first, first + L + 1);
    }
    sum += lm.loss(from_vector(batch, {B, L + 1})).item<double>() * double(B);
  }
  return sum / double(std::max<int64_t>(n, 1));
}

int train_gpt(const GptArgs& a) {
  const TrainFlags& f = a.train;
  const auto t_start = std::chrono::steady_clock::now();
  set_threads(f);
  std::vector<std::string> train, valid;
  if (a.data.empty()) {  // the date task's lines
    Generator g(uint64_t(f.seed));
    for (const auto& e : data::make_task("date", a.train_size + a.valid_lines, {}, g))
      (int64_t(train.size()) < a.train_size ? train : valid).push_back(e.source + " -> " + e.target);
  } else {
    train = read_lines(a.data, a.side, 0);
    if (!a.valid_data.empty()) {
      valid = read_lines(a.valid_data, a.side, 0);
    } else {  // hold out the last lines
      const size_t n = std::min(train.size() / 2, size_t(a.valid_lines));
      valid.assign(train.end() - long(n), train.end());
      train.resize(train.size() - n);
    }
  }
  data::CharTokenizer tok = data::CharTokenizer::fit(train);
  const std::vector<int64_t> tr = stream(tok, train), va = stream(tok, valid);
  const int64_t L = a.context;
  GRAFT_CHECK(int64_t(tr.size()) > L + 1 && int64_t(va.size()) > L + 1,
              "train gpt: the training ({}) and validation ({}) text must hold more than --context + 1 = {} "
              "characters", tr.size(), va.size(), L + 1);
  const models::GPTOptions go{.vocab = tok.vocab().size(), .d_model = a.model.d_model, .nhead = a.model.heads,
                              .num_layers = a.layers, .dim_feedforward = a.ffn, .dropout = a.model.dropout,
                              .max_len = L};  // learned positions: only those trained on
  manual_seed(uint64_t(f.seed));
  models::GPT lm(go);
  const Device dev = train_device(f.device);
  // GPT::loss shifts the token windows with a strided slice, which OpenCL's index_select does
  // not take yet: refuse up front instead of failing inside the first step.
  GRAFT_CHECK(dev.is_cpu(), "train gpt: --device {}: the GPT training step runs on the CPU only "
              "for now; use --device cpu", dev.str());
  lm.to(dev);  // before the optimizer reads the parameters
  optim::AdamW opt(lm.parameters(), {.lr = 1.0});
  optim::Noam sched(opt, a.model.d_model, a.model.warmup, a.model.lr_scale);
  fmt::print("gpt on {}: {} train / {} valid characters, vocab {}; {}, {} parameters; {} steps of {} x {}, "
             "{} thread(s)\n",
             a.data.empty() ? std::string("date lines") : a.data, tr.size(), va.size(), tok.vocab().size(),
             lm.repr(), lm.num_parameters(), f.steps, a.batch, L, omp_get_max_threads());
  std::fflush(stdout);

  // the model's options, as model.safetensors' "gpt" metadata
  const nlohmann::ordered_json meta{{"vocab", go.vocab}, {"d_model", go.d_model}, {"nhead", go.nhead},
                                    {"num_layers", go.num_layers}, {"dim_feedforward", go.dim_feedforward},
                                    {"dropout", go.dropout}, {"max_len", go.max_len}, {"context", L}};
  Generator windows(uint64_t(f.seed) + 11);  // window starts; saved in checkpoints
  nn::TrainerOptions to = to_trainer_options(f);
  to.items_name = "tokens";
  to.early_stopping_metric = "nll";
  to.config_json = gpt_config(a).dump();
  // flags that only shape evaluation or sampling may change on --resume
  for (const char* k : {"eval-windows", "samples", "sample-len", "prompt", "temperature", "top-k", "top-p"})
    to.resume_may_change.push_back(k);
  const int64_t micro = a.batch / f.grad_accumulation;  // windows per micro-batch
  nn::Trainer trainer(
      to, lm, opt, &sched,
      [&](int64_t, int) -> nn::MicroBatchLoss {
        std::vector<int64_t> w;
        // under mpirun: every rank draws the whole micro-batch and keeps its own windows
        const dist::Range mine = dist::shard(micro, "the micro-batch (--batch / --grad-accumulation)");
        for (int64_t b = 0; b < micro; ++b) {
          const auto start = int64_t(philox_uniform(windows.seed, windows.advance(1)) * double(tr.size() - L - 1));
          if (b >= mine.begin && b < mine.begin + mine.count)
            w.insert(w.end(), tr.begin() + start, tr.begin() + start + L + 1);
        }
        AutocastGuard ac(f.bf16 ? Precision::bf16 : Precision::f32);  // --bf16: matmuls in bf16
        return {lm.loss(from_vector(w, {mine.count, L + 1}).to(dev)), mine.count * L};
      },
      [&]() -> std::map<std::string, double> {
        const double nll = with_model_on_cpu(lm, dev, [&] { return stream_nll(lm, va, L, a.eval_windows); });
        return {{"nll", nll}, {"perplexity", std::exp(nll)}};
      });
  trainer.register_generator("windows", windows);
  const nn::TrainResult r = trainer.fit();
  lm.to(Device::cpu());  // saving, evaluation and sampling run on the CPU
  const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (!f.run_dir.empty()) {  // saved first: Ctrl-C during the evaluation below loses nothing
    std::filesystem::create_directories(f.run_dir);
    nn::save_safetensors(f.run_dir + "/model.safetensors", lm.state_dict(), {{"gpt", meta.dump()}, {"tokenizer", "char"}});
    tok.vocab().save(f.run_dir + "/vocab.txt");
  }

  lm.eval();
  double nll = 0;
  {
    NoGradGuard ng;
    nll = stream_nll(lm, va, L, int64_t(1) << 40, /*interruptible=*/true);
  }
  fmt::print("validation perplexity {:.3f} (nll {:.4f} nats per character, {} characters)\n", std::exp(nll), nll,
             va.size());
  const std::string stop = nn::stop_reason_name(r.reason);
  nlohmann::ordered_json res{{"steps", r.step},  {"stop_reason", stop}, {"train_wall_s", train_s}, {"valid_nll", nll},
                             {"valid_perplexity", std::exp(nll)}, {"valid_characters", va.size()}};
  for (int64_t s = 0; s < a.samples; ++s) {
    nn::check_interrupt("sampling");
    // the prompt: --prompt, else the first 12 characters of a validation line (unseen text)
    const std::string p = !a.prompt.empty() ? a.prompt : valid[size_t(s) % valid.size()].substr(0, 12);
    auto ids = tok.encode(p);
    if (ids.empty()) ids.push_back(data::kUnk);
    if (int64_t(ids.size()) >= L) ids.resize(size_t(L - 1));
    const auto out = lm.generate(ids, std::min(a.sample_len, L - int64_t(ids.size())),
                                 {.temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p,
                                  .seed = uint64_t(f.seed + s), .eos = data::kEos});
    const std::string text = p + tok.decode(out);
    fmt::print("sample {}: {}\n", s, text);
    res["samples"].push_back(text);
  }
  fmt::print("{} steps in {:.1f} s ({})\n", r.step, train_s, stop);
  if (!f.run_dir.empty()) {
    atomic_write(f.run_dir + "/results.json", res.dump(1) + "\n", "train gpt");
    fmt::print("run directory {} (model.safetensors, vocab.txt, results.json, metrics.jsonl)\n", f.run_dir);
  }
  return nn::exit_status(r.reason);  // 130 when interrupted; --time-budget is done
}

}  // namespace

void register_gpt_command(CLI::App& train, Commands& cmds) {
  auto g = std::make_shared<GptArgs>();
  CLI::App* t = train.add_subcommand("gpt", "GPT-style causal LM, character level, on the date task's lines or --data FILE: perplexity and samples");
  const auto nonneg = CLI::Range(int64_t(0), int64_t(1) << 40);
  const auto count = CLI::Range(int64_t(1), int64_t(1) << 40);
  t->add_option("--data", g->data, "Text file (one line each) or TSV (e.g. datasets/bible-en-es/train.tsv); default: date lines");
  t->add_option("--valid-data", g->valid_data, "Validation text (default: the last --valid-lines lines of --data)");
  t->add_option("--side", g->side, "TSV column: source (English for the Bible) or target")->capture_default_str()->check(CLI::IsMember({"source", "target"}));
  t->add_option("--valid-lines", g->valid_lines, "Validation lines held out (date lines, or --data without --valid-data)")->capture_default_str()->check(count);
  t->add_option("--train-size", g->train_size, "Date lines to train on (without --data)")->capture_default_str()->check(count);
  t->add_option("--context", g->context, "Context window in characters")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(8192)));
  t->add_option("--batch", g->batch, "Windows per step")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000)));
  t->add_option("--layers", g->layers, "Blocks")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(64)));
  t->add_option("--ffn", g->ffn, "Feed-forward width (0 = 4 x --d-model)")->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1 << 20)));
  add_transformer_flags(t, g->model);
  t->add_option("--eval-windows", g->eval_windows, "Validation windows per periodic evaluation")->capture_default_str()->check(count);
  t->add_option("--samples", g->samples, "Samples to print")->capture_default_str()->check(nonneg);
  t->add_option("--sample-len", g->sample_len, "Most characters per sample (prompt + sample fit in --context)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(4096)));
  t->add_option("--prompt", g->prompt, "Sample prompt (default: the start of a validation line)");
  t->add_option("--temperature", g->temperature, "Sampling temperature (0 = greedy)")->capture_default_str()->check(finite_in(0.0, 100.0));
  t->add_option("--top-k", g->top_k, "Sample among the k most likely (0 = off)")->capture_default_str()->check(nonneg);
  t->add_option("--top-p", g->top_p, "Nucleus sampling mass")->capture_default_str()->check(finite_in(1e-6, 1.0));
  add_train_flags(t, g->train,
                  {.steps = 2000, .eval_every = 0, .clip_grad_norm = 1.0,
                   .eval_help = "validation perplexity on --eval-windows windows; the whole validation text at the end"},
                  [g] { require_divisible(g->batch, "--batch", g->train); });
  cmds.push_back({t, [g] { return train_gpt(*g); }});
}

}  // namespace graft::tools
