// Hugging Face BERT checkpoints: a tiny random-weight transformers.BertForPreTraining
// (tests/fixtures/bert_hf, written by make_fixture.py with transformers 5.24) loads into graft's
// BERT and reproduces the library's hidden states, MLM and NSP logits; save writes it back as
// transformers does; bad checkpoints raise graft::Error and leave the model unchanged.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "models/bert_hf.h"
#include "nn/safetensors.h"
#include "ops/error.h"
#include "tests/temp_dir.h"

using namespace graft;
namespace fs = std::filesystem;

namespace {

const std::string kDir = std::string(GRAFT_FIXTURES) + "/bert_hf";

struct TmpDir : test::TempDir {
  TmpDir() : test::TempDir("bert_hf") {}
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open ", path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void write_text(const std::string& path, const std::string& s) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << s;
}

// A copy of the fixture checkpoint whose config.json and tensors a test may change.
void copy_fixture(const TmpDir& d) {
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt"})
    fs::copy_file(kDir + "/" + f, d.dir / f, fs::copy_options::overwrite_existing);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  auto x = a.to(DType::f64).contiguous().to_vector<double>();
  auto y = b.to(DType::f64).contiguous().to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

Tensor find(const nn::NamedTensors& ts, const std::string& name) {
  for (const auto& [n, t] : ts)
    if (n == name) return t;
  FAIL("no tensor ", name);
  return {};
}

std::vector<double> flat(const nn::Module& m) {
  std::vector<double> v;
  for (const auto& [n, t] : m.state_dict()) {
    auto x = t.to(DType::f64).contiguous().to_vector<double>();
    v.insert(v.end(), x.begin(), x.end());
  }
  return v;
}

}  // namespace

TEST_CASE("bert hf: config.json of the fixture") {
  auto c = models::bert_config_from_hf_json(read_text(kDir + "/config.json"), "fixture");
  CHECK(c.vocab_size == 166);
  CHECK(c.hidden_size == 32);
  CHECK(c.num_layers == 2);
  CHECK(c.num_heads == 4);
  CHECK(c.intermediate_size == 64);
  CHECK(c.max_position_embeddings == 64);
  CHECK(c.type_vocab_size == 2);
  CHECK(c.layer_norm_eps == 1e-12);
  CHECK(c.dropout == 0.1);
  CHECK(c.pad_token_id == 0);
  // Our own writer's text reads back to the same config.
  auto back = models::bert_config_from_hf_json(models::bert_config_to_hf_json(c), "ours");
  CHECK(back.hidden_size == c.hidden_size);
  CHECK(back.num_layers == c.num_layers);
  CHECK(back.layer_norm_eps == c.layer_norm_eps);
  CHECK(back.pad_token_id == c.pad_token_id);
}

TEST_CASE("bert hf: hidden states, MLM and NSP logits match transformers to 1e-4") {
  auto m = models::load_hf_bert(kDir);
  m->eval();
  NoGradGuard no_grad;
  auto ex = nn::load_safetensors(kDir + "/expected.safetensors").tensors;
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    auto get = [&](const char* n) { return find(ex, fmt::format("case{}.{}", k, n)); };
    Tensor ids = get("input_ids"), types = get("token_type_ids");
    // The fixture's attention mask is graft's rule: ids != [PAD].
    CHECK(max_abs_diff(get("attention_mask"), ne(ids, zeros(ids.shape(), DType::i64))) == 0);
    auto o = models::bert_forward_hf(*m, ids, types);
    const double dh = max_abs_diff(o.last_hidden_state, get("last_hidden_state"));
    const double dm = max_abs_diff(o.mlm_logits, get("mlm_logits"));
    const double dn = max_abs_diff(o.nsp_logits, get("nsp_logits"));
    MESSAGE("case ", k, ": max |diff| hidden ", dh, ", mlm ", dm, ", nsp ", dn);
    CHECK(dh < 1e-4);
    CHECK(dm < 1e-4);
    CHECK(dn < 1e-4);
    // The pretraining loss path (MLM head gathered at labelled positions) gives the same rows.
    std::vector<int64_t> lab(size_t(ids.numel()), -100), id = ids.to_vector<int64_t>();
    std::vector<int64_t> rows;
    for (size_t i = 0; i < lab.size(); i += 3)
      if (id[i] != 0) lab[i] = id[i], rows.push_back(int64_t(i));
    auto l = m->loss(ids, types, from_vector(lab, ids.shape()),
                     zeros({ids.size(0)}, DType::i64));
    Tensor want = index_select(get("mlm_logits").reshape({-1, m->config.vocab_size}), 0,
                               from_vector(rows, {int64_t(rows.size())}));
    CHECK(max_abs_diff(l.mlm_logits, want) < 1e-4);
    CHECK(max_abs_diff(l.nsp_logits, get("nsp_logits")) < 1e-4);
  }
}

