// `graft train transformer`: the encoder-decoder Transformer on a synthetic task (copy, reverse,
// sort, date), label-smoothed cross-entropy, Adam with the Noam warmup schedule, bucketed
// batches; held-out exact match with greedy and beam (KV-cached) decoding.
// `graft train gpt`: a GPT-style causal LM on the date task's lines ("source -> target"),
// character level; validation perplexity and seeded samples.
// A plain training loop (progress on stderr, one line per --log-every steps); --run-dir writes
// model.safetensors, vocab.txt and config.json at the end.
#include <omp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>

#include "autograd/grad_mode.h"
#include "data/batching.h"
#include "data/seq2seq_tasks.h"
#include "data/tokenizer.h"
#include "models/gpt.h"
#include "models/transformer.h"
#include "nn/clip.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/scheduler.h"
#include "ops/error.h"
#include "tools/commands.h"

namespace graft::tools {

namespace {

struct Args {
  std::string task = "date";
  int64_t steps = 2000, batch = 64, seed = 1, threads = 2, log_every = 100;
  int64_t d_model = 128, heads = 4, layers = 2, ffn = 512, warmup = 400;
  double dropout = 0.1, label_smoothing = 0.1, lr_scale = 1.0, clip = 1.0;
  int64_t train_size = 20000, test_size = 500, min_len = 3, max_len = 10, symbols = 10, beam = 4;
  bool pre_norm = false;
  std::string run_dir;
};

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void save_run(const std::string& dir, nn::Module& m, const data::Tokenizer& tok, const std::string& config) {
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  nn::save_safetensors(dir + "/model.safetensors", m.state_dict());
  tok.vocab().save(dir + "/vocab.txt");
  std::ofstream(dir + "/config.json") << config << "\n";
  fmt::print("saved {}/model.safetensors, vocab.txt, config.json\n", dir);
}

int train_transformer(const Args& a) {
  omp_set_num_threads(int(a.threads));
  manual_seed(uint64_t(a.seed));
  data::TaskSplit split = data::make_task_split(
      a.task, a.train_size, 200, a.test_size,
      {.min_len = a.min_len, .max_len = a.max_len, .num_symbols = a.symbols}, a.min_len, a.max_len,
      uint64_t(a.seed));
  std::vector<std::string> texts;
  for (const auto& e : split.train) texts.push_back(e.source), texts.push_back(e.target);
  data::CharTokenizer tok = data::CharTokenizer::fit(texts);  // one joint vocabulary
  std::vector<std::vector<int64_t>> xs, ys;
  std::vector<int64_t> lengths;
  for (const auto& e : split.train) {
    xs.push_back(tok.encode(e.source));
    ys.push_back(tok.encode(e.target));
    lengths.push_back(int64_t(xs.back().size()));
  }
  int64_t longest = 0;
  for (const auto& e : split.test) longest = std::max<int64_t>(longest, int64_t(tok.encode(e.target).size()));
  for (const auto& e : split.train) longest = std::max<int64_t>(longest, int64_t(tok.encode(e.source).size()));
  models::TransformerOptions mo{.src_vocab = tok.vocab().size(), .tgt_vocab = tok.vocab().size(),
                                .d_model = a.d_model, .nhead = a.heads,
                                .num_encoder_layers = a.layers, .num_decoder_layers = a.layers,
                                .dim_feedforward = a.ffn, .dropout = a.dropout,
                                .norm_first = a.pre_norm, .share_embeddings = true,
                                .max_len = 2 * longest + 16};
  models::Transformer model(mo);
  optim::Adam opt(model.parameters(), {.lr = 1.0, .beta2 = 0.98, .eps = 1e-9});
  optim::Noam sched(opt, a.d_model, a.warmup, a.lr_scale);
  fmt::print("task {}: {} train / {} test pairs, vocab {}; {}, {} parameters; {} steps of {}, "
             "{} thread(s)\n",
             a.task, split.train.size(), split.test.size(), mo.src_vocab, model.repr(),
             model.num_parameters(), a.steps, a.batch, a.threads);
  std::fflush(stdout);
  const auto t0 = Clock::now();
  int64_t epoch = -1, pos = 0, tokens = 0;
  std::vector<std::vector<int64_t>> batches;
  for (int64_t step = 1; step <= a.steps; ++step) {
    if (pos >= int64_t(batches.size())) {
      Generator g(uint64_t(a.seed) * 7919u + uint64_t(++epoch));
      batches = data::bucket_batches(lengths, a.batch, g);
      pos = 0;
    }
    std::vector<std::vector<int64_t>> src, tgt;
    for (int64_t i : batches[size_t(pos++)]) src.push_back(xs[size_t(i)]), tgt.push_back(ys[size_t(i)]);
    data::Seq2SeqBatch b = data::make_seq2seq_batch(src, tgt);
    opt.zero_grad();
    models::TransformerLoss l = model.loss(b, a.label_smoothing);
    l.loss.backward();
    if (a.clip > 0) nn::clip_grad_norm_(model.parameters(), a.clip);
    opt.step();
    sched.step();
    tokens += l.tokens;
    if (step % a.log_every == 0 || step == a.steps)
      fmt::print(stderr, "step {:6d}  loss {:.4f}  nll {:.4f}  lr {:.2e}  {:.0f} tgt tok/s\n", step,
                 l.loss.item<double>(), l.nll, sched.get_last_lr()[0], double(tokens) / since(t0));
  }
  const double train_s = since(t0);
  std::vector<std::vector<int64_t>> tx;
  for (const auto& e : split.test) tx.push_back(tok.encode(e.source));
  for (int64_t beam : {int64_t(1), a.beam}) {
    const auto t1 = Clock::now();
    auto hyps = model.translate(tx, {.beam = beam, .max_len = longest + 4});
    int64_t correct = 0;
    for (size_t i = 0; i < tx.size(); ++i) correct += tok.decode(hyps[i].tokens) == split.test[i].target;
    fmt::print("test exact match ({}): {:.2f}% ({} / {}), decoded in {:.1f} s\n",
               beam == 1 ? std::string("greedy") : fmt::format("beam {}", beam),
               100.0 * double(correct) / double(tx.size()), correct, tx.size(), since(t1));
    if (beam == a.beam && beam == 1) break;
  }
  fmt::print("trained {} steps in {:.1f} s\n", a.steps, train_s);
  save_run(a.run_dir, model, tok, mo.to_json());
  return 0;
}

int train_gpt(const Args& a) {
  omp_set_num_threads(int(a.threads));
  manual_seed(uint64_t(a.seed));
  Generator g(uint64_t(a.seed));
  auto lines = [&](int64_t n) {
    std::vector<std::string> out;
    for (const auto& e : data::make_task("date", n, {}, g)) out.push_back(e.source + " -> " + e.target);
    return out;
  };
  std::vector<std::string> train = lines(a.train_size), valid = lines(200);
  data::CharTokenizer tok = data::CharTokenizer::fit(train);
  const int64_t L = 64;  // context
  auto stream = [&](const std::vector<std::string>& ls) {
    std::vector<int64_t> ids;
    for (const auto& s : ls) {
      auto e = tok.encode(s, false, true);  // each line ends with <eos>
      ids.insert(ids.end(), e.begin(), e.end());
    }
    return ids;
  };
  const std::vector<int64_t> tr = stream(train), va = stream(valid);
  models::GPT lm({.vocab = tok.vocab().size(), .d_model = a.d_model, .nhead = a.heads,
                  .num_layers = a.layers, .dim_feedforward = a.ffn, .dropout = a.dropout, .max_len = L + 32});
  optim::AdamW opt(lm.parameters(), {.lr = 1.0});
  optim::Noam sched(opt, a.d_model, a.warmup, a.lr_scale);
  fmt::print("gpt on date lines: {} train / {} valid characters, vocab {}; {}, {} parameters\n", tr.size(),
             va.size(), tok.vocab().size(), lm.repr(), lm.num_parameters());
  std::fflush(stdout);
  auto window = [&](const std::vector<int64_t>& ids, int64_t B, Generator& gen) {
    std::vector<int64_t> w;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t start = int64_t(philox_uniform(gen.seed, gen.advance(1)) * double(ids.size() - L - 1));
      w.insert(w.end(), ids.begin() + start, ids.begin() + start + L + 1);
    }
    return from_vector(w, {B, L + 1});
  };
  const auto t0 = Clock::now();
  for (int64_t step = 1; step <= a.steps; ++step) {
    opt.zero_grad();
    Tensor loss = lm.loss(window(tr, a.batch, g));
    loss.backward();
    if (a.clip > 0) nn::clip_grad_norm_(lm.parameters(), a.clip);
    opt.step();
    sched.step();
    if (step % a.log_every == 0 || step == a.steps)
      fmt::print(stderr, "step {:6d}  loss {:.4f}  lr {:.2e}  {:.0f} tok/s\n", step, loss.item<double>(),
                 sched.get_last_lr()[0], double(step * a.batch * L) / since(t0));
  }
  lm.eval();
  double nll = 0;
  {
    NoGradGuard ng;
    Generator vg(99);
    for (int i = 0; i < 8; ++i) nll += lm.loss(window(va, 16, vg)).item<double>() / 8.0;
  }
  fmt::print("validation perplexity {:.3f} (nll {:.4f} per character)\n", std::exp(nll), nll);
  for (uint64_t s = 0; s < 3; ++s) {
    auto out = lm.generate(tok.encode("1"), 40, {.temperature = 0.8, .top_k = 20, .seed = s, .eos = data::kEos});
    fmt::print("sample {}: 1{}\n", s, tok.decode(out));
  }
  save_run(a.run_dir, lm, tok, "{}");
  return 0;
}

void add_common(CLI::App* t, Args& a) {
  t->add_option("--steps", a.steps, "Optimizer steps")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000000)));
  t->add_option("--batch", a.batch, "Sequences per step")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000)));
  t->add_option("--d-model", a.d_model, "Model width")->capture_default_str()->check(CLI::Range(int64_t(2), int64_t(65536)));
  t->add_option("--heads", a.heads, "Attention heads (must divide --d-model)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1024)));
  t->add_option("--layers", a.layers, "Layers (each of encoder and decoder)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(64)));
  t->add_option("--ffn", a.ffn, "Feed-forward width")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1 << 20)));
  t->add_option("--dropout", a.dropout, "Dropout")->capture_default_str()->check(CLI::Range(0.0, 0.95));
  t->add_option("--warmup", a.warmup, "Noam warmup steps")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000000)));
  t->add_option("--lr-scale", a.lr_scale, "Noam scale: lr = scale d^-0.5 min(n^-0.5, n w^-1.5)")->capture_default_str()->check(CLI::Range(1e-6, 1e3));
  t->add_option("--clip-grad-norm", a.clip, "Clip the gradient norm (0 = off)")->capture_default_str()->check(CLI::Range(0.0, 1e6));
  t->add_option("--train-size", a.train_size, "Training examples")->capture_default_str()->check(CLI::Range(int64_t(10), int64_t(100000000)));
  t->add_option("--seed", a.seed, "Seed")->capture_default_str()->check(CLI::NonNegativeNumber);
  t->add_option("--threads", a.threads, "OpenMP threads")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(256)));
  t->add_option("--log-every", a.log_every, "Progress line every N steps")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000000)));
  t->add_option("--run-dir", a.run_dir, "Write model.safetensors, vocab.txt, config.json here");
}

}  // namespace

