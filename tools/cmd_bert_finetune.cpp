// `graft train bert-finetune`: a pretrained (or random) BERT encoder (models/bert.h) with a
// sequence-classification head (models/bert_heads.h), fine-tuned on one of two WordNet tasks:
//
//   wordnet-lexname      one text:  [CLS] gloss [SEP] -> one of 45 lexicographer files
//                        (data/wordnet_lexnames.h; "a domesticated carnivorous mammal" -> noun.animal)
//   wordnet-gloss-match  a pair:    [CLS] example sentence [SEP] gloss [SEP] (segments 0 and 1)
//                        -> 1 when the gloss defines the synset the sentence illustrates, else 0
//                        (data/pairs.h; half the negatives are another sense of the same word)
//
//   graft train bert-finetune --init out/bert-pre --run-dir out/bert-ft
//   graft train bert-finetune --task wordnet-gloss-match --init out/bert-pre --run-dir out/bert-gm
//   graft train bert-finetune --init out/bert-pre --init-weights random --run-dir out/bert-ft0
//   graft train bert-finetune --init-hf hf-bert-dir/ --run-dir out/bert-ft-hf
//   graft predict out/bert-ft < glosses.txt        (out/bert-gm: "sentence<TAB>gloss" lines)
//
// nn::Trainer with the common trainer flags (tools/train_flags.h), AdamW, linear warmup + linear
// decay. When it stops the run writes RUN_DIR/model.safetensors (the config, task and label
// count in its metadata) and RUN_DIR/vocab.txt, which `graft predict RUN_DIR` reads.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/pairs.h"
#include "data/wordnet_lexnames.h"
#include "data/wordpiece.h"
#include "models/bert.h"
#include "models/bert_heads.h"
#include "models/bert_hf.h"
#include "nn/distributed.h"
#include "nn/interrupt.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/scheduler.h"
#include "nn/trainer.h"
#include "ops/error.h"
#include "ops/threads.h"
#include "tools/bert_cli.h"
#include "tools/bert_run.h"
#include "tools/commands.h"
#include "tools/run_helpers.h"
#include "tools/train_device.h"
#include "tools/train_flags.h"

