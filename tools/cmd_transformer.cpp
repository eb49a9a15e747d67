// `graft train transformer`: the encoder-decoder Transformer on a synthetic task (copy, reverse,
// sort, date; character level, one joint vocabulary) or a parallel corpus (the Bible EN->ES or
// any TSV; word level by default, one vocabulary per side), trained with nn::Trainer: Adam
// (beta2 0.98) with the Noam warmup schedule, label-smoothed cross-entropy, bucketed batches,
// gradient clipping. Held-out exact match (and BLEU on corpora) with greedy and beam
// (KV-cached) decoding. `graft translate` of a Transformer run is translate_transformer().
//
//   graft train transformer --task date --steps 1500 --run-dir runs/tf-date
//   graft train transformer --task date --steps 3000 --run-dir runs/tf-date --resume
//   graft translate --run-dir runs/tf-date "3rd of March 2021" --attention-png attn.png
//
// The run directory holds the trainer's files (metrics.jsonl for `graft plot`, checkpoint/ for
// --resume, config.json), then model.safetensors (metadata: the model options, tokenizer kind),
// src_vocab.txt / tgt_vocab.txt and results.json.
#include "tools/cmd_transformer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "data/batching.h"
#include "data/bleu.h"
#include "data/parallel_corpus.h"
#include "data/seq2seq_tasks.h"
#include "data/tokenizer.h"
#include "models/transformer.h"
#include "nn/interrupt.h"
#include "nn/distributed.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/scheduler.h"
#include "nn/trainer.h"
#include "ops/error.h"
#include "ops/file_io.h"
#include "tools/heatmap.h"
#include "tools/plot.h"
#include "tools/seq_common.h"
#include "tools/train_device.h"
#include "tools/train_flags.h"

