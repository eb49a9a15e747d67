// `graft train abcnn`: BCNN / ABCNN-1/2/3 (models/abcnn.h) on a sentence-pair task: WordNet
// gloss matching (data/pairs.h; prepared once into --data-dir from --wordnet-dir) or the tiny
// synthetic task. Reports dev/test accuracy, optionally writes one test pair's match-score
// heatmap (--heatmap FILE).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/pairs.h"
#include "models/abcnn.h"
#include "nn/optim.h"
#include "ops/error.h"
#include "tools/commands.h"
#include "tools/heatmap.h"
#include "tools/plot.h"

namespace graft::tools {

namespace {

struct AbcnnArgs {
  int variant = 1;
  int64_t blocks = 1;
  std::string output = "logistic";
  int64_t steps = 2000, batch = 32, eval_every = 500;
  double lr = 2e-3, weight_decay = 1e-4;
  int64_t embed_dim = 50, channels = 50, width = 3, max_len = 24, min_count = 2;
  std::string data = "wordnet";
  std::string data_dir = "out/wordnet-pairs";
  std::string wordnet_dir = "/usr/share/wordnet";
  int64_t seed = 1, threads = 0, heatmap_index = 0;
  std::string heatmap;
  bool prepare_only = false;
};

double evaluate(models::Abcnn& m, const std::vector<data::SentencePair>& pairs,
                const data::PairVocab& vocab) {
  NoGradGuard ng;
  m.eval();
  int64_t correct = 0;
  for (size_t i = 0; i < pairs.size(); i += 256) {
    std::vector<int64_t> idx(std::min<size_t>(256, pairs.size() - i));
    std::iota(idx.begin(), idx.end(), int64_t(i));
    data::PairBatch b = data::make_pair_batch(pairs, idx, vocab, m.config.max_len);
    Tensor pred = m.predict(m.forward_pair(b.a, b.b));
    correct += int64_t(sum(eq(pred, b.label).to(DType::f64)).item<double>());
  }
  m.train();
  return pairs.empty() ? 0.0 : double(correct) / double(pairs.size());
}

// The input-level match-score matrix of one pair (the attention matrix ABCNN-1/3 feed to their
// first convolution), cropped to the real words.
void write_pair_heatmap(models::Abcnn& m, const data::SentencePair& p, const data::PairVocab& vocab,
                        const std::string& path, models::AbcnnVariant v) {
  NoGradGuard ng;
  data::PairBatch b = data::make_pair_batch({p}, {0}, vocab, m.config.max_len);
  Tensor e0 = m.embed->forward(b.a).transpose(1, 2), e1 = m.embed->forward(b.b).transpose(1, 2);
  Tensor A = models::match_score(e0, e1).select(0, 0);  // [S, S]
  const int64_t r = b.len_a[0], c = b.len_b[0];
  Tensor crop = A.slice(0, 0, r).slice(1, 0, c).contiguous().to(DType::f32);
  std::vector<float> vals = crop.to_vector<float>();
  std::vector<std::string> rl(p.a.begin(), p.a.begin() + r), cl(p.b.begin(), p.b.begin() + c);
  write_heatmap_png(path, vals, r, c, rl, cl,
                    fmt::format("{}: match scores 1/(1+|x_i-y_j|), label {}", models::variant_name(v),
                                p.label));
}

int run_abcnn(const AbcnnArgs& a) {
  if (a.threads > 0) omp_set_num_threads(int(a.threads));
  const auto t0 = std::chrono::steady_clock::now();
  data::PairSplits d;
  if (a.data == "wordnet") {
    d = data::prepare_wordnet_pairs(a.wordnet_dir, a.data_dir, 1);
  } else {
    d.train = data::synthetic_pairs(4000, 1), d.dev = data::synthetic_pairs(500, 2),
    d.test = data::synthetic_pairs(500, 3);
  }
  const data::PairVocab vocab = data::PairVocab::build(d.train, a.min_count);
  std::fprintf(stderr, "abcnn: %s pairs: train %zu, dev %zu, test %zu; vocabulary %lld words\n",
               a.data.c_str(), d.train.size(), d.dev.size(), d.test.size(),
               static_cast<long long>(vocab.size()));
  if (a.prepare_only) return 0;
  GRAFT_CHECK(a.heatmap.empty() || (a.heatmap_index >= 0 && a.heatmap_index < int64_t(d.test.size())),
              "train abcnn: --heatmap-index {} out of range [0, {})", a.heatmap_index, d.test.size());

  manual_seed(uint64_t(a.seed));
  const auto variant = models::AbcnnVariant(a.variant);
  models::Abcnn model(models::AbcnnConfig{.vocab_size = vocab.size(), .embed_dim = a.embed_dim,
                                          .max_len = a.max_len, .width = a.width,
                                          .channels = a.channels, .blocks = a.blocks,
                                          .variant = variant, .output = a.output});
  optim::AdamW opt(model.parameters(), {.lr = a.lr, .weight_decay = a.weight_decay});
  std::fprintf(stderr, "abcnn: %s, %lld parameters\n", model.repr().c_str(),
               static_cast<long long>(model.num_parameters()));

  std::mt19937_64 rng(uint64_t(a.seed));
  std::vector<int64_t> order(d.train.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  size_t pos = 0;
  double best_dev = -1, test_at_best = 0, run_loss = 0;
  int64_t best_step = 0;
  for (int64_t step = 1; step <= a.steps; ++step) {
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < a.batch; ++i) {
      if (pos == order.size()) std::shuffle(order.begin(), order.end(), rng), pos = 0;
      idx.push_back(order[pos++]);
    }
    data::PairBatch b = data::make_pair_batch(d.train, idx, vocab, a.max_len);
    opt.zero_grad();
    Tensor loss = model.loss(model.forward_pair(b.a, b.b), b.label);
    loss.backward();
    opt.step();
    run_loss += loss.item<double>();
    if (step % a.eval_every == 0 || step == a.steps) {
      const double dev = evaluate(model, d.dev, vocab), test = evaluate(model, d.test, vocab);
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "abcnn: step %lld loss %.4f dev acc %.4f test acc %.4f (%.0f s)\n",
                   static_cast<long long>(step), run_loss / double(step % a.eval_every ? step % a.eval_every : a.eval_every),
                   dev, test, el);
      run_loss = 0;
      if (dev > best_dev) best_dev = dev, test_at_best = test, best_step = step;
    }
  }
  const double test = evaluate(model, d.test, vocab);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.heatmap.empty()) {
    write_pair_heatmap(model, d.test[size_t(a.heatmap_index)], vocab, a.heatmap, variant);
    release_plot_caches();
    std::fprintf(stderr, "abcnn: wrote %s\n", a.heatmap.c_str());
  }
  fmt::print("{{\"model\": \"{}\", \"variant\": {}, \"blocks\": {}, \"data\": \"{}\", \"steps\": {}, "
             "\"batch\": {}, \"test_accuracy\": {:.4f}, \"best_dev_accuracy\": {:.4f}, "
             "\"test_accuracy_at_best_dev\": {:.4f}, \"best_dev_step\": {}, \"wall_s\": {:.1f}, "
             "\"threads\": {}}}\n",
             models::variant_name(variant), a.variant, a.blocks, a.data, a.steps, a.batch, test,
             best_dev, test_at_best, best_step, wall, omp_get_max_threads());
  return 0;
}

}  // namespace