namespace graft::tools {

namespace {

namespace fs = std::filesystem;
using namespace bert;

struct FinetuneArgs {
  TrainFlags train;  // --run-dir, --resume, --steps, --seed, ... (tools/train_flags.h)
  ArchArgs arch;
  std::string task = "wordnet-lexname", init, init_hf, init_weights = "pretrained", vocab;
  std::string wordnet_dir = "/usr/share/wordnet";
  int64_t max_seq_len = 64, batch = 32, warmup = -1;
  int64_t train_size = 0, eval_size = 2000, test_size = 0;
  double lr = 3e-4, weight_decay = 0.01;
};

// The run's configuration (see pretrain_config).
nlohmann::ordered_json finetune_config(const FinetuneArgs& a) {
  nlohmann::ordered_json j = train_config("bert-finetune", a.train);
  add_arch_config(j, a.arch);
  j["task"] = a.task, j["init"] = a.init;
  if (!a.init_hf.empty()) j["init-hf"] = a.init_hf;  // only when given
  j["init-weights"] = a.init_weights, j["vocab"] = a.vocab;
  j["wordnet-dir"] = a.wordnet_dir, j["max-seq-len"] = a.max_seq_len, j["batch"] = a.batch;
  j["lr"] = a.lr, j["warmup"] = a.warmup, j["weight-decay"] = a.weight_decay;
  j["train-size"] = a.train_size, j["eval-size"] = a.eval_size, j["test-size"] = a.test_size;
  return j;
}

// Token ids and segment ids (0 for the first text, 1 for a pair's second) of each example.
struct Encoded {
  std::vector<std::vector<int64_t>> ids, types;
  std::vector<int64_t> labels;
};

Encoded encode_texts(const std::vector<data::LabeledText>& xs, const data::WordPieceTokenizer& tok,
                     int64_t max_len, int64_t limit) {
  Encoded e;
  for (const data::LabeledText& x : xs) {
    if (limit > 0 && int64_t(e.ids.size()) >= limit) break;
    std::vector<int64_t> ids = tok.encode(x.text, true);  // [CLS] ... [SEP]
    if (int64_t(ids.size()) > max_len) ids.resize(size_t(max_len)), ids.back() = tok.sep_id();
    e.types.emplace_back(ids.size(), 0);
    e.ids.push_back(std::move(ids));
    e.labels.push_back(x.label);
  }
  return e;
}

// [CLS] a [SEP] b [SEP], longest-first truncation to max_len (WordPieceTokenizer::encode_pair).
Encoded encode_pairs(const std::vector<data::SentencePair>& xs, const data::WordPieceTokenizer& tok,
                     int64_t max_len, int64_t limit) {
  Encoded e;
  for (const data::SentencePair& x : xs) {
    if (limit > 0 && int64_t(e.ids.size()) >= limit) break;
    data::PairEncoding p = tok.encode_pair(fmt::format("{}", fmt::join(x.a, " ")),
                                           fmt::format("{}", fmt::join(x.b, " ")), max_len);
    e.ids.push_back(std::move(p.input_ids));
    e.types.push_back(std::move(p.token_type_ids));
    e.labels.push_back(x.label);
  }
  return e;
}

// A task's three splits, encoded; `items` names one example in the log.
struct ClassificationTask {
  Encoded train, dev, test;
  int64_t num_labels = 0;
  std::string items;
};

ClassificationTask load_task(const std::string& name, const std::string& wordnet_dir,
                             const data::WordPieceTokenizer& tok, int64_t max_len, int64_t train_size) {
  ClassificationTask t;
  if (name == "wordnet-gloss-match") {
    const data::PairSplits s = data::wordnet_gloss_pairs(wordnet_dir);  // fixed seed: same pairs every run
    t.train = encode_pairs(s.train, tok, max_len, train_size);
    t.dev = encode_pairs(s.dev, tok, max_len, 0), t.test = encode_pairs(s.test, tok, max_len, 0);
    t.num_labels = 2, t.items = "pairs";
  } else {
    const data::LexnameSplits s = data::wordnet_lexname_task(wordnet_dir);
    t.train = encode_texts(s.train, tok, max_len, train_size);
    t.dev = encode_texts(s.dev, tok, max_len, 0), t.test = encode_texts(s.test, tok, max_len, 0);
    t.num_labels = data::kNumLexnames, t.items = "glosses";
  }
  return t;
}

// ids and types [B, T] of rows idx, padded with [PAD] (type 0).
std::pair<Tensor, Tensor> pad_rows(const Encoded& e, const std::vector<int64_t>& idx, int64_t pad) {
  size_t T = 1;
  for (int64_t i : idx) T = std::max(T, e.ids[size_t(i)].size());
  std::vector<int64_t> ids(idx.size() * T, pad), types(idx.size() * T, 0);
  for (size_t b = 0; b < idx.size(); ++b) {
    const size_t r = size_t(idx[b]);
    std::copy(e.ids[r].begin(), e.ids[r].end(), ids.begin() + long(b * T));
    std::copy(e.types[r].begin(), e.types[r].end(), types.begin() + long(b * T));
  }
  const Shape s{int64_t(idx.size()), int64_t(T)};
  return {from_vector(ids, s), from_vector(types, s)};
}

// Mean loss and accuracy over `limit` evenly spaced rows (0 = all), batched by length (less
// padding). Stops with nn::Interrupted between batches after a Ctrl-C.
std::pair<double, double> classify_eval(models::BertForSequenceClassification& m, const Encoded& e,
                                        int64_t pad, size_t limit = 0) {
  const size_t total = e.ids.size(), n = limit ? std::min(limit, total) : total;
  std::vector<int64_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = int64_t(i * total / std::max<size_t>(1, n));
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return e.ids[size_t(x)].size() < e.ids[size_t(y)].size();
  });
  double loss = 0;
  int64_t ok = 0, batches = 0;
  for (size_t i = 0; i < n; i += 128, ++batches) {
    nn::check_interrupt("evaluation");
    std::vector<int64_t> idx(order.begin() + long(i), order.begin() + long(std::min(n, i + 128)));
    auto [ids, types] = pad_rows(e, idx, pad);
    std::vector<int64_t> lab;
    for (int64_t r : idx) lab.push_back(e.labels[size_t(r)]);
    Tensor logits = m.forward(ids, types);
    loss += m.loss(logits, from_vector(lab, {int64_t(lab.size())})).item<double>();
    ok += count_equal(logits, lab);
  }
  return {loss / double(std::max<int64_t>(1, batches)), double(ok) / double(std::max<size_t>(1, n))};
}