namespace graft::tools {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Args {
  TrainFlags train;  // --steps, --run-dir, --resume, --time-budget, --bf16, ... (tools/train_flags.h)
  SeqTaskFlags data{.valid_size = 200, .test_size = 500, .eval_size = 200};  // tools/seq_common.h
  SeqBatchFlags in;  // --batch, --max-tokens, --tokenizer, --vocab-size
  TransformerFlags model;  // --d-model, --heads, --dropout, --warmup, --lr-scale
  int64_t layers = 2, ffn = 512;
  double label_smoothing = 0.1, target = 0.0;
  int64_t beam = 4, max_out = 0;
  int64_t max_train_len = 0;
  double length_penalty = 1.0;
  bool pre_norm = false;
  std::string init = "layers";
};

// The run's config.json: the trainer flags and this command's, by long name (--config reads it
// back as it is).
nlohmann::ordered_json transformer_config(const Args& a) {
  nlohmann::ordered_json j = train_config("transformer", a.train);
  add_task_config(j, a.data);
  add_batch_config(j, a.in);
  j["max-train-len"] = a.max_train_len;
  add_transformer_config(j, a.model);
  j["layers"] = a.layers;
  j["ffn"] = a.ffn;
  j["pre-norm"] = a.pre_norm;
  j["init"] = a.init;
  j["label-smoothing"] = a.label_smoothing;
  j["target"] = a.target;
  j["beam"] = a.beam;
  j["length-penalty"] = a.length_penalty;
  j["max-out"] = a.max_out;
  return j;
}

bool is_corpus(const std::string& task) { return task == "bible" || task == "tsv"; }

// The data, tokenized. Synthetic tasks share one character vocabulary (src_tok == tgt_tok's
// vocabulary, embeddings shared); corpora get one vocabulary per side.
struct Data {
  std::vector<data::Example> train, valid, test;
  std::unique_ptr<data::Tokenizer> src_tok, tgt_tok;
  bool joint = false;
  Ids xs, ys, vx, vy, tx, ty;
};

Data load_data(const Args& a) {
  Data d;
  if (is_corpus(a.data.task)) {
    CorpusSplit cs = load_corpus_split(a.data, "train transformer");
    d.train = std::move(cs.train), d.valid = std::move(cs.valid), d.test = std::move(cs.test);
  } else {
    data::TaskSplit s = data::make_task_split(
        a.data.task, a.data.train_size, a.data.valid_size, a.data.test_size,
        {.min_len = a.data.min_len, .max_len = a.data.max_len, .num_symbols = a.data.symbols}, a.data.min_len, a.data.max_len,
        uint64_t(a.train.seed));
    d.train = std::move(s.train);
    d.valid = std::move(s.valid);
    d.test = std::move(s.test);
  }
  GRAFT_CHECK(!d.train.empty() && !d.valid.empty() && !d.test.empty(),
              "train transformer: empty data (train {}, valid {}, test {})", d.train.size(),
              d.valid.size(), d.test.size());
  std::vector<std::string> srcs, tgts;
  for (const auto& e : d.train) srcs.push_back(e.source), tgts.push_back(e.target);
  if (is_corpus(a.data.task)) {
    d.src_tok = fit_tokenizer(a.in.tokenizer, srcs, a.in.vocab_size);
    d.tgt_tok = fit_tokenizer(a.in.tokenizer, tgts, a.in.vocab_size);
  } else {
    d.joint = true;
    std::vector<std::string> both = srcs;
    both.insert(both.end(), tgts.begin(), tgts.end());
    d.src_tok = fit_tokenizer("char", both, 0);
    d.tgt_tok = data::make_tokenizer("char", d.src_tok->vocab());
  }
  d.xs = encode_side(*d.src_tok, d.train, false);
  d.ys = encode_side(*d.tgt_tok, d.train, true);
  if (a.max_train_len > 0) {  // drop long training pairs (either side, in tokens)
    Ids xs, ys;
    for (size_t i = 0; i < d.xs.size(); ++i)
      if (int64_t(d.xs[i].size()) <= a.max_train_len && int64_t(d.ys[i].size()) <= a.max_train_len)
        xs.push_back(d.xs[i]), ys.push_back(d.ys[i]);
    GRAFT_CHECK(!xs.empty(), "train transformer: no training pair has <= {} tokens (--max-train-len)", a.max_train_len);
    d.xs = std::move(xs);
    d.ys = std::move(ys);
  }
  d.vx = encode_side(*d.src_tok, d.valid, false);
  d.vy = encode_side(*d.tgt_tok, d.valid, true);
  d.tx = encode_side(*d.src_tok, d.test, false);
  d.ty = encode_side(*d.tgt_tok, d.test, true);
  return d;
}

int64_t longest(const std::vector<const Ids*>& sets) {
  int64_t n = 0;
  for (const Ids* s : sets)
    for (const auto& x : *s) n = std::max<int64_t>(n, int64_t(x.size()));
  return n;
}

struct Eval {
  double exact = 0, bleu = 0, bleu_lower = 0, bleu_ci = 0;  // ci: case-insensitive
  std::vector<std::string> outputs;
};

// Decodes the first n pairs (0: all) in batches; exact match on token ids, corpus BLEU against
// the raw references (as the recurrent model reports it), against lowercased ones, and
// case-insensitive (both sides lowercased, sacreBLEU --lowercase).
// With `interruptible` (the final test decoding) a pending Ctrl-C throws nn::Interrupted
// between batches; the evaluations inside training leave that to the trainer.
Eval evaluate(models::Transformer& m, const data::Tokenizer& tgt_tok, const Ids& src, const Ids& ref,
              const std::vector<data::Example>& ex, const models::DecodeOptions& dopt, int64_t n,
              int64_t batch, bool interruptible = false) {
  const size_t count = n > 0 ? std::min(src.size(), size_t(n)) : src.size();
  std::vector<models::Hypothesis> hyps;
  for (size_t i = 0; i < count; i += size_t(batch)) {
    if (interruptible) nn::check_interrupt("decoding");
    const Ids part(src.begin() + long(i), src.begin() + long(std::min(count, i + size_t(batch))));
    for (auto& h : m.translate(part, dopt, batch)) hyps.push_back(std::move(h));
  }
  Eval r;
  std::vector<std::vector<std::string>> refs, refs_lower;
  int64_t exact = 0;
  for (size_t i = 0; i < count; ++i) {
    exact += hyps[i].tokens == ref[i];
    r.outputs.push_back(tgt_tok.decode(hyps[i].tokens));
    refs.push_back({ex[i].target});
    refs_lower.push_back({data::lowercase(ex[i].target)});
  }
  r.exact = double(exact) / double(std::max<size_t>(count, 1));
  r.bleu = data::corpus_bleu(r.outputs, refs).score;
  r.bleu_lower = data::corpus_bleu(r.outputs, refs_lower).score;
  r.bleu_ci = data::corpus_bleu_lowercase(r.outputs, refs).score;
  return r;
}

// Teacher-forced cross-entropy per target token (no smoothing) over all pairs.
double mean_nll(models::Transformer& m, const Ids& xs, const Ids& ys, int64_t batch) {
  double sum = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < xs.size(); i += size_t(batch)) {
    const size_t j = std::min(xs.size(), i + size_t(batch));
    const Ids bx(xs.begin() + long(i), xs.begin() + long(j)), by(ys.begin() + long(i), ys.begin() + long(j));
    const models::TransformerLoss l = m.loss(data::make_seq2seq_batch(bx, by), 0.0);
    sum += l.nll * double(l.tokens);
    tokens += l.tokens;
  }
  return sum / double(std::max<int64_t>(tokens, 1));
}