void register_abcnn_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
  (void)app;
  auto a = std::make_shared<AbcnnArgs>();
  CLI::App* c = train.add_subcommand(
      "abcnn", "BCNN / ABCNN-1/2/3 (Yin et al. 2016) on WordNet gloss matching (or a synthetic "
               "pair task); reports dev and test accuracy");
  c->add_option("--variant", a->variant, "0 = BCNN (no attention), 1 = ABCNN-1, 2 = ABCNN-2, 3 = ABCNN-3")->capture_default_str()->check(CLI::Range(0, 3));
  c->add_option("--blocks", a->blocks, "Convolution blocks (1 or 2)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(2)));
  c->add_option("--output", a->output, "Output layer: logistic or softmax")->capture_default_str()->check(CLI::IsMember({"logistic", "softmax"}));
  c->add_option("--steps", a->steps, "Optimizer steps")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000000)));
  c->add_option("--batch", a->batch, "Pairs per step")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(65536)));
  c->add_option("--eval-every", a->eval_every, "Evaluate dev and test accuracy every N steps")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000000)));
  c->add_option("--lr", a->lr, "AdamW learning rate")->capture_default_str()->check(CLI::Range(1e-8, 10.0));
  c->add_option("--weight-decay", a->weight_decay, "AdamW decoupled weight decay")->capture_default_str()->check(CLI::Range(0.0, 10.0));
  c->add_option("--embed-dim", a->embed_dim, "Word embedding size (trained from scratch)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(4096)));
  c->add_option("--channels", a->channels, "Convolution filters per block")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(4096)));
  c->add_option("--width", a->width, "Filter width w (wide convolution, w-ap window)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(32)));
  c->add_option("--max-len", a->max_len, "Words per sentence (padded or cut)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1024)));
  c->add_option("--min-count", a->min_count, "Words seen fewer times in training become <unk>")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1000000)));
  c->add_option("--data", a->data, "Task: wordnet (gloss matching) or synthetic")->capture_default_str()->check(CLI::IsMember({"wordnet", "synthetic"}));
  c->add_option("--data-dir", a->data_dir, "Where the prepared WordNet pairs (train/dev/test.tsv) are cached")->capture_default_str();
  c->add_option("--wordnet-dir", a->wordnet_dir, "WordNet dict directory (Debian: apt-get install wordnet-base)")->capture_default_str();
  c->add_option("--seed", a->seed, "Seed of the initial weights and the batch order")->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1) << 62));
  c->add_option("--threads", a->threads, "OpenMP threads (0 = the default)")->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1024)));
  c->add_option("--heatmap", a->heatmap, "Write the match-score matrix of one test pair to this PNG");
  c->add_option("--heatmap-index", a->heatmap_index, "Which test pair --heatmap draws")->capture_default_str();
  c->add_flag("--prepare-only", a->prepare_only, "Prepare (and cache) the data, print its sizes and exit");
  cmds.push_back({c, [a] { return run_abcnn(*a); }});
}

}  // namespace graft::tools