int run_finetune(const FinetuneArgs& a) {
  set_threads(a.train);
  nn::TrainerOptions to = to_trainer_options(a.train);
  to.items_name = a.task == "wordnet-gloss-match" ? "pairs" : "glosses";
  to.early_stopping_metric = "accuracy", to.early_stopping_mode = "max";
  // How much of dev/test the evaluations read changes no training step.
  to.resume_may_change.insert(to.resume_may_change.end(), {"eval-size", "test-size"});
  schedule_spans_steps(to);  // warmup, then linear decay to --steps
  to.config_json = json_dump(finetune_config(a));
  check_run_dir(to, "train bert-finetune");  // before minutes of data preparation
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  GRAFT_CHECK(!a.init.empty() || !a.init_hf.empty() || !a.vocab.empty(), "train bert-finetune: "
              "pass --init PRETRAINED_RUN_DIR (its vocab.txt and model.safetensors), --init-hf "
              "HF_DIR (a save_pretrained directory), or --vocab FILE for a randomly initialised "
              "model");
  const std::string init_dir = a.init.empty() ? a.init_hf : a.init;  // at most one (flag check)
  const std::string vocab_path = a.vocab.empty() ? init_dir + "/vocab.txt" : a.vocab;
  const data::WordPieceTokenizer tok = data::WordPieceTokenizer::load(vocab_path);
  models::BertConfig cfg;
  nn::StateDict pretrained;
  if (!a.init_hf.empty()) {  // config.json + model.safetensors (or shards), HF's names
    const std::unique_ptr<models::BertForPreTraining> hf = models::load_hf_bert(a.init_hf);
    cfg = hf->config;
    GRAFT_CHECK(cfg.vocab_size == tok.size(), "train bert-finetune: {} has {} tokens but {}/"
                "config.json says vocab_size {}", vocab_path, tok.size(), a.init_hf, cfg.vocab_size);
    GRAFT_CHECK(cfg.pad_token_id == tok.pad_id(), "train bert-finetune: {}/config.json has "
                "pad_token_id {} but [PAD] is token {} of {}", a.init_hf, cfg.pad_token_id,
                tok.pad_id(), vocab_path);
    pretrained = hf->state_dict();
  } else if (!a.init.empty()) {
    const std::string path = a.init + "/model.safetensors";
    GRAFT_CHECK(fs::exists(path), "train bert-finetune: {} not found; hint: --init takes the "
                "--run-dir of 'graft train bert-pretrain'", path);
    nn::SafetensorsFile f = nn::load_safetensors(path);
    cfg = config_from_metadata(f.metadata, path);
    GRAFT_CHECK(cfg.vocab_size == tok.size(), "train bert-finetune: {} has {} tokens but the model "
                "was trained with {}", vocab_path, tok.size(), cfg.vocab_size);
    pretrained = std::move(f.tensors);
  } else {
    cfg = make_config(a.arch, tok.size(), a.max_seq_len);
  }
  cfg.dropout = a.arch.dropout;
  GRAFT_CHECK(a.max_seq_len >= 3 && a.max_seq_len <= cfg.max_position_embeddings,
              "train bert-finetune: --max-seq-len {} outside [3, {}]", a.max_seq_len,
              cfg.max_position_embeddings);

  const ClassificationTask task = load_task(a.task, a.wordnet_dir, tok, a.max_seq_len, a.train_size);
  const Encoded &train = task.train, &dev = task.dev, &test = task.test;
  fmt::print(stderr, "bert-finetune: {}: train {}, dev {}, test {} {}, {} classes ({:.0f} s)\n",
             a.task, train.ids.size(), dev.ids.size(), test.ids.size(), task.items, task.num_labels, since());
  GRAFT_CHECK(!train.ids.empty(), "train bert-finetune: no training {} in {}", task.items, a.wordnet_dir);
  nn::check_interrupt("data preparation");

  manual_seed(uint64_t(a.train.seed));
  models::BertForSequenceClassification model(cfg, task.num_labels);
  const bool use_pretrained = !init_dir.empty() && a.init_weights == "pretrained";
  if (use_pretrained) model.load_pretrained(pretrained);
  const Device device = train_device(a.train.device);
  model.to(device);  // before the optimizer takes the parameters
  fmt::print(stderr, "bert-finetune: {}, {} parameters, encoder {}\n", model.repr(),
             model.num_parameters(), use_pretrained ? "pretrained (" + init_dir + ")" : std::string("random"));
  optim::AdamW opt(model.parameters(), {.lr = a.lr, .weight_decay = a.weight_decay});
  const int64_t warmup = a.warmup >= 0 ? a.warmup : a.train.steps / 10;
  optim::LinearWarmupDecay sched(opt, warmup, a.train.steps);

  const int64_t n = int64_t(train.ids.size()), micro = a.batch / a.train.grad_accumulation;
  nn::Trainer trainer(
      to, model, opt, &sched,
      [&](int64_t step, int m) -> nn::MicroBatchLoss {
        std::vector<int64_t> idx = epoch_rows(step * a.batch + m * micro, micro, n, uint64_t(a.train.seed));
        const dist::Range mine = dist::shard(micro, "the micro-batch (--batch / --grad-accumulation)");
        idx = std::vector<int64_t>(idx.begin() + mine.begin, idx.begin() + mine.begin + mine.count);
        auto [ids, types] = pad_rows(train, idx, tok.pad_id());
        std::vector<int64_t> lab;
        for (int64_t i : idx) lab.push_back(train.labels[size_t(i)]);
        AutocastGuard ac(a.train.bf16 ? Precision::bf16 : Precision::f32);
        return {model.loss(model.forward(ids.to(device), types.to(device)),
                           from_vector(lab, {int64_t(lab.size())}).to(device)), mine.count};
      },
      [&] {
        auto [loss, acc] = with_model_on_cpu(model, device, [&] {
          return classify_eval(model, dev, tok.pad_id(), size_t(a.eval_size));
        });
        return std::map<std::string, double>{{"loss", loss}, {"accuracy", acc}};
      });
  const nn::TrainResult r = trainer.fit();
  if (!to.run_dir.empty()) {  // what `graft predict RUN_DIR` reads
    std::map<std::string, std::string> meta = config_metadata(cfg);
    meta["graft.run"] = "bert-finetune", meta["task"] = a.task;
    meta["num_labels"] = std::to_string(task.num_labels);
    meta["max_seq_len"] = std::to_string(a.max_seq_len);
    nn::save_safetensors(to.run_dir + "/model.safetensors", model.state_dict(), meta);
    tok.save(to.run_dir + "/vocab.txt");
  }
  if (r.reason == nn::StopReason::interrupted) return nn::exit_status(r.reason);
  double dev_acc = 0, test_acc = 0;
  {
    NoGradGuard ng;
    model.eval();
    with_model_on_cpu(model, device, [&] {
      dev_acc = classify_eval(model, dev, tok.pad_id(), size_t(a.test_size)).second;
      test_acc = classify_eval(model, test, tok.pad_id(), size_t(a.test_size)).second;
      return 0;
    });
  }
  nlohmann::ordered_json out;
  out["model"] = "bert-finetune", out["task"] = a.task, out["init"] = init_dir;
  out["encoder"] = use_pretrained ? "pretrained" : "random", out["steps"] = r.step;
  out["batch"] = a.batch, out["dev_accuracy"] = round4(dev_acc), out["test_accuracy"] = round4(test_acc);
  out["wall_s"] = std::round(since() * 10) / 10, out["threads"] = graft::requested_threads();
  out["stop"] = nn::stop_reason_name(r.reason);
  fmt::print("{}\n", json_line(out));
  return nn::exit_status(r.reason);
}

}  // namespace