TEST_CASE("bert hf: a float64 model loads the checkpoint and matches too") {
  auto c = models::bert_config_from_hf_json(read_text(kDir + "/config.json"), "fixture");
  models::BertForPreTraining m(c);
  m.to(DType::f64);
  models::load_hf_bert_into(m, kDir);
  CHECK(m.word_embeddings->weight.dtype() == DType::f64);
  m.eval();
  NoGradGuard no_grad;
  auto ex = nn::load_safetensors(kDir + "/expected.safetensors").tensors;
  auto o = models::bert_forward_hf(m, find(ex, "case1.input_ids"), find(ex, "case1.token_type_ids"));
  CHECK(max_abs_diff(o.mlm_logits, find(ex, "case1.mlm_logits")) < 1e-4);
}

TEST_CASE("bert hf: save writes what transformers wrote; reload gives identical tensors") {
  auto m = models::load_hf_bert(kDir);
  TmpDir d;
  models::save_hf_bert(*m, d.str());
  auto ours = nn::load_safetensors(d.str() + "/model.safetensors");
  auto theirs = nn::load_safetensors(kDir + "/model.safetensors");
  CHECK(ours.metadata == theirs.metadata);
  REQUIRE(ours.tensors.size() == theirs.tensors.size());
  for (size_t i = 0; i < ours.tensors.size(); ++i) {
    CAPTURE(theirs.tensors[i].first);
    CHECK(ours.tensors[i].first == theirs.tensors[i].first);  // same names, same order
    CHECK(ours.tensors[i].second.dtype() == DType::f32);
    CHECK(max_abs_diff(ours.tensors[i].second, theirs.tensors[i].second) == 0);
  }
  // Same layout as the reference writer: the file is byte for byte transformers' own.
  CHECK(read_text(d.str() + "/model.safetensors") == read_text(kDir + "/model.safetensors"));
  auto c = models::bert_config_from_hf_json(read_text(d.str() + "/config.json"), "saved");
  CHECK(c.vocab_size == m->config.vocab_size);
  CHECK(c.intermediate_size == m->config.intermediate_size);
  auto again = models::load_hf_bert(d.str());
  CHECK(flat(*again) == flat(*m));
}