int train_transformer(const Args& a) {
  const TrainFlags& f = a.train;
  const auto t_start = Clock::now();
  set_threads(f);
  Data d = load_data(a);
  const bool corpus = is_corpus(a.data.task);
  const int64_t max_ref = longest({&d.ty, &d.vy});
  const models::DecodeOptions dopt{.beam = a.beam, .max_len = a.max_out ? a.max_out : 2 * max_ref + 10,
                                   .length_penalty = a.length_penalty};
  models::DecodeOptions greedy = dopt;
  greedy.beam = 1;
  models::TransformerOptions mo{.src_vocab = d.src_tok->vocab().size(), .tgt_vocab = d.tgt_tok->vocab().size(),
                                .d_model = a.model.d_model, .nhead = a.model.heads,
                                .num_encoder_layers = a.layers, .num_decoder_layers = a.layers,
                                .dim_feedforward = a.ffn, .dropout = a.model.dropout,
                                .norm_first = a.pre_norm, .share_embeddings = d.joint,
                                .max_len = std::max(longest({&d.xs, &d.ys, &d.vx, &d.tx}), dopt.max_len) + 2,
                                .init = a.init};
  manual_seed(uint64_t(f.seed));
  models::Transformer model(mo);
  const Device dev = tools::train_device(f.device);
  model.to(dev);  // before the optimizer reads the parameters
  optim::Adam opt(model.parameters(), {.lr = 1.0, .beta2 = 0.98, .eps = 1e-9});
  optim::Noam sched(opt, a.model.d_model, a.model.warmup, a.model.lr_scale);
  fmt::print("task {}: {} train / {} valid / {} test pairs, vocab {} -> {} ({}-level{}); {}, {} "
             "parameters; {} steps of {}, {} thread(s)\n",
             a.data.task, d.xs.size(), d.valid.size(), d.test.size(), mo.src_vocab, mo.tgt_vocab,
             corpus ? a.in.tokenizer : "char", d.joint ? ", joint" : "", model.repr(),
             model.num_parameters(), f.steps, batch_size_text(a.in.batch, a.in.max_tokens, 1), omp_get_max_threads());
  std::fflush(stdout);

  // Batches are a pure function of the step (epoch e is bucketed with its own seed), so a
  // resumed run sees the same batches as an uninterrupted one. With --grad-accumulation K each
  // step takes K consecutive micro-batches of --batch / K pairs.
  const int64_t K = f.grad_accumulation;
  EpochBatches batches(d.xs, d.ys, a.in.batch / K, a.in.max_tokens / K, uint64_t(f.seed), 7919u);

  nn::TrainerOptions to = to_trainer_options(f);
  to.items_name = "tokens";
  to.early_stopping_metric = "exact";
  to.early_stopping_mode = "max";
  to.config_json = transformer_config(a).dump();
  // flags that only shape evaluation or decoding may change on --resume
  for (const char* k : {"eval-size", "target", "beam", "length-penalty", "max-out"}) to.resume_may_change.push_back(k);
  nn::Trainer* trainer_ptr = nullptr;
  TargetWatch target{.target = a.target, .start = t_start};
  nn::Trainer trainer(
      to, model, opt, &sched,
      [&](int64_t step, int m) -> nn::MicroBatchLoss {
        const RankBatch b = rank_batch(batches.at(step * K + m), d.xs, d.ys, dev);
        AutocastGuard ac(f.bf16 ? Precision::bf16 : Precision::f32);  // matmuls in bf16 with --bf16
        models::TransformerLoss l = model.loss(b.batch, a.label_smoothing);
        const int64_t tokens = b.count > 0 ? l.tokens : 0;
        return {dist::global_mean(l.loss, tokens), tokens};
      },
      [&]() -> std::map<std::string, double> {
        Eval r;
        double nll = 0;
        tools::with_model_on_cpu(model, dev, [&] {
          r = evaluate(model, *d.tgt_tok, d.vx, d.vy, d.valid, greedy, a.data.eval_size, 64);
          nll = mean_nll(model, d.vx, d.vy, 64);
          return 0;
        });
        std::map<std::string, double> m{{"exact", r.exact}, {"nll", nll}};
        if (corpus) m["bleu"] = r.bleu;
        target.check(*trainer_ptr, r.exact);
        return m;
      });
  trainer_ptr = &trainer;
  const nn::TrainResult tr = trainer.fit();
  model.to(Device::cpu());  // saving and test decoding run on the CPU
  const double train_s = since(t_start);

  // The model and vocabularies are saved before the test decoding, so Ctrl-C there (exit 130)
  // loses nothing but the test figures.
  if (!f.run_dir.empty()) {
    std::filesystem::create_directories(f.run_dir);
    nn::save_safetensors(f.run_dir + "/model.safetensors", model.state_dict(),
                         {{"transformer", mo.to_json()}, {"tokenizer", corpus ? a.in.tokenizer : "char"}, {"task", a.data.task}});
    save_tokenizer(*d.src_tok, f.run_dir + "/src_vocab.txt");
    save_tokenizer(*d.tgt_tok, f.run_dir + "/tgt_vocab.txt");
  }
  nlohmann::ordered_json res = results_head(a.data.task, nlohmann::ordered_json::object(), tr, train_s, target);
  res["test_examples"] = d.test.size();
  const int64_t decode_batch = corpus ? 16 : 64;  // long verses x beams: bound the KV caches
  for (int64_t beam : {int64_t(1), a.beam}) {
    models::DecodeOptions o = dopt;
    o.beam = beam;
    const auto t1 = Clock::now();
    Eval r = evaluate(model, *d.tgt_tok, d.tx, d.ty, d.test, o, 0, decode_batch, /*interruptible=*/true);
    const std::string name = beam == 1 ? std::string("greedy") : fmt::format("beam {}", beam);
    fmt::print("test ({} examples, {}): exact match {:.2f}%{}, decoded in {:.1f} s\n", d.test.size(), name,
               100 * r.exact, corpus ? fmt::format(", BLEU {:.2f} (lowercased references {:.2f}, case-insensitive {:.2f})", r.bleu, r.bleu_lower, r.bleu_ci) : "",
               since(t1));
    const std::string key = beam == 1 ? "greedy" : "beam";
    if (!f.run_dir.empty()) {  // one detokenized hypothesis per test pair, for graft bleu
      std::string text;
      for (const std::string& o : r.outputs) text += o + '\n';
      const std::string file = beam == 1 ? "test_greedy.txt" : fmt::format("test_beam{}.txt", beam);
      atomic_write(f.run_dir + "/" + file, text, "train transformer");
      res["test_hypotheses_" + key] = file;
    }
    res["test_exact_" + key] = r.exact;
    if (corpus) {
      res["test_bleu_" + key] = r.bleu;
      res["test_bleu_lowercased_" + key] = r.bleu_lower;
      res["test_bleu_case_insensitive_" + key] = r.bleu_ci;
    }
    if (beam == a.beam) {
      for (size_t i = 0; i < std::min<size_t>(5, d.test.size()); ++i)
        fmt::print("  {:<40} -> {:<40} (reference {})\n", d.test[i].source.substr(0, 80), r.outputs[i].substr(0, 80),
                   d.test[i].target.substr(0, 80));
      res["beam"] = beam;
      break;
    }
  }
  fmt::print("{} steps in {:.1f} s ({})\n", tr.step, train_s, nn::stop_reason_name(tr.reason));
  if (!f.run_dir.empty()) {
    atomic_write(f.run_dir + "/results.json", res.dump(1) + "\n", "train transformer");
    fmt::print("run directory {} (model.safetensors, results.json, metrics.jsonl); try: graft translate "
               "--run-dir {} TEXT\n", f.run_dir, f.run_dir);
  }
  return nn::exit_status(tr.reason);  // 130 when interrupted; --target and --time-budget are done
}

}  // namespace

