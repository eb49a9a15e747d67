// `graft sample RUN_DIR`: text sampled from the character-level GPT of a `graft train gpt` run
// (models/gpt.h, GPT::generate with its KV cache): --samples lines, each the prompt followed by
// at most --tokens sampled characters, ending early where the model ends the line (<eos>).
//
//   graft train gpt --steps 2000 --run-dir runs/gpt-date
//   graft sample runs/gpt-date --prompt "3rd of M" --tokens 40 --temperature 0.8 --top-k 20 --seed 7
//
// The model sees the prompt after an <eos>, as the training stream shows the start of a line.
// Sample i draws with seed --seed + i, so the same flags print the same text. A prompt character
// the run's vocabulary (RUN_DIR/vocab.txt) lacks is an error, as is a prompt + --tokens longer
// than the model's context.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "data/tokenizer.h"
#include "models/gpt.h"
#include "models/options_json.h"
#include "ops/error.h"
#include "tools/commands.h"
#include "tools/predict_run.h"
#include "tools/train_flags.h"

namespace graft::tools {

namespace {

struct SampleArgs {
  std::string run_dir, prompt;
  int64_t tokens = 100, top_k = 0, samples = 1, seed = 0;
  double temperature = 1.0, top_p = 1.0;
};

// The "gpt" metadata of `train gpt` (tools/cmd_gpt.cpp) -> GPTOptions, every value range-checked
// as the training flags are (a damaged file gets an error naming the key, not a huge model).
models::GPTOptions gpt_options(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("sample: {}: the \"gpt\" metadata is not valid JSON ({})", path, e.what()));
  }
  GRAFT_CHECK(j.is_object(), "sample: {}: the \"gpt\" metadata is not a JSON object", path);
  models::GPTOptions o;
  auto need = [&](const char* k) -> const nlohmann::json& {
    GRAFT_CHECK(j.contains(k), "sample: {}: the \"gpt\" metadata has no \"{}\"", path, k);
    return j[k];
  };
  const char* who = "GPT options";
  o.vocab = models::json_int(need("vocab"), who, "vocab", 5, models::kMaxJsonVocab);
  o.d_model = models::json_int(need("d_model"), who, "d_model", 2, models::kMaxJsonWidth);
  o.nhead = models::json_int(need("nhead"), who, "nhead", 1, 1024);
  o.num_layers = models::json_int(need("num_layers"), who, "num_layers", 1, 64);
  o.dim_feedforward = models::json_int(need("dim_feedforward"), who, "dim_feedforward", 0,
                                       models::kMaxJsonFeedForward);
  o.dropout = models::json_real(need("dropout"), who, "dropout", 0.0, 0.95);
  o.max_len = models::json_int(need("max_len"), who, "max_len", 1, 8192);
  return o;
}

int run_sample(const SampleArgs& a) {
  const RunModel run = load_run_model(a.run_dir, "sample");
  const std::string kind = run_kind(run);
  GRAFT_CHECK(kind == "gpt", "sample: {} is not a graft train gpt run (its model: {}){}",
              a.run_dir, kind,
              kind == "bert-finetune" || kind == "abcnn"
                  ? "; classify with it: graft predict " + a.run_dir : std::string());
  const auto& md = run.file.metadata;
  GRAFT_CHECK(!md.count("tokenizer") || md.at("tokenizer") == "char", "sample: {}: tokenizer "
              "'{}', graft sample reads character-level runs", run.path, md.at("tokenizer"));
  const models::GPTOptions go = gpt_options(md.at("gpt"), run.path);
  const data::CharTokenizer tok(data::Vocab::load(a.run_dir + "/vocab.txt"));
  GRAFT_CHECK(tok.vocab().size() == go.vocab, "sample: {}/vocab.txt has {} tokens but the model "
              "{}", a.run_dir, tok.vocab().size(), go.vocab);
  std::vector<int64_t> ids{data::kEos};  // a line starts after the previous line's <eos>
  for (const std::string& c : tok.split(a.prompt)) {
    GRAFT_CHECK(tok.vocab().contains(c), "sample: the prompt's character '{}' is not in the "
                "run's vocabulary ({}/vocab.txt, {} characters): the model never saw it", c,
                a.run_dir, tok.vocab().size() - 4);
    ids.push_back(tok.vocab().id(c));
  }
  const int64_t room = go.max_len - int64_t(ids.size());
  GRAFT_CHECK(a.tokens <= room, "sample: the prompt ({} characters) + --tokens {} exceed the "
              "model's context of {} positions (one is the line start); hint: --tokens {}",
              ids.size() - 1, a.tokens, go.max_len, std::max<int64_t>(room, 0));
  models::GPT lm(go);
  load_run_weights(lm, run);
  lm.eval();
  NoGradGuard ng;
  for (int64_t s = 0; s < a.samples; ++s) {
    const std::vector<int64_t> out =
        lm.generate(ids, a.tokens, {.temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p,
                                    .seed = uint64_t(a.seed + s), .eos = data::kEos});
    fmt::print("{}{}\n", a.prompt, tok.decode(out));
  }
  return 0;
}

}  // namespace

void register_sample_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
  (void)train;
  auto a = std::make_shared<SampleArgs>();
  CLI::App* c = app.add_subcommand(
      "sample", "Sample text from a trained graft train gpt run: the prompt and its continuation, "
                "one sample per line");
  c->add_option("run_dir", a->run_dir, "The run directory (graft train gpt --run-dir)")->required();
  c->add_option("--prompt", a->prompt, "Text the samples continue (may be empty)");
  c->add_option("--tokens", a->tokens, "Most characters to sample per line (prompt + tokens fit in the model's context)")->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1) << 20));
  c->add_option("--temperature", a->temperature, "Sampling temperature (0 = greedy)")->capture_default_str()->check(finite_in(0.0, 100.0));
  c->add_option("--top-k", a->top_k, "Sample among the k most likely characters (0 = all)")->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  c->add_option("--top-p", a->top_p, "Nucleus sampling mass")->capture_default_str()->check(finite_in(1e-6, 1.0));
  c->add_option("--samples", a->samples, "Lines to print")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000)));
  c->add_option("--seed", a->seed, "Seed of the first sample (sample i uses seed + i)")->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1) << 62));
  cmds.push_back({c, [a] { return run_sample(*a); }});
}

}  // namespace graft::tools
