// graft train seq2seq / graft translate / graft data prepare: recurrent encoder-decoders on the
// built-in synthetic tasks (copy, reverse, sort, date) or a parallel corpus (the Bible EN->ES,
// any TSV), trained with nn::Trainer; held-out exact match, token accuracy by length and BLEU;
// decoding of new inputs with greedy or beam search and an attention heatmap PNG.
//
//   graft train seq2seq --task date --cell lstm --attention bahdanau --steps 1500
//   graft translate --run-dir runs/seq2seq-date "3rd of March 2021" --heatmap attn.png
//   graft data prepare bible-en-es && graft train seq2seq --task bible --cell gru --attention general
//
// A run directory holds, besides the trainer's files (metrics.jsonl, checkpoint/),
// model.safetensors (the final weights, with the model options in its metadata),
// src_vocab.txt / tgt_vocab.txt, and results.json (the held-out evaluation).
#include <omp.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "data/batching.h"
#include "data/bleu.h"
#include "data/english_text.h"
#include "data/parallel_corpus.h"
#include "data/seq2seq_tasks.h"
#include "data/tokenizer.h"
#include "models/seq2seq.h"
#include "nn/interrupt.h"
#include "nn/distributed.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/scheduler.h"
#include "nn/trainer.h"
#include "ops/error.h"
#include "ops/file_io.h"
#include "tools/cmd_transformer.h"
#include "tools/commands.h"
#include "tools/heatmap.h"
#include "tools/train_device.h"
#include "tools/plot.h"
#include "tools/seq_common.h"
#include "tools/train_flags.h"

