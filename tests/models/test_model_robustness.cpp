// Models rebuilt from what a user hands graft: tampered run metadata (sizes far out of range,
// floats where integers belong), NaN weights loaded for decoding, and decoding limits.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "models/bert.h"
#include "models/bert_hf.h"
#include "models/decoding.h"
#include "models/gpt.h"
#include "models/seq2seq.h"
#include "models/transformer.h"
#include "nn/safetensors.h"
#include "ops/error.h"
#include "tests/error_of.h"

using namespace graft;
using namespace graft::test;
using namespace graft::models;
namespace fs = std::filesystem;

namespace {


Seq2SeqOptions tiny_seq2seq() {
  return {.src_vocab = 12, .tgt_vocab = 10, .embed = 8, .hidden = 8, .cell = "gru",
          .attention = "bahdanau"};
}

std::string temp_file(const std::string& name) {
  return (fs::temp_directory_path() / fmt::format("graft_robust_{}_{}", ::getpid(), name)).string();
}

}  // namespace

TEST_CASE("Seq2SeqOptions.from_json: sizes out of range name the key, value and range") {
  const std::string layers = error_of([] { Seq2SeqOptions::from_json(R"({"layers": 100000})"); });
  CHECK(has(layers, "key \"layers\" = 100000 is outside the allowed range [1, 16]"));
  const std::string hidden = error_of([] { Seq2SeqOptions::from_json(R"({"hidden": 1e9})"); });
  CHECK(has(hidden, "key \"hidden\" = 1000000000.0 must be an integer in [1, 65536]"));
  CHECK(has(error_of([] { Seq2SeqOptions::from_json(R"({"hidden": 1000000000})"); }),
            "\"hidden\" = 1000000000 is outside"));
  CHECK(has(error_of([] { Seq2SeqOptions::from_json(R"({"embed": 18446744073709551615})"); }),
            "\"embed\" = 18446744073709551615 is outside"));
  CHECK(has(error_of([] { Seq2SeqOptions::from_json(R"({"src_vocab": -3})"); }), "\"src_vocab\" = -3"));
  CHECK(has(error_of([] { Seq2SeqOptions::from_json(R"({"dropout": 7.5})"); }), "\"dropout\" = 7.5"));
  CHECK(has(error_of([] { Seq2SeqOptions::from_json(R"({"layers": 2.5})"); }), "must be an integer"));
  // what a run writes reads back unchanged
  Seq2SeqOptions o = tiny_seq2seq();
  o.layers = 16;
  o.hidden = 65536;
  CHECK(Seq2SeqOptions::from_json(o.to_json()).to_json() == o.to_json());
}

TEST_CASE("TransformerOptions.from_json: sizes out of range name the key, value and range") {
  CHECK(has(error_of([] { TransformerOptions::from_json(R"({"num_decoder_layers": 100000})"); }),
            "key \"num_decoder_layers\" = 100000 is outside the allowed range [1, 64]"));
  CHECK(has(error_of([] { TransformerOptions::from_json(R"({"d_model": 1e9})"); }), "must be an integer"));
  CHECK(has(error_of([] { TransformerOptions::from_json(R"({"dim_feedforward": 1073741824})"); }),
            "\"dim_feedforward\" = 1073741824 is outside"));
  CHECK(has(error_of([] { TransformerOptions::from_json(R"({"max_len": 0})"); }), "\"max_len\" = 0"));
  CHECK(has(error_of([] { TransformerOptions::from_json(R"({"dropout": -0.5})"); }), "\"dropout\" = -0.5"));
  TransformerOptions o{.src_vocab = 20, .tgt_vocab = 20, .d_model = 16, .nhead = 2};
  CHECK(TransformerOptions::from_json(o.to_json()).to_json() == o.to_json());
}

