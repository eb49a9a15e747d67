// `graft train bert-pretrain` and `graft train bert-finetune`: BERT (models/bert.h) pretrained
// with masked-LM + next-sentence prediction on a text corpus (one sentence per line, blank lines
// between documents; `graft data prepare english-text` writes one), then fine-tuned with a
// classification head (models/bert_heads.h) on the wordnet-lexname task (data/wordnet_lexnames.h).
//
//   graft data prepare english-text
//   graft train bert-pretrain --size tiny --steps 2000 --run-dir out/bert-pre
//   graft train bert-pretrain --size tiny --steps 4000 --run-dir out/bert-pre --resume
//   graft train bert-finetune --init out/bert-pre --run-dir out/bert-ft
//   graft train bert-finetune --init out/bert-pre --init-weights random --run-dir out/bert-ft0
//   graft train bert-finetune --init-hf hf-bert-dir/ --run-dir out/bert-ft-hf
//   graft predict out/bert-ft < glosses.txt                 (tools/cmd_predict.cpp)
//
// Both use nn::Trainer with the common trainer flags (tools/train_flags.h: metrics.jsonl,
// checkpoints, --resume, --config FILE; `graft plot RUN_DIR` draws the curves), AdamW and
// linear warmup + linear decay. The pretraining run writes RUN_DIR/vocab.txt (before its first
// step; a resumed run reads it back) and RUN_DIR/model.safetensors (BertForPreTraining, the
// config in its metadata) when it stops; the fine-tuning run writes RUN_DIR/model.safetensors
// (BertForSequenceClassification, the config, task and label count in its metadata) and
// RUN_DIR/vocab.txt when it stops, which `graft predict RUN_DIR` reads. Nothing is written in RUN_DIR before every check of
// the run directory has passed (check_run_dir below).
#include <omp.h>

#include "ops/threads.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/bert_pretraining.h"
#include "tools/bert_export.h"
#include "data/english_text.h"
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
#include "ops/file_io.h"
#include "tools/bert_run.h"
#include "tools/commands.h"
#include "tools/run_helpers.h"
#include "tools/train_device.h"
#include "tools/train_flags.h"

namespace graft::tools {

namespace {

namespace fs = std::filesystem;

// Architecture options shared by both commands: a named size, optionally overridden.
struct ArchArgs {
  std::string size = "tiny";
  int64_t hidden = 0, layers = 0, heads = 0, ffn = 0;  // 0 = the named config's
  double dropout = 0.1;
};

models::BertConfig make_config(const ArchArgs& a, int64_t vocab, int64_t max_len) {
  models::BertConfig c = models::BertConfig::named(a.size, vocab);
  if (a.hidden) c.hidden_size = a.hidden, c.num_heads = std::max<int64_t>(1, a.hidden / 64),
                c.intermediate_size = 4 * a.hidden;
  if (a.layers) c.num_layers = a.layers;
  if (a.heads) c.num_heads = a.heads;
  if (a.ffn) c.intermediate_size = a.ffn;
  c.dropout = a.dropout;
  c.max_position_embeddings = std::max<int64_t>(max_len, 128);
  GRAFT_CHECK(c.hidden_size % c.num_heads == 0, "bert: --hidden {} is not divisible by --heads {}",
              c.hidden_size, c.num_heads);
  return c;
}

// The architecture flags by long name, for config.json.
void add_arch_config(nlohmann::ordered_json& j, const ArchArgs& a) {
  j["size"] = a.size, j["hidden"] = a.hidden, j["layers"] = a.layers, j["heads"] = a.heads;
  j["ffn"] = a.ffn, j["dropout"] = a.dropout;
}

// Whether run_dir holds a checkpoint: the pointer, or a step directory with a train state that
// resume could fall back on.
bool has_checkpoint(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "checkpoint.json", ec)) return true;
  if (!fs::is_directory(dir / "checkpoint", ec)) return false;
  for (const auto& e : fs::directory_iterator(dir / "checkpoint", ec))
    if (e.path().filename().string().rfind("step-", 0) == 0 &&
        fs::exists(e.path() / "train_state.safetensors", ec))
      return true;
  return false;
}