// ---------------------------------------------------------------- graft translate (Transformer)
int translate_transformer(const TransformerTranslateArgs& a) {
  omp_set_num_threads(int(a.threads));
  const std::string mpath = a.model.empty() ? a.run_dir + "/model.safetensors" : a.model;
  const nn::SafetensorsFile f = nn::load_safetensors(mpath);
  GRAFT_CHECK(is_transformer_run(f.metadata) && f.metadata.count("tokenizer"),
              "translate: {} has no 'transformer'/'tokenizer' metadata; hint: it must come from "
              "'graft train transformer --run-dir'", mpath);
  const models::TransformerOptions mo = models::TransformerOptions::from_json(f.metadata.at("transformer"));
  const std::string kind = f.metadata.at("tokenizer");
  auto src_tok = load_tokenizer(kind, a.run_dir + "/src_vocab.txt");
  auto tgt_tok = load_tokenizer(kind, a.run_dir + "/tgt_vocab.txt");
  GRAFT_CHECK(src_tok->vocab().size() == mo.src_vocab && tgt_tok->vocab().size() == mo.tgt_vocab,
              "translate: the vocabulary files ({} / {} tokens) do not match the model ({} / {})",
              src_tok->vocab().size(), tgt_tok->vocab().size(), mo.src_vocab, mo.tgt_vocab);
  const int64_t L = mo.num_decoder_layers;
  GRAFT_CHECK(a.layer >= -L && a.layer < L, "translate: --layer must be in [-{}, {}), got {}", L, L, a.layer);
  GRAFT_CHECK(a.head >= -1 && a.head < mo.nhead, "translate: --head must be in [0, {}) or -1 (mean), got {}",
              mo.nhead, a.head);
  models::Transformer model(mo);
  models::load_for_inference(model, mpath);  // refuses NaN/inf weights
  Ids src;
  for (const auto& l : a.inputs) {
    std::vector<int64_t> ids = encode_line(*src_tok, l);
    GRAFT_CHECK(int64_t(ids.size()) < mo.max_len, "translate: an input has {} tokens; this model takes at most {}",
                ids.size(), mo.max_len - 1);
    src.push_back(std::move(ids));
  }
  const models::DecodeOptions dopt = translate_options(src, a.beam, a.max_len, a.length_penalty);
  const std::vector<models::Hypothesis> hyps = translate_all(model, src, dopt, 16);
  for (const auto& h : hyps) fmt::print("{}\n", tgt_tok->decode(h.tokens));
  if (a.heatmap.empty()) return 0;
  GRAFT_CHECK(!src.empty(), "translate: --attention-png needs an input line");
  const int64_t layer = a.layer < 0 ? a.layer + L : a.layer;
  write_attention_png(a.heatmap, model.cross_attention(src[0], hyps[0].tokens, a.layer, a.head),
                      tgt_tok->tokens(hyps[0].tokens), src_tok->tokens(src[0], false),
                      fmt::format("cross-attention layer {} {}: {}", layer,
                                  a.head < 0 ? std::string("(mean of heads)") : fmt::format("head {}", a.head),
                                  a.inputs[0].substr(0, 40)));
  return 0;
}