TEST_CASE("BERT configs: sizes far out of range are refused before the model is built") {
  BertConfig c = BertConfig::named("tiny", 100);
  c.num_layers = 100000;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(has(error_of([&] { BertForPreTraining m(c); }),
            "num_layers = 100000 is outside the allowed range [1, 256]"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  c = BertConfig::named("tiny", 100);
  c.hidden_size = 1000000000;
  CHECK(has(error_of([&] { BertForPreTraining m(c); }), "hidden_size = 1000000000"));
  c = BertConfig::named("tiny", 100);
  c.num_heads = 3;  // 128 % 3 != 0
  CHECK(has(error_of([&] { check_bert_config(c, "x"); }), "not divisible"));
  check_bert_config(BertConfig::named("large", 30522), "large");  // real sizes pass
  const std::string hf = R"({"vocab_size": 100, "hidden_size": 128, "num_hidden_layers": 100000,
      "num_attention_heads": 2, "intermediate_size": 512, "max_position_embeddings": 64})";
  CHECK(has(error_of([&] { bert_config_from_hf_json(hf, "config.json"); }),
            "\"num_hidden_layers\" must be an integer in [1, 256], got 100000"));
}

TEST_CASE("all_finite and first_non_finite find NaN and inf in any parameter or buffer") {
  CHECK(nn::all_finite(tensor({1.0, -2.0, 3e38})));
  CHECK(nn::all_finite(full({2}, 1e300, DType::f64)));  // huge but finite: no overflow to inf
  CHECK_FALSE(nn::all_finite(tensor({1.0, std::nan("")})));
  CHECK_FALSE(nn::all_finite(tensor({std::numeric_limits<double>::infinity()})));
  CHECK_FALSE(nn::all_finite(tensor({-std::numeric_limits<double>::infinity()})));
  CHECK(nn::all_finite(arange(3)));   // int64
  CHECK(nn::all_finite(Tensor()));    // undefined
  CHECK(nn::all_finite(zeros({0})));  // empty
  Seq2Seq m(tiny_seq2seq());
  CHECK(m.all_finite());
  CHECK(m.first_non_finite().empty());
  {
    NoGradGuard ng;
    Tensor w = m.out->weight;
    w.select(0, 3).fill_(std::nan(""));
  }
  CHECK_FALSE(m.all_finite());
  CHECK(m.first_non_finite() == "out.weight");
}

TEST_CASE("load_for_inference refuses NaN weights and leaves the model unchanged") {
  const std::string path = temp_file("nan.safetensors");
  manual_seed(1);
  Seq2Seq bad(tiny_seq2seq());
  {
    NoGradGuard ng;
    Tensor w = bad.src_embed->weight;
    w.select(1, 0).fill_(std::numeric_limits<double>::infinity());
  }
  nn::save_safetensors(path, bad.state_dict(), {{"seq2seq", bad.options.to_json()}});
  manual_seed(2);
  Seq2Seq m(tiny_seq2seq());
  const std::vector<double> before = m.out->weight.to_vector<double>();
  const std::string e = error_of([&] { load_for_inference(m, path); });
  CHECK(has(e, path));
  CHECK(has(e, "tensor 'src_embed.weight' holds NaN or infinite values"));
  CHECK(m.out->weight.to_vector<double>() == before);
  CHECK(m.all_finite());
  // good weights load (and decode like the saved model)
  manual_seed(3);
  Seq2Seq good(tiny_seq2seq());
  nn::save_safetensors(path, good.state_dict(), {});
  load_for_inference(m, path);
  CHECK(m.out->weight.to_vector<double>() == good.out->weight.to_vector<double>());
  CHECK(m.translate({{4, 5, 6}}, {.max_len = 5})[0].tokens ==
        good.translate({{4, 5, 6}}, {.max_len = 5})[0].tokens);
  // a model of other sizes: the file is named in the error
  Seq2SeqOptions other = tiny_seq2seq();
  other.hidden = 16;
  Seq2Seq wrong(other);
  CHECK(has(error_of([&] { load_for_inference(wrong, path); }), path));
  fs::remove(path);
}