// What nn::Trainer refuses when fit() starts, checked before the command writes anything in
// the run directory (vocab.txt) or spends minutes preparing data: a run directory that holds a
// checkpoint, without --resume or --overwrite; and a resume whose configuration (to.config_json)
// differs from the run's config.json in a key that to.resume_may_change does not list. A
// refused run leaves the run directory exactly as it was, so it can still be resumed.
void check_run_dir(const nn::TrainerOptions& to, const std::string& cmd) {
  if (to.run_dir.empty() || !has_checkpoint(to.run_dir)) return;
  GRAFT_CHECK(to.resume || to.overwrite, "{}: {} already holds a checkpoint; hint: resume it "
              "(--resume), start over (--overwrite), or choose another run directory", cmd, to.run_dir);
  if (!to.resume) return;
  const fs::path saved_path = fs::path(to.run_dir) / "config.json";
  std::ifstream in(saved_path);
  if (!in) return;  // no configuration to compare: nn::Trainer checks the checkpoint's own
  nlohmann::json saved, now = nlohmann::json::parse(to.config_json);
  try {
    saved = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return;  // likewise
  }
  if (!saved.is_object()) return;
  std::vector<std::string> diffs;
  auto may_change = [&](const std::string& k) {
    return std::find(to.resume_may_change.begin(), to.resume_may_change.end(), k) !=
           to.resume_may_change.end();
  };
  for (auto& [k, v] : now.items())
    if (!may_change(k) && (!saved.contains(k) || saved[k] != v))
      diffs.push_back(fmt::format("--{} {} (the run has {})", k, json_dump(v),
                                  saved.contains(k) ? json_dump(saved[k]) : "none"));
  for (auto& [k, v] : saved.items())
    if (!may_change(k) && !now.contains(k)) diffs.push_back(fmt::format("--{} (dropped)", k));
  GRAFT_CHECK(diffs.empty(), "{}: cannot resume {} with a different configuration: {}; hint: "
              "resume with the run's own options (--config {}), or start over (--overwrite)",
              cmd, to.run_dir, fmt::join(diffs, ", "), saved_path.string());
}

std::string read_corpus(const std::string& path) {
  return read_file(path, "bert", "graft data prepare english-text writes datasets/english-text/corpus.txt");
}

// A padded batch of variable-length rows: ids/types [B, T] (T = longest row; [PAD] = pad_id,
// type 0), labels [B, T] (-100 at padding).
struct PaddedBatch {
  Tensor ids, types, labels, nsp;
};

PaddedBatch pad_examples(const std::vector<data::BertExample>& ex, const std::vector<int64_t>& idx,
                         int64_t pad_id) {
  size_t T = 0;
  for (int64_t i : idx) T = std::max(T, ex[size_t(i)].input_ids.size());
  const int64_t B = int64_t(idx.size());
  std::vector<int64_t> ids(B * T, pad_id), types(B * T, 0), labels(B * T, data::kIgnoreIndex), nsp;
  for (int64_t b = 0; b < B; ++b) {
    const data::BertExample& e = ex[size_t(idx[size_t(b)])];
    std::copy(e.input_ids.begin(), e.input_ids.end(), ids.begin() + b * int64_t(T));
    std::copy(e.token_type_ids.begin(), e.token_type_ids.end(), types.begin() + b * int64_t(T));
    std::copy(e.labels.begin(), e.labels.end(), labels.begin() + b * int64_t(T));
    nsp.push_back(e.next_sentence_label);
  }
  const Shape s{B, int64_t(T)};
  return {from_vector(ids, s), from_vector(types, s), from_vector(labels, s), from_vector(nsp, {B})};
}

int64_t count_equal(const Tensor& logits, const std::vector<int64_t>& target) {
  const std::vector<int64_t> pred = argmax(logits, -1).contiguous().to_vector<int64_t>();
  int64_t c = 0;
  for (size_t i = 0; i < pred.size(); ++i) c += pred[i] == target[i];
  return c;
}

// ------------------------------------------------------------------ bert-pretrain

struct PretrainArgs {
  TrainFlags train;  // --run-dir, --resume, --steps, --seed, ... (tools/train_flags.h)
  ArchArgs arch;
  std::string corpus = "datasets/english-text/corpus.txt", vocab, export_dir;
  int64_t vocab_size = 8000, vocab_lines = 40000, max_bytes = 0;
  int64_t max_seq_len = 128, max_predictions = 20, dupe_factor = 1;
  int64_t batch = 32, warmup = -1, eval_examples = 512;
  double lr = 1e-3, weight_decay = 0.01;
};