void register_bert_finetune_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
  const auto nonneg = CLI::Range(int64_t(0), int64_t(1) << 62);
  const auto batch = CLI::Range(int64_t(1), int64_t(65536));
  const auto warmup = CLI::Range(int64_t(-1), int64_t(100000000));
  auto f = std::make_shared<FinetuneArgs>();
  CLI::App* t = train.add_subcommand(
      "bert-finetune", "Fine-tune BERT with a sequence-classification head: --task wordnet-lexname "
                       "(WordNet gloss -> one of 45 lexicographer files) or wordnet-gloss-match "
                       "(example sentence + gloss -> whether the gloss is the sentence's sense); "
                       "reports dev/test accuracy");
  add_arch_options(t, f->arch);
  t->add_option("--task", f->task, "wordnet-lexname (one gloss) or wordnet-gloss-match (sentence pairs)")->capture_default_str()->check(CLI::IsMember({"wordnet-lexname", "wordnet-gloss-match"}));
  t->add_option("--init", f->init, "A 'graft train bert-pretrain' run directory (vocab.txt, model.safetensors, config)");
  t->add_option("--init-hf", f->init_hf, "A Hugging Face save_pretrained directory (config.json, model.safetensors or model.safetensors.index.json + shards, vocab.txt); not with --init");
  t->add_option("--init-weights", f->init_weights, "pretrained: load --init's encoder; random: only its vocabulary and config")->capture_default_str()->check(CLI::IsMember({"pretrained", "random"}));
  t->add_option("--vocab", f->vocab, "vocab.txt (without --init: a random model of --size)");
  t->add_option("--wordnet-dir", f->wordnet_dir, "WordNet dict directory (Debian: wordnet-base)")->capture_default_str();
  t->add_option("--max-seq-len", f->max_seq_len, "Tokens per example, [CLS] and [SEP]s included")->capture_default_str()->check(CLI::Range(int64_t(3), int64_t(512)));
  t->add_option("--train-size", f->train_size, "Use only the first N training examples (0 = all)")->capture_default_str()->check(nonneg);
  t->add_option("--batch", f->batch, "Examples per step")->capture_default_str()->check(batch);
  t->add_option("--lr", f->lr, "AdamW peak learning rate")->capture_default_str()->check(finite_in(1e-8, 10.0));
  t->add_option("--warmup", f->warmup, "Linear warmup steps (-1 = steps / 10)")->capture_default_str()->check(warmup);
  t->add_option("--weight-decay", f->weight_decay, "AdamW decoupled weight decay")->capture_default_str()->check(finite_in(0.0, 10.0));
  t->add_option("--eval-size", f->eval_size, "Dev examples the periodic evaluation uses (0 = all; the final one uses all)")->capture_default_str()->check(nonneg);
  t->add_option("--test-size", f->test_size, "Final dev/test accuracy on N evenly spaced examples each (0 = all)")->capture_default_str()->check(nonneg);
  add_train_flags(t, f->train,
                  {.steps = 2000, .eval_every = 500, .clip_grad_norm = 1.0, .run_dir = "out/bert-finetune",
                   .eval_help = "dev accuracy on --eval-size examples"},
                  [f] {
                    require_divisible(f->batch, "--batch", f->train);
                    if (!f->init.empty() && !f->init_hf.empty())
                      throw CLI::ValidationError("--init-hf", "conflicts with --init: start from a "
                                                 "graft pretraining run (--init) or a Hugging Face "
                                                 "directory (--init-hf), not both");
                  });
  cmds.push_back({t, [f] { return run_finetune(*f); }});
  (void)app;
}

}  // namespace graft::tools