void add_transformer_config(nlohmann::ordered_json& j, const TransformerFlags& f) {
  j["d-model"] = f.d_model;
  j["heads"] = f.heads;
  j["dropout"] = f.dropout;
  j["warmup"] = f.warmup;
  j["lr-scale"] = f.lr_scale;
}

void add_transformer_flags(CLI::App* t, TransformerFlags& f) {
  t->add_option("--d-model", f.d_model, "Model width")->capture_default_str()->check(CLI::Range(int64_t(2), int64_t(65536)));
  t->add_option("--heads", f.heads, "Attention heads (must divide --d-model)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1024)));
  t->add_option("--dropout", f.dropout, "Dropout")->capture_default_str()->check(finite_in(0.0, 0.95));
  t->add_option("--warmup", f.warmup, "Noam warmup steps")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000000)));
  t->add_option("--lr-scale", f.lr_scale, "Noam scale: lr = scale d^-0.5 min(n^-0.5, n w^-1.5)")->capture_default_str()->check(finite_in(1e-6, 1e3));
}

void register_transformer_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
  auto a = std::make_shared<Args>();
  CLI::App* t = train.add_subcommand("transformer", "Encoder-decoder Transformer on copy/reverse/sort/date or a parallel corpus (Noam schedule, label smoothing, KV-cached beam search)");
  const auto count = CLI::Range(int64_t(1), int64_t(1) << 40);
  const auto nonneg = CLI::Range(int64_t(0), int64_t(1) << 40);
  add_task_flags(t, a->data);
  add_batch_flags(t, a->in, "Sequence pairs per step (bucketed by length)");
  t->add_option("--layers", a->layers, "Layers (each of encoder and decoder)")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(64)));
  t->add_option("--ffn", a->ffn, "Feed-forward width")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1 << 20)));
  add_transformer_flags(t, a->model);
  t->add_option("--label-smoothing", a->label_smoothing, "Label smoothing")->capture_default_str()->check(finite_in(0.0, 0.99));
  t->add_flag("--pre-norm", a->pre_norm, "Pre-norm layers (default: post-norm, as in the paper)");
  t->add_option("--init", a->init, "Stack weights: layers (each layer's own reset) or xavier (Xavier uniform on every matrix, as torch.nn.Transformer)")->capture_default_str()->check(CLI::IsMember({"layers", "xavier"}));
  t->add_option("--train-size", a->data.train_size, "Training pairs (synthetic: generated; corpora: the first N)")->capture_default_str()->check(CLI::Range(int64_t(10), int64_t(100000000)));
  t->add_option("--target,--target-exact", a->target, "Stop once validation exact match reaches this (0 = off, needs --eval-every), e.g. 0.99")->capture_default_str()->check(finite_in(0.0, 1.0));
  t->add_option("--min-len", a->data.min_len, "copy/reverse/sort: shortest source")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(10000)));
  t->add_option("--max-len", a->data.max_len, "copy/reverse/sort: longest source")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(10000)));
  t->add_option("--max-train-len", a->max_train_len, "Corpora: drop training pairs longer than N tokens (0 = keep all)")->capture_default_str()->check(nonneg);
  t->add_option("--beam", a->beam, "Beam width of the second test decode")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100)));
  t->add_option("--length-penalty", a->length_penalty, "Beam ranking: logp / len^alpha")->capture_default_str()->check(finite_in(0.0, 10.0));
  t->add_option("--max-out", a->max_out, "Most output tokens (0 = 2 x longest reference + 10)")->capture_default_str()->check(nonneg);
  add_train_flags(t, a->train,
                  {.steps = 2000, .eval_every = 0, .clip_grad_norm = 1.0,
                   .eval_help = "decode --eval-size validation pairs (exact match, nll, BLEU on corpora)"},
                  [a] {
                    check_batch_flags(a->in, a->train);
                    if (!is_corpus(a->data.task) && a->data.min_len > a->data.max_len)
                      throw CLI::ValidationError("--min-len", fmt::format("{} > --max-len {}", a->data.min_len, a->data.max_len));
                    if (a->target > 0 && a->train.eval_every == 0)
                      throw CLI::ValidationError("--target", "needs evaluations: set --eval-every N (N > 0)");
                  });
  cmds.push_back({t, [a] { return train_transformer(*a); }});
  register_gpt_command(train, cmds);
  (void)app;
}

}  // namespace graft::tools