// The run's configuration: the common flags, then this command's, by long name (so that
// `--config RUN_DIR/config.json` takes it back as it is).
nlohmann::ordered_json pretrain_config(const PretrainArgs& a) {
  nlohmann::ordered_json j = train_config("bert-pretrain", a.train);
  add_arch_config(j, a.arch);
  j["corpus"] = a.corpus, j["vocab"] = a.vocab, j["vocab-size"] = a.vocab_size;
  j["vocab-lines"] = a.vocab_lines, j["max-bytes"] = a.max_bytes, j["max-seq-len"] = a.max_seq_len;
  j["max-predictions"] = a.max_predictions, j["dupe-factor"] = a.dupe_factor;
  j["batch"] = a.batch, j["lr"] = a.lr, j["warmup"] = a.warmup;
  j["weight-decay"] = a.weight_decay, j["eval-examples"] = a.eval_examples;
  return j;
}

// Eval metrics of a pretraining model on fixed examples: losses and MLM / NSP accuracy. Stops
// with nn::Interrupted between batches after a Ctrl-C.
std::map<std::string, double> pretrain_eval(models::BertForPreTraining& m,
                                            const std::vector<data::BertExample>& ex, int64_t pad) {
  double loss = 0, mlm = 0, nsp = 0;
  int64_t mlm_ok = 0, mlm_n = 0, nsp_ok = 0, batches = 0;
  for (size_t i = 0; i < ex.size(); i += 64, ++batches) {
    nn::check_interrupt("evaluation");
    std::vector<int64_t> idx(std::min<size_t>(64, ex.size() - i));
    std::iota(idx.begin(), idx.end(), int64_t(i));
    PaddedBatch b = pad_examples(ex, idx, pad);
    models::BertPretrainingOutput o = m.loss(b.ids, b.types, b.labels, b.nsp);
    loss += o.loss.item<double>(), mlm += o.mlm_loss.item<double>(), nsp += o.nsp_loss.item<double>();
    std::vector<int64_t> lab = b.labels.to_vector<int64_t>(), t;
    for (int64_t v : lab)
      if (v != data::kIgnoreIndex) t.push_back(v);
    mlm_ok += count_equal(o.mlm_logits, t), mlm_n += int64_t(t.size());
    nsp_ok += count_equal(o.nsp_logits, b.nsp.to_vector<int64_t>());
  }
  const double nb = double(std::max<int64_t>(1, batches));
  return {{"loss", loss / nb}, {"mlm_loss", mlm / nb}, {"nsp_loss", nsp / nb},
          {"mlm_accuracy", double(mlm_ok) / double(std::max<int64_t>(1, mlm_n))},
          {"nsp_accuracy", double(nsp_ok) / double(std::max<size_t>(1, ex.size()))}};
}

// The WordPiece vocabulary of the run: the run's own vocab.txt when resuming a checkpoint
// (the model's embeddings were trained with it), else --vocab, else one trained on the corpus.
data::WordPieceTokenizer pretrain_tokenizer(const PretrainArgs& a, const std::string& text,
                                            bool resuming) {
  if (resuming) {
    const std::string own = a.train.run_dir + "/vocab.txt";
    GRAFT_CHECK(fs::exists(own), "train bert-pretrain: {} holds a checkpoint but no vocab.txt, so "
                "it cannot be resumed; hint: start over (--overwrite)", a.train.run_dir);
    return data::WordPieceTokenizer::load(own);
  }
  if (!a.vocab.empty()) return data::WordPieceTokenizer::load(a.vocab);
  // Train on an evenly spaced sample of the corpus lines (training is quadratic-ish).
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  std::vector<std::string> sample;
  const size_t every = std::max<size_t>(1, lines.size() / size_t(std::max<int64_t>(1, a.vocab_lines)));
  for (size_t i = 0; i < lines.size(); i += every) sample.push_back(lines[i]);
  return data::WordPieceTokenizer::train(sample, a.vocab_size);
}

