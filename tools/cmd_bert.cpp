// `graft train bert-pretrain`: BERT (models/bert.h) pretrained with masked-LM + next-sentence
// prediction on a text corpus (one sentence per line, blank lines between documents; `graft data
// prepare english-text` writes one). `graft train bert-finetune` (tools/cmd_bert_finetune.cpp)
// then fine-tunes it with a classification head (models/bert_heads.h).
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
// the run directory has passed (bert::check_run_dir, tools/bert_cli.h).
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
#include "tools/bert_cli.h"
#include "tools/bert_export.h"
#include "tools/bert_run.h"
#include "tools/commands.h"
#include "tools/run_helpers.h"
#include "tools/train_device.h"
#include "tools/train_flags.h"

namespace graft::tools {

namespace fs = std::filesystem;

namespace bert {

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

void add_arch_config(nlohmann::ordered_json& j, const ArchArgs& a) {
  j["size"] = a.size, j["hidden"] = a.hidden, j["layers"] = a.layers, j["heads"] = a.heads;
  j["ffn"] = a.ffn, j["dropout"] = a.dropout;
}

bool has_checkpoint(const std::string& run_dir) {
  const fs::path dir(run_dir);
  std::error_code ec;
  if (fs::exists(dir / "checkpoint.json", ec)) return true;
  if (!fs::is_directory(dir / "checkpoint", ec)) return false;
  for (const auto& e : fs::directory_iterator(dir / "checkpoint", ec))
    if (e.path().filename().string().rfind("step-", 0) == 0 &&
        fs::exists(e.path() / "train_state.safetensors", ec))
      return true;
  return false;
}

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

int64_t count_equal(const Tensor& logits, const std::vector<int64_t>& target) {
  const std::vector<int64_t> pred = argmax(logits, -1).contiguous().to_vector<int64_t>();
  int64_t c = 0;
  for (size_t i = 0; i < pred.size(); ++i) c += pred[i] == target[i];
  return c;
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

}  // namespace bert

namespace {

using namespace bert;

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

  // `graft data prepare english-text` lives in tools/cmd_seq2seq.cpp's `data prepare` command
  // (one command, several corpora), which calls data::prepare_english_text.
  (void)app;
}

}  // namespace graft::tools
