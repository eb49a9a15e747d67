// `graft train abcnn`: BCNN / ABCNN-1/2/3 (models/abcnn.h) on a sentence-pair task: WordNet
// gloss matching (data/pairs.h; prepared once into --data-dir from --wordnet-dir) or the tiny
// synthetic task, trained with nn::Trainer and the common trainer flags (tools/train_flags.h:
// --run-dir for metrics.jsonl, checkpoints and `graft plot`, --resume, --config FILE, ...).
// Evaluates dev and test accuracy every --eval-every steps and at the end, prints one JSON line
// of results, and optionally writes one test pair's match-score heatmap (--heatmap FILE).
//
//   graft train abcnn --variant 3 --steps 2000 --run-dir runs/abcnn3
//   graft train abcnn --variant 3 --steps 4000 --run-dir runs/abcnn3 --resume
//   graft plot runs/abcnn3
//   graft predict runs/abcnn3 --input pairs.tsv --probs     (A<TAB>B per line; tools/cmd_predict.cpp)
//
// With --run-dir, the run writes RUN_DIR/model.safetensors and RUN_DIR/vocab.txt when training
// stops (tools/abcnn_run.h).
#include <omp.h>

#include "ops/threads.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/pairs.h"
#include "models/abcnn.h"
#include "nn/distributed.h"
#include "nn/interrupt.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/trainer.h"
#include "ops/error.h"
#include "tools/abcnn_run.h"
#include "tools/commands.h"
#include "tools/heatmap.h"
#include "tools/plot.h"
#include "tools/run_helpers.h"
#include "tools/train_device.h"
#include "tools/train_flags.h"