int run_pretrain(const PretrainArgs& a) {
  set_threads(a.train);
  nn::TrainerOptions to = to_trainer_options(a.train);
  schedule_spans_steps(to);  // warmup, then linear decay to --steps
  to.items_name = "sequences";
  to.config_json = json_dump(pretrain_config(a));
  check_run_dir(to, "train bert-pretrain");  // before anything is read, built or written
  const bool resuming = a.train.resume && has_checkpoint(a.train.run_dir);

  std::string text = read_corpus(a.corpus);
  if (a.max_bytes > 0 && int64_t(text.size()) > a.max_bytes) {
    size_t cut = text.rfind("\n\n", size_t(a.max_bytes));  // end at a document boundary
    text.resize(cut == std::string::npos ? size_t(a.max_bytes) : cut + 1);
  }
  const std::vector<std::string> docs = data::split_documents(text);
  GRAFT_CHECK(docs.size() >= 2, "train bert-pretrain: {} holds {} document(s); NSP needs at least "
              "2 (documents are separated by blank lines)", a.corpus, docs.size());
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const data::WordPieceTokenizer tok = pretrain_tokenizer(a, text, resuming);
  fmt::print(stderr, "bert-pretrain: {} documents, {:.1f} MiB; vocabulary {} tokens ({:.0f} s)\n",
             docs.size(), double(text.size()) / (1 << 20), tok.size(), since());
  nn::check_interrupt("data preparation");

  data::BertPretrainingOptions po;
  po.max_seq_len = a.max_seq_len, po.max_predictions = a.max_predictions;
  po.dupe_factor = a.dupe_factor, po.seed = uint64_t(a.train.seed);
  std::vector<data::BertExample> ex = data::create_pretraining_examples(data::tokenize_documents(docs, tok), tok, po);
  std::shuffle(ex.begin(), ex.end(), std::mt19937_64(uint64_t(a.train.seed)));
  const size_t n_eval = std::min<size_t>(size_t(a.eval_examples), ex.size() / 10);
  GRAFT_CHECK(ex.size() - n_eval >= 1 && n_eval >= 1, "train bert-pretrain: only {} examples; "
              "hint: a bigger corpus or a smaller --max-seq-len", ex.size());
  const std::vector<data::BertExample> eval_ex(ex.end() - long(n_eval), ex.end());
  ex.resize(ex.size() - n_eval);
  fmt::print(stderr, "bert-pretrain: {} training examples, {} held out ({:.0f} s)\n", ex.size(),
             eval_ex.size(), since());
  nn::check_interrupt("data preparation");

  manual_seed(uint64_t(a.train.seed));
  const models::BertConfig cfg = make_config(a.arch, tok.size(), a.max_seq_len);
  models::BertForPreTraining model(cfg);
  const Device dev = train_device(a.train.device);
  model.to(dev);  // before the optimizer takes the parameters
  fmt::print(stderr, "bert-pretrain: {}, {} parameters{}\n", model.repr(), model.num_parameters(),
             dev.is_cpu() ? "" : ", on " + dev.str());
  optim::AdamW opt(model.parameters(), {.lr = a.lr, .weight_decay = a.weight_decay});
  const int64_t warmup = a.warmup >= 0 ? a.warmup : a.train.steps / 10;
  optim::LinearWarmupDecay sched(opt, warmup, a.train.steps);
  if (!a.export_dir.empty() && dist::is_main()) {
    GRAFT_CHECK(!resuming, "train bert-pretrain: --export writes the initial weights, so it needs "
                "a fresh run, not --resume");
    const int64_t n = int64_t(ex.size()), epochs = (a.train.steps * a.batch + n - 1) / n;
    std::vector<std::vector<int64_t>> orders;
    for (int64_t e = 0; e < epochs; ++e) orders.push_back(epoch_rows(e * n, n, n, uint64_t(a.train.seed)));
    nlohmann::ordered_json s;
    s["steps"] = a.train.steps, s["batch"] = a.batch, s["lr"] = a.lr, s["warmup"] = warmup;
    s["weight_decay"] = a.weight_decay, s["clip_grad_norm"] = a.train.clip_grad_norm;
    s["seed"] = a.train.seed, s["max_seq_len"] = a.max_seq_len, s["pad_id"] = tok.pad_id();
    s["eval_every"] = a.train.eval_every, s["adam_betas"] = {0.9, 0.999}, s["adam_eps"] = 1e-8;
    export_pretraining(a.export_dir, ex, eval_ex, orders, tok, model, s);
    fmt::print(stderr, "bert-pretrain: wrote {} (examples, batch order, initial weights)\n", a.export_dir);
  }

  const int64_t micro = a.batch / a.train.grad_accumulation;
  nn::Trainer trainer(
      to, model, opt, &sched,
      [&](int64_t step, int m) -> nn::MicroBatchLoss {
        std::vector<int64_t> rows = epoch_rows(step * a.batch + m * micro, micro,
                                               int64_t(ex.size()), uint64_t(a.train.seed));
        const dist::Range mine = dist::shard(micro, "the micro-batch (--batch / --grad-accumulation)");
        rows = std::vector<int64_t>(rows.begin() + mine.begin, rows.begin() + mine.begin + mine.count);
        PaddedBatch b = pad_examples(ex, rows, tok.pad_id());
        AutocastGuard ac(a.train.bf16 ? Precision::bf16 : Precision::f32);
        models::BertPretrainingOutput o = model.loss(b.ids.to(dev), b.types.to(dev), b.labels.to(dev), b.nsp.to(dev));
        if (dist::world_size() == 1) return {o.loss, mine.count};
        // data parallel: MLM is a mean over this rank's masked tokens, NSP over its pairs
        return {dist::global_mean(o.mlm_loss, o.mlm_logits.size(0)) + dist::global_mean(o.nsp_loss, mine.count),
                mine.count};
      },
      [&] { return with_model_on_cpu(model, dev, [&] { return pretrain_eval(model, eval_ex, tok.pad_id()); }); });
  // Every check has passed (the trainer validated its options, check_run_dir the run
  // directory): only now does the run directory get its vocabulary.
  if (!to.run_dir.empty() && !resuming) {
    fs::create_directories(to.run_dir);
    tok.save(to.run_dir + "/vocab.txt");
  }
  const nn::TrainResult r = trainer.fit();
  if (!to.run_dir.empty())
    nn::save_safetensors(to.run_dir + "/model.safetensors", model.state_dict(), config_metadata(cfg));
  if (r.reason == nn::StopReason::interrupted) return nn::exit_status(r.reason);
  std::map<std::string, double> ev;
  {
    NoGradGuard ng;
    model.eval();
    ev = with_model_on_cpu(model, dev, [&] { return pretrain_eval(model, eval_ex, tok.pad_id()); });
  }
  nlohmann::ordered_json out;
  out["model"] = "bert-pretrain", out["size"] = a.arch.size, out["corpus"] = a.corpus;
  out["parameters"] = model.num_parameters(), out["steps"] = r.step, out["batch"] = a.batch;
  out["max_seq_len"] = a.max_seq_len, out["eval_loss"] = round4(ev["loss"]);
  out["eval_mlm_accuracy"] = round4(ev["mlm_accuracy"]);
  out["eval_nsp_accuracy"] = round4(ev["nsp_accuracy"]);
  out["wall_s"] = std::round(since() * 10) / 10, out["threads"] = graft::requested_threads();
  out["stop"] = nn::stop_reason_name(r.reason);
  fmt::print("{}\n", json_line(out));
  return nn::exit_status(r.reason);
}