TEST_CASE("bert hf: unsupported or corrupt config.json is a graft::Error") {
  const std::string good = read_text(kDir + "/config.json");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  auto bad = [&](const std::string& text, const char* needle) {
    CAPTURE(needle);
    try {
      models::bert_config_from_hf_json(text, "test");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  bad("{\"hidden_size\": 32", "not valid JSON");
  bad("[1, 2]", "JSON object");
  bad(with("\"hidden_act\": \"gelu\"", "\"hidden_act\": \"relu\""), "hidden_act");
  bad(with("\"hidden_size\": 32", "\"hidden_size\": 30"), "multiple of num_attention_heads");
  bad(with("\"hidden_size\": 32", "\"hidden_size\": -32"), "hidden_size");
  bad(with("\"hidden_size\": 32", "\"hidden_size\": \"32\""), "hidden_size");
  bad(with("\"hidden_size\": 32,", ""), "has no \"hidden_size\"");
  bad(with("\"vocab_size\": 166", "\"vocab_size\": 99999999999"), "vocab_size");
  bad(with("\"model_type\": \"bert\"", "\"model_type\": \"roberta\""), "model_type");
  bad(with("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false"), "tie_word");
  bad(with("\"is_decoder\": false", "\"is_decoder\": true"), "is_decoder");
  bad(with("\"pad_token_id\": 0", "\"pad_token_id\": 500"), "pad_token_id");
  bad(with("\"attention_probs_dropout_prob\": 0.1", "\"attention_probs_dropout_prob\": 0.2"),
      "one dropout rate");
  bad(with("\"layer_norm_eps\": 1e-12", "\"layer_norm_eps\": 0"), "layer_norm_eps");
}

TEST_CASE("bert hf: bad checkpoints are errors and leave the model as it was") {
  auto c = models::bert_config_from_hf_json(read_text(kDir + "/config.json"), "fixture");
  models::BertForPreTraining m(c);
  const std::vector<double> before = flat(m);
  auto theirs = nn::load_safetensors(kDir + "/model.safetensors").tensors;
  // Writes `tensors` as the checkpoint of a fresh copy of the fixture, then tries to load it.
  auto expect_error = [&](const nn::NamedTensors& tensors, const char* needle) {
    CAPTURE(needle);
    TmpDir d;
    copy_fixture(d);
    nn::save_safetensors(d.str() + "/model.safetensors", tensors, {{"format", "pt"}});
    try {
      models::load_hf_bert_into(m, d.str());
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
    CHECK_THROWS_AS(models::load_hf_bert(d.str()), Error);
    CHECK(flat(m) == before);
  };
  // The fixture's tensors with f(name, tensor) applied; an undefined result drops the tensor.
  auto edit = [&](auto f) {
    nn::NamedTensors t;
    for (const auto& [n, v] : theirs)
      if (Tensor x = f(n, v); x.defined()) t.emplace_back(n, x);
    return t;
  };
  const std::string q = "bert.encoder.layer.1.attention.self.query.weight";
  expect_error(edit([&](const std::string& n, const Tensor& v) {
                 return n == q ? Tensor() : v;
               }), "missing tensor 'encoder.layer.1.attention.self.query.weight'");
  expect_error(edit([&](const std::string& n, const Tensor& v) {
                 return n == q ? zeros({32, 31}) : v;
               }), "shape");
  expect_error(edit([&](const std::string& n, const Tensor& v) {
                 return n == q ? zeros({32, 32}, DType::i64) : v;
               }), "dtype");
  auto extra = theirs;
  extra.emplace_back("bert.encoder.layer.2.output.dense.bias", zeros({32}));
  expect_error(extra, "unexpected tensor");
  auto untied = theirs;
  untied.emplace_back("cls.predictions.decoder.weight", zeros({166, 32}));
  expect_error(untied, "tied");

  // A config of other sizes, a truncated file, a pickle-only directory, no directory at all.
  TmpDir d;
  copy_fixture(d);
  std::string cfg = read_text(kDir + "/config.json");
  write_text(d.str() + "/config.json", cfg.replace(cfg.find("\"intermediate_size\": 64"), 23,
                                                   "\"intermediate_size\": 128"));
  CHECK_THROWS_WITH_AS(models::load_hf_bert_into(m, d.str()),
                       doctest::Contains("use load_hf_bert"), Error);
  copy_fixture(d);
  std::string bytes = read_text(kDir + "/model.safetensors");
  write_text(d.str() + "/model.safetensors", bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_AS(models::load_hf_bert_into(m, d.str()), Error);
  fs::remove(d.dir / "model.safetensors");
  write_text(d.str() + "/pytorch_model.bin", "PK");
  CHECK_THROWS_WITH_AS(models::load_hf_bert_into(m, d.str()),
                       doctest::Contains("safetensors only"), Error);
  fs::remove(d.dir / "config.json");
  CHECK_THROWS_WITH_AS(models::load_hf_bert(d.str()), doctest::Contains("config.json"), Error);
  CHECK_THROWS_AS(models::load_hf_bert(d.str() + "/nowhere"), Error);
  CHECK(flat(m) == before);
}

TEST_CASE("bert hf: older names (gamma/beta, no bert. prefix, stored decoder) load the same") {
  auto theirs = nn::load_safetensors(kDir + "/model.safetensors").tensors;
  nn::NamedTensors old;
  for (auto [n, v] : theirs) {
    if (n.rfind("bert.", 0) == 0) n = n.substr(5);
    if (n.size() > 16 && n.compare(n.size() - 16, 16, "LayerNorm.weight") == 0)
      n = n.substr(0, n.size() - 6) + "gamma";
    if (n.size() > 14 && n.compare(n.size() - 14, 14, "LayerNorm.bias") == 0)
      n = n.substr(0, n.size() - 4) + "beta";
    if (n == "cls.predictions.bias") n = "cls.predictions.decoder.bias";
    old.emplace_back(n, v);
  }
  old.emplace_back("cls.predictions.decoder.weight",
                   find(theirs, "bert.embeddings.word_embeddings.weight"));
  old.emplace_back("embeddings.position_ids", arange(64).reshape({1, 64}));
  TmpDir d;
  copy_fixture(d);
  nn::save_safetensors(d.str() + "/model.safetensors", old);
  auto a = models::load_hf_bert(d.str());
  auto b = models::load_hf_bert(kDir);
  CHECK(flat(*a) == flat(*b));
}

TEST_CASE("bert hf: a sharded checkpoint (index + 2 shards) loads as the single file does") {
  auto theirs = nn::load_safetensors(kDir + "/model.safetensors").tensors;
  TmpDir d;
  copy_fixture(d);
  fs::remove(d.dir / "model.safetensors");
  nn::NamedTensors first, second;
  std::string map;
  for (size_t i = 0; i < theirs.size(); ++i) {
    const bool one = i < theirs.size() / 2;
    (one ? first : second).push_back(theirs[i]);
    map += fmt::format("{}\"{}\": \"model-0000{}-of-00002.safetensors\"", map.empty() ? "" : ", ",
                       theirs[i].first, one ? 1 : 2);
  }
  nn::save_safetensors(d.str() + "/model-00001-of-00002.safetensors", first, {{"format", "pt"}});
  nn::save_safetensors(d.str() + "/model-00002-of-00002.safetensors", second, {{"format", "pt"}});
  write_text(d.str() + "/model.safetensors.index.json",
             "{\"metadata\": {}, \"weight_map\": {" + map + "}}");
  auto a = models::load_hf_bert(d.str());
  auto b = models::load_hf_bert(kDir);
  CHECK(flat(*a) == flat(*b));
  // a missing shard is an error naming it
  fs::remove(d.dir / "model-00002-of-00002.safetensors");
  CHECK_THROWS_WITH_AS(models::load_hf_bert(d.str()),
                       doctest::Contains("model-00002-of-00002.safetensors is missing"), Error);
}