namespace graft::tools {

namespace {
namespace fs = std::filesystem;

struct Seq2SeqArgs {
  TrainFlags train;  // --steps, --run-dir, --resume, --time-budget, ... (tools/train_flags.h)
  SeqTaskFlags data;  // --task, --data-dir, --train-size, ... (tools/seq_common.h)
  int64_t test_min_len = 0, test_max_len = 0;
  // --cell, --attention, --embed, --hidden, --layers, --bidirectional, --attn-dim, --window,
  // --dropout, --doubly-stochastic (the vocabularies come from the data, input_feeding from
  // --no-input-feeding, seed from --seed); the defaults are Seq2SeqOptions' but for attention.
  models::Seq2SeqOptions model{.attention = "bahdanau"};
  bool no_input_feeding = false;
  double sampling = 0.0;
  SeqBatchFlags in;  // --batch, --max-tokens, --tokenizer, --vocab-size
  double lr = 2e-3, target = 0.0;
  int64_t beam = 1, max_out = 0, length_bin = 10;
  double length_penalty = 1.0;
};

// The run's config.json: the trainer flags and this command's, by long name (--config reads it
// back as it is).
nlohmann::ordered_json seq2seq_config(const Seq2SeqArgs& a) {
  nlohmann::ordered_json j = train_config("seq2seq", a.train);
  add_task_config(j, a.data);
  j["test-min-len"] = a.test_min_len;
  j["test-max-len"] = a.test_max_len;
  add_batch_config(j, a.in);
  j["cell"] = a.model.cell;
  j["attention"] = a.model.attention;
  j["embed"] = a.model.embed;
  j["hidden"] = a.model.hidden;
  j["layers"] = a.model.layers;
  j["attn-dim"] = a.model.attn_dim;
  j["window"] = a.model.window;
  j["bidirectional"] = a.model.bidirectional;
  j["no-input-feeding"] = a.no_input_feeding;
  j["dropout"] = a.model.dropout;
  j["sampling"] = a.sampling;
  j["doubly-stochastic"] = a.model.doubly_stochastic;
  j["lr"] = a.lr;
  j["target"] = a.target;
  j["length-bin"] = a.length_bin;
  j["beam"] = a.beam;
  j["length-penalty"] = a.length_penalty;
  j["max-out"] = a.max_out;
  return j;
}

struct Corpus {
  std::vector<data::Example> train, valid, test;
  bool corpus = false;          // bible or tsv (BLEU), else a synthetic task
  std::string tokenizer = "char";  // --tokenizer for corpora; synthetic tasks are char-level
};

Corpus load_corpus(const Seq2SeqArgs& a) {
  Corpus c;
  if (a.data.task == "bible" || a.data.task == "tsv") {
    c.corpus = true;
    c.tokenizer = a.in.tokenizer;
    CorpusSplit cs = load_corpus_split(a.data, "train seq2seq");
    c.train = std::move(cs.train), c.valid = std::move(cs.valid), c.test = std::move(cs.test);
    return c;
  }
  const int64_t tmin = a.test_min_len ? a.test_min_len : a.data.min_len;
  const int64_t tmax = a.test_max_len ? a.test_max_len : 2 * a.data.max_len;
  data::TaskSplit s = data::make_task_split(a.data.task, a.data.train_size, a.data.valid_size, a.data.test_size,
                                            {.min_len = a.data.min_len, .max_len = a.data.max_len, .num_symbols = a.data.symbols},
                                            tmin, tmax, uint64_t(a.train.seed));
  c.train = std::move(s.train);
  c.valid = std::move(s.valid);
  c.test = std::move(s.test);
  return c;
}

struct EvalResult {
  models::Accuracy acc;
  double bleu = 0;
  std::map<int64_t, std::pair<models::Accuracy, int64_t>> by_len;  // bin -> (acc, count)
  std::vector<std::string> outputs;
};

// Decodes the first n pairs (0: all) in batches of 64. With `interruptible` (the final test
// decoding, after training) a pending Ctrl-C throws nn::Interrupted between batches; the
// evaluations inside training leave that to the trainer.
EvalResult evaluate(models::Seq2Seq& m, const data::Tokenizer& tgt_tok, const Ids& src, const Ids& ref,
                    const std::vector<data::Example>& ex, const models::DecodeOptions& dopt,
                    int64_t bin, int64_t n = 0, bool interruptible = false) {
  const size_t count = n > 0 ? std::min(src.size(), size_t(n)) : src.size();
  Ids s(src.begin(), src.begin() + long(count)), r(ref.begin(), ref.begin() + long(count));
  Ids outs;
  for (size_t i = 0; i < count; i += 64) {
    if (interruptible) nn::check_interrupt("decoding");
    const Ids part(s.begin() + long(i), s.begin() + long(std::min(count, i + 64)));
    for (const auto& h : m.translate(part, dopt, 64)) outs.push_back(h.tokens);
  }
  EvalResult res;
  res.acc = models::sequence_accuracy(outs, r);
  std::vector<std::string> hyp_text;
  std::vector<std::vector<std::string>> ref_text;
  std::map<int64_t, std::pair<Ids, Ids>> groups;
  for (size_t i = 0; i < count; ++i) {
    hyp_text.push_back(tgt_tok.decode(outs[i]));
    ref_text.push_back({ex[i].target});
    if (bin > 0) {
      auto& g = groups[(int64_t(s[i].size()) / bin) * bin];
      g.first.push_back(outs[i]);
      g.second.push_back(r[i]);
    }
  }
  res.bleu = data::corpus_bleu(hyp_text, ref_text).score;
  for (auto& [k, g] : groups) res.by_len[k] = {models::sequence_accuracy(g.first, g.second), int64_t(g.first.size())};
  res.outputs = std::move(hyp_text);
  return res;
}

int cmd_train_seq2seq(const Seq2SeqArgs& a) {
  const TrainFlags& f = a.train;
  const auto t_start = std::chrono::steady_clock::now();
  set_threads(f);
  const std::string run_dir = f.run_dir.empty() ? "runs/seq2seq-" + a.data.task : f.run_dir;
  Corpus c = load_corpus(a);
  GRAFT_CHECK(!c.train.empty() && !c.valid.empty() && !c.test.empty(),
              "train seq2seq: empty data (train {}, valid {}, test {})", c.train.size(), c.valid.size(), c.test.size());
  std::vector<std::string> srcs, tgts;
  for (const auto& e : c.train) srcs.push_back(e.source), tgts.push_back(e.target);
  auto src_tok = fit_tokenizer(c.tokenizer, srcs, a.in.vocab_size);
  auto tgt_tok = fit_tokenizer(c.tokenizer, tgts, a.in.vocab_size);
  const Ids xs = encode_side(*src_tok, c.train, false), ys = encode_side(*tgt_tok, c.train, true);
  const Ids vx = encode_side(*src_tok, c.valid, false), vy = encode_side(*tgt_tok, c.valid, true);
  const Ids tx = encode_side(*src_tok, c.test, false), ty = encode_side(*tgt_tok, c.test, true);

  models::Seq2SeqOptions mo = a.model;
  mo.src_vocab = src_tok->vocab().size();
  mo.tgt_vocab = tgt_tok->vocab().size();
  mo.input_feeding = !a.no_input_feeding;
  mo.seed = uint64_t(f.seed);
  manual_seed(uint64_t(f.seed));
  models::Seq2Seq model(mo);
  const Device dev = tools::train_device(f.device);
  model.to(dev);  // before the optimizer reads the parameters
  optim::Adam opt(model.parameters(), {.lr = a.lr});

  int64_t max_tgt = 0;
  for (const auto& y : ty) max_tgt = std::max<int64_t>(max_tgt, int64_t(y.size()));
  const models::DecodeOptions dopt{.beam = a.beam, .max_len = a.max_out ? a.max_out : 2 * max_tgt + 10,
                                   .length_penalty = a.length_penalty};
  const models::DecodeOptions greedy{.beam = 1, .max_len = dopt.max_len, .length_penalty = a.length_penalty};
  fmt::print("task {}: {} train / {} valid / {} test pairs, vocab {} -> {} ({}-level)\n", a.data.task,
             c.train.size(), c.valid.size(), c.test.size(), mo.src_vocab, mo.tgt_vocab, c.tokenizer);
  fmt::print("model: {}, {} parameters; Adam lr {}, batch {}, {} steps, {} thread(s)\n", model.repr(),
             model.num_parameters(), a.lr, batch_size_text(a.in.batch, a.in.max_tokens, f.grad_accumulation),
             f.steps, omp_get_max_threads());
  std::fflush(stdout);

  // Batches are a pure function of the step (epoch e is bucketed with its own seed), so a
  // resumed run sees the same batches as an uninterrupted one. With --grad-accumulation K each
  // step takes K consecutive micro-batches of --batch / K sentences.
  const int64_t K = f.grad_accumulation;
  EpochBatches batches(xs, ys, a.in.batch / K, a.in.max_tokens / K, uint64_t(f.seed), 1000003u);
  Generator sampling_gen(uint64_t(f.seed) + 7);
  TargetWatch target{.target = a.target, .start = t_start};

  nn::TrainerOptions to = to_trainer_options(f);
  to.run_dir = run_dir;
  to.checkpoint_every = f.checkpoint_every;
  to.items_name = "tokens";
  to.early_stopping_metric = "exact";
  to.early_stopping_mode = "max";
  to.config_json = seq2seq_config(a).dump();
  // flags that only shape evaluation or decoding may change on --resume
  for (const char* k : {"eval-size", "target", "length-bin", "beam", "length-penalty", "max-out"})
    to.resume_may_change.push_back(k);
  nn::Trainer* trainer_ptr = nullptr;
  nn::Trainer trainer(
      to, model, opt, nullptr,
      [&](int64_t step, int m) -> nn::MicroBatchLoss {
        const RankBatch b = rank_batch(batches.at(step * K + m), xs, ys, dev);
        AutocastGuard ac(f.bf16 ? Precision::bf16 : Precision::f32);  // --bf16: matmuls in bf16
        models::LossOutput l = model.loss(b.batch, a.sampling, &sampling_gen);
        const int64_t tokens = b.count > 0 ? l.tokens : 0;
        return {dist::global_mean(l.loss, tokens), tokens};
      },
      [&]() -> std::map<std::string, double> {
        EvalResult r = tools::with_model_on_cpu(model, dev, [&] {
          return evaluate(model, *tgt_tok, vx, vy, c.valid, greedy, 0, a.data.eval_size);
        });
        model.eval();
        target.check(*trainer_ptr, r.acc.exact);
        return {{"exact", r.acc.exact}, {"token_accuracy", r.acc.token}, {"bleu", r.bleu}};
      });
  trainer_ptr = &trainer;
  trainer.register_generator("sampling", sampling_gen);
  const nn::TrainResult tr = trainer.fit();
  model.to(Device::cpu());  // saving and test decoding run on the CPU
  const double train_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();

  // save the final model and the vocabularies for graft translate
  fs::create_directories(run_dir);
  nn::save_safetensors(run_dir + "/model.safetensors", model.state_dict(),
                       {{"seq2seq", mo.to_json()}, {"tokenizer", c.tokenizer}, {"task", a.data.task}});
  save_tokenizer(*src_tok, run_dir + "/src_vocab.txt");
  save_tokenizer(*tgt_tok, run_dir + "/tgt_vocab.txt");

  const int64_t bin = a.data.task == "date" ? 0 : a.length_bin;  // date sources are all short
  const auto te0 = std::chrono::steady_clock::now();
  EvalResult r = evaluate(model, *tgt_tok, tx, ty, c.test, dopt, bin, 0, /*interruptible=*/true);
  const double eval_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - te0).count();
  const bool seq_task = !c.corpus && a.data.task != "date";
  fmt::print("\nheld-out test ({} examples{}, {}): exact match {:.2f}%, token accuracy {:.2f}%{}\n",
             r.acc.count, seq_task ? fmt::format(", source lengths {}..{}", a.test_min_len ? a.test_min_len : a.data.min_len,
                                                a.test_max_len ? a.test_max_len : 2 * a.data.max_len) : "",
             dopt.beam == 1 ? "greedy" : fmt::format("beam {}", dopt.beam), 100 * r.acc.exact, 100 * r.acc.token,
             c.corpus ? fmt::format(", BLEU {:.2f}", r.bleu) : "");
  nlohmann::ordered_json res = results_head(
      a.data.task, {{"cell", a.model.cell}, {"attention", a.model.attention}}, tr, train_secs, target);
  res["test_exact"] = r.acc.exact;
  res["test_token_accuracy"] = r.acc.token;
  res["test_bleu"] = r.bleu;
  res["test_examples"] = r.acc.count;
  res["beam"] = dopt.beam;
  res["eval_wall_s"] = eval_secs;
  if (!r.by_len.empty()) {
    fmt::print("{:>12}  {:>6}  {:>8}  {:>8}\n", "src length", "count", "exact", "token");
    for (const auto& [k, v] : r.by_len) {
      fmt::print("{:>12}  {:>6}  {:>7.2f}%  {:>7.2f}%\n", fmt::format("{}-{}", k, k + bin - 1), v.second,
                 100 * v.first.exact, 100 * v.first.token);
      res["by_length"].push_back({{"from", k}, {"to", k + bin - 1}, {"count", v.second},
                                  {"exact", v.first.exact}, {"token_accuracy", v.first.token}});
    }
  }
  for (size_t i = 0; i < std::min<size_t>(5, c.test.size()); ++i)
    fmt::print("  {:<32} -> {:<24} (reference {})\n", c.test[i].source.substr(0, 60),
               r.outputs[i].substr(0, 60), c.test[i].target.substr(0, 60));
  atomic_write(run_dir + "/results.json", res.dump(1) + "\n", "train seq2seq");
  fmt::print("{} steps in {:.1f} s ({}); run directory {} (model.safetensors, results.json); try: graft translate --run-dir {} TEXT\n",
             tr.step, train_secs, nn::stop_reason_name(tr.reason), run_dir, run_dir);
  return nn::exit_status(tr.reason);  // 130 when interrupted; --target and --time-budget are done
}

// ---------------------------------------------------------------- graft translate
struct TranslateArgs {
  std::string run_dir;
  std::string model;  // weights ("" = run_dir/model.safetensors)
  std::vector<std::string> inputs;
  int64_t beam = 5, max_len = 0, threads = 1;
  double length_penalty = 1.0;
  std::string heatmap;
  int64_t layer = -1, head = 0;  // Transformer runs: the cross-attention map to draw
};

int cmd_translate(const TranslateArgs& a) {
  omp_set_num_threads(int(a.threads));
  const std::string mpath = a.model.empty() ? a.run_dir + "/model.safetensors" : a.model;
  const nn::SafetensorsFile f = nn::load_safetensors(mpath);
  if (is_transformer_run(f.metadata)) {  // from graft train transformer: tools/cmd_transformer.cpp
    TransformerTranslateArgs t{a.run_dir, a.model, a.inputs, a.beam, a.max_len, a.threads, a.length_penalty, a.heatmap, a.layer, a.head};
    if (t.inputs.empty())
      for (std::string line; std::getline(std::cin, line);) t.inputs.push_back(line);
    return translate_transformer(t);
  }
  auto meta = [&](const std::string& k) {
    auto it = f.metadata.find(k);
    GRAFT_CHECK(it != f.metadata.end(), "translate: {} has no '{}' metadata; hint: it must come from "
                "'graft train seq2seq'", mpath, k);
    return it->second;
  };
  const models::Seq2SeqOptions mo = models::Seq2SeqOptions::from_json(meta("seq2seq"));
  const std::string kind = meta("tokenizer");
  auto src_tok = load_tokenizer(kind, a.run_dir + "/src_vocab.txt");
  auto tgt_tok = load_tokenizer(kind, a.run_dir + "/tgt_vocab.txt");
  GRAFT_CHECK(src_tok->vocab().size() == mo.src_vocab && tgt_tok->vocab().size() == mo.tgt_vocab,
              "translate: the vocabulary files ({} / {} tokens) do not match the model ({} / {})",
              src_tok->vocab().size(), tgt_tok->vocab().size(), mo.src_vocab, mo.tgt_vocab);
  models::Seq2Seq model(mo);
  models::load_for_inference(model, mpath);  // refuses NaN/inf weights
  std::vector<std::string> lines = a.inputs;
  if (lines.empty()) {
    std::string line;
    while (std::getline(std::cin, line)) lines.push_back(line);
  }
  Ids src;
  for (const auto& l : lines) src.push_back(encode_line(*src_tok, l));
  const models::DecodeOptions dopt = translate_options(src, a.beam, a.max_len, a.length_penalty);
  const std::vector<models::Hypothesis> hyps = translate_all(model, src, dopt, 64);
  for (const auto& h : hyps) fmt::print("{}\n", tgt_tok->decode(h.tokens));
  if (!a.heatmap.empty()) {
    GRAFT_CHECK(!src.empty(), "translate: --heatmap needs an input line");
    write_attention_png(a.heatmap, model.attention_matrix(src[0], hyps[0].tokens),
                        tgt_tok->tokens(hyps[0].tokens), src_tok->tokens(src[0], false),
                        fmt::format("{} attention: {}", mo.attention, lines[0].substr(0, 40)));
  }
  return 0;
}

CLI::Validator positive_real(const char* what) {
  return CLI::Validator(
      [what](std::string& s) -> std::string {
        try {
          size_t used = 0;
          const double v = std::stod(s, &used);
          if (used == s.size() && std::isfinite(v) && v >= 0) return "";
        } catch (const std::exception&) {
        }
        return fmt::format("{} must be a finite number >= 0, got '{}'", what, s);
      },
      "NUMBER >= 0");
}

}  // namespace