// ------------------------------------------------------------------ bert-finetune

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

struct Encoded {
  std::vector<std::vector<int64_t>> ids;
  std::vector<int64_t> labels;
};

Encoded encode_texts(const std::vector<data::LabeledText>& xs, const data::WordPieceTokenizer& tok,
                     int64_t max_len, int64_t limit) {
  Encoded e;
  for (const data::LabeledText& x : xs) {
    if (limit > 0 && int64_t(e.ids.size()) >= limit) break;
    std::vector<int64_t> ids = tok.encode(x.text, true);  // [CLS] ... [SEP]
    if (int64_t(ids.size()) > max_len) ids.resize(size_t(max_len)), ids.back() = tok.sep_id();
    e.ids.push_back(std::move(ids));
    e.labels.push_back(x.label);
  }
  return e;
}

// ids [B, T] padded with [PAD], types all 0, labels [B].
std::pair<Tensor, Tensor> pad_rows(const Encoded& e, const std::vector<int64_t>& idx, int64_t pad) {
  size_t T = 1;
  for (int64_t i : idx) T = std::max(T, e.ids[size_t(i)].size());
  std::vector<int64_t> ids(idx.size() * T, pad);
  for (size_t b = 0; b < idx.size(); ++b)
    std::copy(e.ids[size_t(idx[b])].begin(), e.ids[size_t(idx[b])].end(), ids.begin() + long(b * T));
  return {from_vector(ids, {int64_t(idx.size()), int64_t(T)}), zeros({int64_t(idx.size()), int64_t(T)}, DType::i64)};
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
  to.items_name = "glosses";
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

  const data::LexnameSplits task = data::wordnet_lexname_task(a.wordnet_dir);
  const Encoded train = encode_texts(task.train, tok, a.max_seq_len, a.train_size);
  const Encoded dev = encode_texts(task.dev, tok, a.max_seq_len, 0);
  const Encoded test = encode_texts(task.test, tok, a.max_seq_len, 0);
  fmt::print(stderr, "bert-finetune: {}: train {}, dev {}, test {} glosses, {} classes ({:.0f} s)\n",
             a.task, train.ids.size(), dev.ids.size(), test.ids.size(), data::kNumLexnames, since());
  GRAFT_CHECK(!train.ids.empty(), "train bert-finetune: no training glosses in {}", a.wordnet_dir);
  nn::check_interrupt("data preparation");

  manual_seed(uint64_t(a.train.seed));
  models::BertForSequenceClassification model(cfg, data::kNumLexnames);
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
    meta["num_labels"] = std::to_string(data::kNumLexnames);
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

void add_arch_options(CLI::App* c, ArchArgs& a) {
  const auto pos = CLI::Range(int64_t(0), int64_t(65536));
  c->add_option("--size", a.size, "Named model size: tiny (2x128), mini (4x256), small, medium, base, large")->capture_default_str()->check(CLI::IsMember({"tiny", "mini", "small", "medium", "base", "large"}));
  c->add_option("--hidden", a.hidden, "Override the hidden size C (0 = the size's; heads = C/64)")->capture_default_str()->check(pos);
  c->add_option("--layers", a.layers, "Override the number of layers")->capture_default_str()->check(pos);
  c->add_option("--heads", a.heads, "Override the number of heads")->capture_default_str()->check(pos);
  c->add_option("--ffn", a.ffn, "Override the feed-forward size")->capture_default_str()->check(pos);
  c->add_option("--dropout", a.dropout, "Dropout (embeddings, attention, feed-forward, classifier)")->capture_default_str()->check(finite_in(0.0, 0.9));
}

}  // namespace