void register_transformer_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
  auto a = std::make_shared<Args>();
  CLI::App* t = train.add_subcommand("transformer", "Encoder-decoder Transformer on copy/reverse/sort/date (Noam schedule, label smoothing, KV-cached beam search)");
  t->add_option("--task", a->task, "copy, reverse, sort or date")->capture_default_str()->check(CLI::IsMember({"copy", "reverse", "sort", "date"}));
  add_common(t, *a);
  t->add_option("--label-smoothing", a->label_smoothing, "Label smoothing")->capture_default_str()->check(CLI::Range(0.0, 0.99));
  t->add_flag("--pre-norm", a->pre_norm, "Pre-norm layers (default: post-norm, as in the paper)");
  t->add_option("--test-size", a->test_size, "Held-out test pairs")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(10000000)));
  t->add_option("--min-len", a->min_len, "copy/reverse/sort: shortest source")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(10000)));
  t->add_option("--max-len", a->max_len, "copy/reverse/sort: longest source")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(10000)));
  t->add_option("--symbols", a->symbols, "copy/reverse/sort alphabet size (2..36)")->capture_default_str()->check(CLI::Range(int64_t(2), int64_t(36)));
  t->add_option("--beam", a->beam, "Beam width of the second test decode")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100)));
  cmds.push_back({t, [a] { return train_transformer(*a); }});

  auto g = std::make_shared<Args>();
  g->layers = 4;
  g->train_size = 5000;
  CLI::App* tg = train.add_subcommand("gpt", "GPT-style causal LM on the date task's lines (character level): perplexity and samples");
  add_common(tg, *g);
  cmds.push_back({tg, [g] { return train_gpt(*g); }});
  (void)app;
}

}  // namespace graft::tools