void register_seq2seq_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
  auto a = std::make_shared<Seq2SeqArgs>();
  CLI::App* t = train.add_subcommand("seq2seq", "Recurrent encoder-decoder (RNN/LSTM/GRU, any attention) on copy/reverse/sort/date or a parallel corpus");
  const auto count = CLI::Range(int64_t(1), int64_t(1) << 40);
  const auto nonneg = CLI::Range(int64_t(0), int64_t(1) << 40);
  add_task_flags(t, a->data);
  t->add_option("--cell", a->model.cell, "rnn, lstm or gru")->capture_default_str()->check(CLI::IsMember({"rnn", "lstm", "gru"}));
  t->add_option("--attention", a->model.attention, "none, bahdanau, dot, general, concat, local-m, local-p or hard")->capture_default_str()->check(CLI::IsMember({"none", "bahdanau", "dot", "general", "concat", "local-m", "local-p", "hard"}));
  add_batch_flags(t, a->in, "Sentences per step (bucketed by length)");
  t->add_option("--lr", a->lr, "Adam learning rate")->capture_default_str()->check(positive_real("--lr"));
  t->add_option("--embed", a->model.embed, "Embedding width")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(65536)));
  t->add_option("--hidden", a->model.hidden, "Hidden width (H/2 per direction when bidirectional)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(65536)));
  t->add_option("--layers", a->model.layers, "Encoder and decoder layers")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(16)));
  t->add_flag("--bidirectional", a->model.bidirectional, "Bidirectional encoder");
  t->add_option("--attn-dim", a->model.attn_dim, "Attention width (0 = hidden)")->capture_default_str()->check(nonneg);
  t->add_option("--window", a->model.window, "Local attention half-window D")->capture_default_str()->check(nonneg);
  t->add_flag("--no-input-feeding", a->no_input_feeding, "Luong attention without input feeding");
  t->add_option("--dropout", a->model.dropout, "Dropout on embeddings and outputs")->capture_default_str()->check(finite_in(0.0, 0.95));
  t->add_option("--sampling", a->sampling, "Scheduled sampling: probability of feeding the model's own previous prediction")->capture_default_str()->check(finite_in(0.0, 1.0));
  t->add_option("--doubly-stochastic", a->model.doubly_stochastic, "Lambda of the doubly-stochastic attention penalty")->capture_default_str()->check(positive_real("--doubly-stochastic"));
  t->add_option("--train-size", a->data.train_size, "Training pairs (synthetic: generated; corpora: first N)")->capture_default_str()->check(count);
  t->add_option("--min-len", a->data.min_len, "copy/reverse/sort: shortest training source")->capture_default_str()->check(count);
  t->add_option("--max-len", a->data.max_len, "copy/reverse/sort: longest training source")->capture_default_str()->check(count);
  t->add_option("--test-min-len", a->test_min_len, "Shortest test source (0 = --min-len)")->capture_default_str()->check(nonneg);
  t->add_option("--test-max-len", a->test_max_len, "Longest test source (0 = 2 x --max-len)")->capture_default_str()->check(nonneg);
  t->add_option("--target,--target-exact", a->target, "Stop once validation exact match reaches this (0 = off, needs --eval-every), e.g. 0.99")->capture_default_str()->check(finite_in(0.0, 1.0));
  t->add_option("--length-bin", a->length_bin, "Width of the source-length buckets of the test table (0 = no table; not for date)")->capture_default_str()->check(nonneg);
  t->add_option("--beam", a->beam, "Beam width for the test evaluation (1 = greedy)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100)));
  t->add_option("--length-penalty", a->length_penalty, "Beam ranking: logp / len^alpha")->capture_default_str()->check(positive_real("--length-penalty"));
  t->add_option("--max-out", a->max_out, "Most output tokens (0 = 2 x longest reference + 10)")->capture_default_str()->check(nonneg);
  add_train_flags(t, a->train,
                  {.steps = 2000, .eval_every = 250, .clip_grad_norm = 5.0, .run_dir_help = "runs/seq2seq-TASK",
                   .eval_help = "decode --eval-size validation pairs (exact match, token accuracy, BLEU)"},
                  [a] {
                    check_batch_flags(a->in, a->train);
                    if (a->data.task != "bible" && a->data.task != "tsv" && a->data.min_len > a->data.max_len)
                      throw CLI::ValidationError("--min-len", fmt::format("{} > --max-len {}", a->data.min_len, a->data.max_len));
                    if (a->target > 0 && a->train.eval_every == 0)
                      throw CLI::ValidationError("--target", "needs evaluations: set --eval-every N (N > 0)");
                  });
  cmds.push_back({t, [a] { return cmd_train_seq2seq(*a); }});

  auto ta = std::make_shared<TranslateArgs>();
  CLI::App* tr = app.add_subcommand("translate", "Decode input lines (arguments or stdin) with a model from 'graft train seq2seq' or 'graft train transformer'");
  tr->add_option("--run-dir", ta->run_dir, "The training run directory (model.safetensors, src_vocab.txt, tgt_vocab.txt)")->required();
  tr->add_option("inputs", ta->inputs, "Input lines (default: read stdin)");
  tr->add_option("--model", ta->model, "The weights (default: RUN_DIR/model.safetensors), e.g. 'graft average' of the run's checkpoints");
  tr->add_option("--beam", ta->beam, "Beam width (1 = greedy)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100)));
  tr->add_option("--max-len", ta->max_len, "Most output tokens (0 = 2 x input + 10)")->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(100000)));
  tr->add_option("--length-penalty", ta->length_penalty, "Beam ranking: logp / len^alpha")->capture_default_str()->check(positive_real("--length-penalty"));
  tr->add_option("--heatmap,--attention-png", ta->heatmap, "Write the first input's cross-attention matrix as a PNG");
  tr->add_option("--layer", ta->layer, "Transformer runs: decoder layer of the heatmap (-1 = last)")->capture_default_str();
  tr->add_option("--head", ta->head, "Transformer runs: cross-attention head of the heatmap (-1 = mean of heads)")->capture_default_str();
  tr->add_option("--threads", ta->threads, "OpenMP threads")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(256)));
  cmds.push_back({tr, [ta] { return cmd_translate(*ta); }});

  auto corpus = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>("datasets");
  CLI::App* d = app.add_subcommand("data", "Datasets");
  d->require_subcommand(1);
  auto seed = std::make_shared<int64_t>(1);
  CLI::App* prep = d->add_subcommand("prepare", "Download/convert a corpus: bible-en-es (Debian SWORD modules, public domain), english-text (BERT pretraining: WEB Bible + WordNet), date (the date task's split as TSV files)");
  prep->add_option("corpus", *corpus, "bible-en-es, english-text or date")->required()->check(CLI::IsMember({"bible-en-es", "english-text", "date"}));
  prep->add_option("--data-dir", *dir, "Output folder")->capture_default_str();
  prep->add_option("--seed", *seed, "date: the split of 'train seq2seq --task date --seed N' (train 20000, dev 500, test 1000 pairs)")->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1) << 62));
  cmds.push_back({prep, [dir, corpus, seed] {  // all captured: the options write into them
                    if (*corpus == "date") {  // for --task tsv and the PyTorch reference trainers
                      const SeqTaskFlags t;   // the split sizes train seq2seq uses by default
                      const std::string out = data::write_date_tsv(*dir, t.train_size, t.valid_size, t.test_size, uint64_t(*seed));
                      fmt::print("wrote {}/{{train,dev,test}}.tsv: {} / {} / {} date pairs (seed {})\n", out, t.train_size,
                                 t.valid_size, t.test_size, *seed);
                      return 0;
                    }
                    if (*corpus == "english-text") {  // BERT pretraining text (data/english_text.h)
                      const data::EnglishTextInfo e = data::prepare_english_text(*dir);
                      fmt::print("wrote {}: {} documents, {} sentences, {:.1f} MiB (Bible: {} chapters, {} sentences; "
                                 "WordNet: {} lexicographer files, {} sentences); see README.txt there\n", e.path,
                                 e.documents, e.sentences, double(e.bytes) / (1 << 20), e.bible_documents,
                                 e.bible_sentences, e.wordnet_documents, e.wordnet_sentences);
                      return 0;
                    }
                    const data::BibleInfo info = data::prepare_bible_en_es(*dir);
                    fmt::print("wrote {}: {} verse pairs (train {}, dev {}, test {}); see {}/README.txt\n", info.dir,
                               info.pairs, info.train, info.dev, info.test, info.dir);
                    return 0;
                  }});
}

}  // namespace graft::tools