void register_bert_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
  const auto count = CLI::Range(int64_t(1), int64_t(100000000));
  const auto nonneg = CLI::Range(int64_t(0), int64_t(1) << 62);
  const auto batch = CLI::Range(int64_t(1), int64_t(65536));
  const auto warmup = CLI::Range(int64_t(-1), int64_t(100000000));
  auto p = std::make_shared<PretrainArgs>();
  CLI::App* c = train.add_subcommand(
      "bert-pretrain", "BERT masked-LM + next-sentence pretraining on a text corpus (one sentence "
                       "per line, blank line between documents); writes RUN_DIR/{vocab.txt, "
                       "model.safetensors, metrics.jsonl}");
  add_arch_options(c, p->arch);
  c->add_option("--corpus", p->corpus, "Corpus file ('graft data prepare english-text' writes the default)")->capture_default_str();
  c->add_option("--vocab", p->vocab, "WordPiece vocab.txt to use (default: train one on the corpus)");
  c->add_option("--vocab-size", p->vocab_size, "Size of the trained WordPiece vocabulary")->capture_default_str()->check(CLI::Range(int64_t(16), int64_t(1000000)));
  c->add_option("--vocab-lines", p->vocab_lines, "Corpus lines (evenly spaced) the vocabulary is trained on")->capture_default_str()->check(count);
  c->add_option("--max-bytes", p->max_bytes, "Use only the first N bytes of the corpus (0 = all)")->capture_default_str()->check(nonneg);
  c->add_option("--max-seq-len", p->max_seq_len, "Tokens per pair, [CLS] and [SEP]s included")->capture_default_str()->check(CLI::Range(int64_t(8), int64_t(512)));
  c->add_option("--max-predictions", p->max_predictions, "Most masked positions per sequence")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(512)));
  c->add_option("--dupe-factor", p->dupe_factor, "Passes over the corpus with fresh masks")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100)));
  c->add_option("--batch", p->batch, "Sequences per step")->capture_default_str()->check(batch);
  c->add_option("--lr", p->lr, "AdamW peak learning rate")->capture_default_str()->check(finite_in(1e-8, 10.0));
  c->add_option("--warmup", p->warmup, "Linear warmup steps (-1 = steps / 10), then linear decay to 0")->capture_default_str()->check(warmup);
  c->add_option("--weight-decay", p->weight_decay, "AdamW decoupled weight decay")->capture_default_str()->check(finite_in(0.0, 10.0));
  c->add_option("--eval-examples", p->eval_examples, "Held-out pairs (at most a tenth of all)")->capture_default_str()->check(count);
  c->add_option("--export", p->export_dir, "Also write the run's examples, batch order and initial weights (HF names) to this new directory, for bench/reference/bert_pretrain_hf.py");
  add_train_flags(c, p->train,
                  {.steps = 1000, .eval_every = 100, .clip_grad_norm = 1.0, .run_dir = "out/bert-pretrain",
                   .eval_help = "held-out MLM/NSP loss and accuracy"},
                  [p] { require_divisible(p->batch, "--batch", p->train); });
  cmds.push_back({c, [p] { return run_pretrain(*p); }});

  auto f = std::make_shared<FinetuneArgs>();
  CLI::App* t = train.add_subcommand(
      "bert-finetune", "Fine-tune BERT with a sequence-classification head: --task wordnet-lexname "
                       "(WordNet gloss -> one of 45 lexicographer files); reports dev/test accuracy");
  add_arch_options(t, f->arch);
  t->add_option("--task", f->task, "wordnet-lexname")->capture_default_str()->check(CLI::IsMember({"wordnet-lexname"}));
  t->add_option("--init", f->init, "A 'graft train bert-pretrain' run directory (vocab.txt, model.safetensors, config)");
  t->add_option("--init-hf", f->init_hf, "A Hugging Face save_pretrained directory (config.json, model.safetensors or model.safetensors.index.json + shards, vocab.txt); not with --init");
  t->add_option("--init-weights", f->init_weights, "pretrained: load --init's encoder; random: only its vocabulary and config")->capture_default_str()->check(CLI::IsMember({"pretrained", "random"}));
  t->add_option("--vocab", f->vocab, "vocab.txt (without --init: a random model of --size)");
  t->add_option("--wordnet-dir", f->wordnet_dir, "WordNet dict directory (Debian: wordnet-base)")->capture_default_str();
  t->add_option("--max-seq-len", f->max_seq_len, "Tokens per gloss, [CLS] and [SEP] included")->capture_default_str()->check(CLI::Range(int64_t(3), int64_t(512)));
  t->add_option("--train-size", f->train_size, "Use only the first N training glosses (0 = all)")->capture_default_str()->check(nonneg);
  t->add_option("--batch", f->batch, "Glosses per step")->capture_default_str()->check(batch);
  t->add_option("--lr", f->lr, "AdamW peak learning rate")->capture_default_str()->check(finite_in(1e-8, 10.0));
  t->add_option("--warmup", f->warmup, "Linear warmup steps (-1 = steps / 10)")->capture_default_str()->check(warmup);
  t->add_option("--weight-decay", f->weight_decay, "AdamW decoupled weight decay")->capture_default_str()->check(finite_in(0.0, 10.0));
  t->add_option("--eval-size", f->eval_size, "Dev glosses the periodic evaluation uses (0 = all; the final one uses all)")->capture_default_str()->check(nonneg);
  t->add_option("--test-size", f->test_size, "Final dev/test accuracy on N evenly spaced glosses each (0 = all)")->capture_default_str()->check(nonneg);
  add_train_flags(t, f->train,
                  {.steps = 2000, .eval_every = 500, .clip_grad_norm = 1.0, .run_dir = "out/bert-finetune",
                   .eval_help = "dev accuracy on --eval-size glosses"},
                  [f] {
                    require_divisible(f->batch, "--batch", f->train);
                    if (!f->init.empty() && !f->init_hf.empty())
                      throw CLI::ValidationError("--init-hf", "conflicts with --init: start from a "
                                                 "graft pretraining run (--init) or a Hugging Face "
                                                 "directory (--init-hf), not both");
                  });
  cmds.push_back({t, [f] { return run_finetune(*f); }});

  // `graft data prepare english-text` lives in tools/cmd_seq2seq.cpp's `data prepare` command
  // (one command, several corpora), which calls data::prepare_english_text.
  (void)app;
}

}  // namespace graft::tools