namespace graft::tools {

namespace {

struct AbcnnArgs {
  TrainFlags train;  // --run-dir, --resume, --steps, --eval-every, --seed, ... (tools/train_flags.h)
  int variant = 1;
  int64_t blocks = 1;
  std::string output = "logistic";
  int64_t batch = 32;
  double lr = 2e-3, weight_decay = 1e-4;
  int64_t embed_dim = 50, channels = 50, width = 3, max_len = 24, min_count = 2;
  std::string data = "wordnet";
  std::string data_dir = "out/wordnet-pairs";
  std::string wordnet_dir = "/usr/share/wordnet";
  int64_t heatmap_index = 0;
  std::string heatmap;
  bool prepare_only = false;
};

// The run's configuration: the common flags, then every flag that shapes the training, by
// long name (so that `--config RUN_DIR/config.json` takes it back as it is). --heatmap and
// --prepare-only are actions, not configuration.
nlohmann::ordered_json abcnn_config(const AbcnnArgs& a) {
  nlohmann::ordered_json j = train_config("abcnn", a.train);
  j["variant"] = a.variant, j["blocks"] = a.blocks, j["output"] = a.output, j["batch"] = a.batch;
  j["lr"] = a.lr, j["weight-decay"] = a.weight_decay, j["embed-dim"] = a.embed_dim;
  j["channels"] = a.channels, j["width"] = a.width, j["max-len"] = a.max_len;
  j["min-count"] = a.min_count, j["data"] = a.data, j["data-dir"] = a.data_dir;
  j["wordnet-dir"] = a.wordnet_dir;
  return j;
}

struct PairEval {
  double accuracy = 0, loss = 0;
};

// Accuracy and mean loss over all pairs, in batches of 256 (nn::Interrupted between batches
// after a Ctrl-C). The caller sets eval mode and NoGradGuard (nn::Trainer does for eval_fn).
PairEval evaluate(models::Abcnn& m, const std::vector<data::SentencePair>& pairs,
                  const data::PairVocab& vocab) {
  int64_t correct = 0, batches = 0;
  double loss = 0;
  for (size_t i = 0; i < pairs.size(); i += 256, ++batches) {
    nn::check_interrupt("evaluation");
    std::vector<int64_t> idx(std::min<size_t>(256, pairs.size() - i));
    std::iota(idx.begin(), idx.end(), int64_t(i));
    data::PairBatch b = data::make_pair_batch(pairs, idx, vocab, m.config.max_len);
    const models::Abcnn::Output out = m.forward_pair(b.a, b.b);
    loss += m.loss(out, b.label).item<double>() * double(idx.size());
    correct += int64_t(sum(eq(m.predict(out), b.label).to(DType::f64)).item<double>());
  }
  if (pairs.empty()) return {};
  return {double(correct) / double(pairs.size()), loss / double(pairs.size())};
}

// eval_test_accuracy of the evaluation logged at `step` in run_dir/metrics.jsonl (NaN if none):
// the test accuracy at the best dev accuracy of an earlier session of a resumed run.
double logged_test_accuracy(const std::string& run_dir, int64_t step) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("eval_test_accuracy") && j.value("step", int64_t(-1)) == step &&
        j["eval_test_accuracy"].is_number())
      return j["eval_test_accuracy"].get<double>();
  }
  return std::nan("");
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
  set_threads(a.train);
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
  GRAFT_CHECK(!d.train.empty(), "train abcnn: no training pairs");
  GRAFT_CHECK(a.heatmap.empty() || (a.heatmap_index >= 0 && a.heatmap_index < int64_t(d.test.size())),
              "train abcnn: --heatmap-index {} out of range [0, {})", a.heatmap_index, d.test.size());
  nn::check_interrupt("data preparation");

  manual_seed(uint64_t(a.train.seed));
  const auto variant = models::AbcnnVariant(a.variant);
  models::Abcnn model(models::AbcnnConfig{.vocab_size = vocab.size(), .embed_dim = a.embed_dim,
                                          .max_len = a.max_len, .width = a.width,
                                          .channels = a.channels, .blocks = a.blocks,
                                          .variant = variant, .output = a.output});
  const Device dev = train_device(a.train.device);
  model.to(dev);  // before the optimizer takes the parameters
  optim::AdamW opt(model.parameters(), {.lr = a.lr, .weight_decay = a.weight_decay});
  std::fprintf(stderr, "abcnn: %s, %lld parameters\n", model.repr().c_str(),
               static_cast<long long>(model.num_parameters()));

  nn::TrainerOptions to = to_trainer_options(a.train);
  to.items_name = "pairs";
  to.config_json = json_dump(abcnn_config(a));
  // The best evaluation is the one with the best dev accuracy (best_model.safetensors, --patience).
  to.early_stopping_metric = "accuracy", to.early_stopping_mode = "max";
  // Batches are a function of the step (epoch_rows): nothing to register for resume; the model
  // has no dropout, so the default generator (saved by the trainer) is all the randomness.
  const int64_t n = int64_t(d.train.size()), micro = a.batch / a.train.grad_accumulation;
  std::map<int64_t, double> test_at;  // this session's evaluations: step -> test accuracy
  nn::Trainer trainer(
      to, model, opt, nullptr,
      [&](int64_t step, int m) -> nn::MicroBatchLoss {
        std::vector<int64_t> idx = epoch_rows(step * a.batch + m * micro, micro, n, uint64_t(a.train.seed));
        const dist::Range mine = dist::shard(micro, "the micro-batch (--batch / --grad-accumulation)");
        idx = std::vector<int64_t>(idx.begin() + mine.begin, idx.begin() + mine.begin + mine.count);
        data::PairBatch b = data::make_pair_batch(d.train, idx, vocab, a.max_len);
        return {model.loss(model.forward_pair(b.a.to(dev), b.b.to(dev)), b.label.to(dev)), mine.count};
      },
      [&] {
        return with_model_on_cpu(model, dev, [&] {
          const PairEval dv = evaluate(model, d.dev, vocab), te = evaluate(model, d.test, vocab);
          test_at[trainer.step()] = te.accuracy;
          return std::map<std::string, double>{
              {"accuracy", dv.accuracy}, {"loss", dv.loss}, {"test_accuracy", te.accuracy}};
        });
      });
  const nn::TrainResult r = trainer.fit();
  if (!to.run_dir.empty()) {  // what `graft predict RUN_DIR` reads (tools/abcnn_run.h)
    nn::save_safetensors(to.run_dir + "/model.safetensors", model.state_dict(), abcnn_metadata(model.config));
    save_pair_vocab(vocab, to.run_dir + "/vocab.txt");
  }
  if (r.reason == nn::StopReason::interrupted) return nn::exit_status(r.reason);

  PairEval dv, te;
  {
    NoGradGuard ng;
    model.eval();
    with_model_on_cpu(model, dev, [&] {
      dv = evaluate(model, d.dev, vocab), te = evaluate(model, d.test, vocab);
      return 0;
    });
  }
  // The best dev accuracy over the periodic evaluations and the final one, and the test
  // accuracy at it (from metrics.jsonl when an earlier session of a resumed run logged it).
  double best_dev = dv.accuracy, test_at_best = te.accuracy;
  int64_t best_step = r.step;
  if (r.best_step >= 0 && std::isfinite(r.best_metric) && r.best_metric >= dv.accuracy) {
    const auto it = test_at.find(r.best_step);
    const double t = it != test_at.end() ? it->second : to.run_dir.empty() ? std::nan("")
                                                        : logged_test_accuracy(to.run_dir, r.best_step);
    best_dev = r.best_metric, test_at_best = t, best_step = r.best_step;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.heatmap.empty()) {
    with_model_on_cpu(model, dev, [&] {
      write_pair_heatmap(model, d.test[size_t(a.heatmap_index)], vocab, a.heatmap, variant);
      return 0;
    });
    release_plot_caches();
    std::fprintf(stderr, "abcnn: wrote %s\n", a.heatmap.c_str());
  }
  nlohmann::ordered_json out;
  out["model"] = models::variant_name(variant), out["variant"] = a.variant, out["blocks"] = a.blocks;
  out["data"] = a.data, out["steps"] = r.step, out["batch"] = a.batch;
  out["dev_accuracy"] = round4(dv.accuracy), out["test_accuracy"] = round4(te.accuracy);
  out["best_dev_accuracy"] = round4(best_dev), out["test_accuracy_at_best_dev"] = round4(test_at_best);
  out["best_dev_step"] = best_step, out["wall_s"] = std::round(wall * 10) / 10;
  out["threads"] = graft::requested_threads(), out["stop"] = nn::stop_reason_name(r.reason);
  if (!to.run_dir.empty()) out["run_dir"] = to.run_dir;
  fmt::print("{}\n", json_line(out));
  return nn::exit_status(r.reason);
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
  c->add_option("--batch", a->batch, "Pairs per step")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(65536)));
  c->add_option("--lr", a->lr, "AdamW learning rate")->capture_default_str()->check(finite_in(1e-8, 10.0));
  c->add_option("--weight-decay", a->weight_decay, "AdamW decoupled weight decay")->capture_default_str()->check(finite_in(0.0, 10.0));
  c->add_option("--embed-dim", a->embed_dim, "Word embedding size (trained from scratch)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(4096)));
  c->add_option("--channels", a->channels, "Convolution filters per block")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(4096)));
  c->add_option("--width", a->width, "Filter width w (wide convolution, w-ap window)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(32)));
  c->add_option("--max-len", a->max_len, "Words per sentence (padded or cut)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1024)));
  c->add_option("--min-count", a->min_count, "Words seen fewer times in training become <unk>")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1000000)));
  c->add_option("--data", a->data, "Task: wordnet (gloss matching) or synthetic")->capture_default_str()->check(CLI::IsMember({"wordnet", "synthetic"}));
  c->add_option("--data-dir", a->data_dir, "Where the prepared WordNet pairs (train/dev/test.tsv) are cached")->capture_default_str();
  c->add_option("--wordnet-dir", a->wordnet_dir, "WordNet dict directory (Debian: apt-get install wordnet-base)")->capture_default_str();
  c->add_option("--heatmap", a->heatmap, "Write the match-score matrix of one test pair to this PNG");
  c->add_option("--heatmap-index", a->heatmap_index, "Which test pair --heatmap draws")->capture_default_str();
  c->add_flag("--prepare-only", a->prepare_only, "Prepare (and cache) the data, print its sizes and exit");
  add_train_flags(c, a->train,
                  {.steps = 2000, .eval_every = 500, .clip_grad_norm = 0.0,
                   .eval_help = "dev and test accuracy, dev loss", .bf16 = false},
                  [a] { require_divisible(a->batch, "--batch", a->train); });
  cmds.push_back({c, [a] { return run_abcnn(*a); }});
}

}  // namespace graft::tools