TEST_CASE("decoding a NaN model is defined (no NaN reaches the sorts); max_len is bounded") {
  Seq2Seq m(tiny_seq2seq());
  {
    NoGradGuard ng;
    for (Tensor p : m.parameters()) p.fill_(std::nan(""));
  }
  const auto greedy = m.translate({{4, 5}, {6}}, {.max_len = 4});
  REQUIRE(greedy.size() == 2);
  CHECK(greedy[0].tokens.size() <= 4);
  const auto beam = m.translate({{4, 5}}, {.beam = 3, .max_len = 4});
  REQUIRE(beam.size() == 1);
  CHECK(has(error_of([&] { m.translate({{4}}, {.max_len = int64_t(1) << 40}); }),
            "max_len must be in [0, 1048576]"));
  auto dec = m.decoder(from_vector(std::vector<int64_t>{4, 5}, {1, 2}),
                       from_vector(std::vector<int64_t>{2}, {1}));
  CHECK(has(error_of([&] { greedy_decode(*dec, 1, {.max_len = int64_t(1) << 21}); }),
            "greedy_decode: max_len must be in [0, 1048576]"));
  CHECK(has(error_of([&] { beam_search(*dec, 1, {.beam = 2, .max_len = -1}); }),
            "beam_search: max_len must be in [0, 1048576]"));
}

TEST_CASE("GPT: generation limits do not overflow; NaN logits are an error, not UB") {
  GPT lm({.vocab = 10, .d_model = 8, .nhead = 2, .num_layers = 1, .max_len = 16});
  CHECK_THROWS_AS(lm.generate({1, 2}, std::numeric_limits<int64_t>::max()), Error);
  CHECK_THROWS_AS(lm.generate({1, 2}, 15), Error);
  CHECK(lm.generate({1, 2}, 14, {.temperature = 0}).size() == 14);
  CHECK(has(error_of([] { sample_token({0.5, std::nan(""), 1.0}, {}, 0.3); }), "NaN"));
  CHECK(sample_token({-std::numeric_limits<double>::infinity(), 1.0}, {}, 0.9) == 1);
}

TEST_CASE("models whose weights cannot fit in memory are refused at once, naming the need") {
  // Every tensor of these fits alone, so only the sum tells: 64 + 64 layers of width 16384
  // need at least 768 GiB.
  TransformerOptions t{.src_vocab = 20, .tgt_vocab = 20, .d_model = 16384, .nhead = 1,
                       .num_encoder_layers = 64, .num_decoder_layers = 64, .dim_feedforward = 32};
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { Transformer m(t); });
  CHECK(has(e, "Transformer: these sizes need at least"));
  CHECK(has(e, "this machine has"));
  Seq2SeqOptions s = tiny_seq2seq();
  s.hidden = 65536, s.layers = 16;
  CHECK(has(error_of([&] { Seq2Seq m(s); }), "Seq2Seq: these sizes need at least"));
  CHECK(has(error_of([] { GPT m({.vocab = 10, .d_model = 65536, .nhead = 1, .num_layers = 64}); }),
            "GPT: these sizes need at least"));
  BertConfig c = BertConfig::named("tiny", 100);
  c.hidden_size = 32768, c.num_heads = 1, c.num_layers = 200;
  CHECK(has(error_of([&] { BertForPreTraining m(c); }), "BertForPreTraining: these sizes need"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("Seq2SeqOptions.from_json: seed is an integer in [0, 2^63 - 1] (a float is refused)") {
  // A float seed outside uint64's range was converted with undefined behaviour.
  CHECK(has(error_of([] { Seq2SeqOptions::from_json(R"({"seed": 1.2e35})"); }), "\"seed\""));
  CHECK(has(error_of([] { Seq2SeqOptions::from_json(R"({"seed": 2.5})"); }), "\"seed\""));
  CHECK(has(error_of([] { Seq2SeqOptions::from_json(R"({"seed": -1})"); }), "\"seed\""));
  CHECK(Seq2SeqOptions::from_json(R"({"seed": 42})").seed == 42);
}
