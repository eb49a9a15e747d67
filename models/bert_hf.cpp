// Hugging Face BERT checkpoints (models/bert_hf.h): config.json, tensor names, directory I/O.
#include "models/bert_hf.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "nn/safetensors.h"
#include "ops/error.h"
#include "ops/file_io.h"

namespace graft::models {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr int64_t kMaxSize = int64_t(1) << 24;  // per config size; corrupt values stop here

int64_t get_size(const json& j, const char* key, const std::string& what, bool required,
                 int64_t fallback, int64_t max = kMaxSize) {
  if (!j.contains(key)) {
    GRAFT_CHECK(!required, "load_hf_bert: {}: config.json has no \"{}\"; hint: a BERT config "
                "needs vocab_size, hidden_size, num_hidden_layers, num_attention_heads, "
                "intermediate_size and max_position_embeddings", what, key);
    return fallback;
  }
  const json& v = j[key];
  GRAFT_CHECK(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= max,
              "load_hf_bert: {}: \"{}\" must be an integer in [1, {}], got {}", what, key, max,
              v.dump());
  return v.get<int64_t>();
}

double get_number(const json& j, const char* key, const std::string& what, double fallback,
                  double lo, double hi) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  GRAFT_CHECK(v.is_number() && v.get<double>() >= lo && v.get<double>() < hi,
              "load_hf_bert: {}: \"{}\" must be a number in [{}, {}), got {}", what, key, lo, hi,
              v.dump());
  return v.get<double>();
}

// A string or boolean field that graft's BERT supports for one value only.
template <class V>
void require_value(const json& j, const char* key, const V& supported, const std::string& what,
                   const char* hint) {
  if (!j.contains(key) || j[key].is_null()) return;
  bool ok = false;
  if constexpr (std::is_same_v<V, bool>) ok = j[key].is_boolean() && j[key].get<bool>() == supported;
  else ok = j[key].is_string() && j[key].get<std::string>() == supported;
  GRAFT_CHECK(ok, "load_hf_bert: {}: unsupported {} = {} (graft supports {}); hint: {}", what, key,
              j[key].dump(), json(supported).dump(), hint);
}

// HF's name with the optional "bert." prefix dropped and gamma/beta read as weight/bias.
std::string normalise_name(std::string n) {
  if (n.rfind("bert.", 0) == 0) n = n.substr(5);
  auto ends = [&](const std::string& s) {
    return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  if (ends("LayerNorm.gamma")) n = n.substr(0, n.size() - 5) + "weight";
  else if (ends("LayerNorm.beta")) n = n.substr(0, n.size() - 4) + "bias";
  return n;
}

// HF tensors by normalised name; each lookup marks the name used.
class HfTensors {
 public:
  HfTensors(const nn::NamedTensors& hf, const std::string& what) : what_(what) {
    for (const auto& [name, t] : hf) {
      const std::string n = normalise_name(name);
      GRAFT_CHECK(!map_.count(n), "load_hf_bert: {}: tensors '{}' and another name both map to "
                  "'{}'", what, name, n);
      map_.emplace(n, std::make_pair(name, t));
    }
  }
  bool has(const std::string& n) const { return map_.count(n) > 0; }
  // The tensor `n` (HF name without "bert."), checked against `shape`.
  Tensor take(const std::string& n, const Shape& shape) {
    auto it = map_.find(n);
    GRAFT_CHECK(it != map_.end(), "load_hf_bert: {}: missing tensor '{}' (shape {}); hint: graft "
                "loads BertForPreTraining checkpoints (encoder, pooler, MLM and NSP heads)",
                what_, n, shape);
    const auto& [orig, t] = it->second;
    GRAFT_CHECK(is_floating(t.dtype()), "load_hf_bert: {}: tensor '{}' has dtype {}; hint: "
                "save the checkpoint in float32", what_, orig, dtype_name(t.dtype()));
    GRAFT_CHECK(t.shape() == shape, "load_hf_bert: {}: tensor '{}' has shape {}, expected {} "
                "from config.json", what_, orig, t.shape(), shape);
    used_.insert(n);
    return t;
  }
  void ignore(const std::string& n) { used_.insert(n); }
  void check_all_used() const {
    std::vector<std::string> extra;
    for (const auto& [n, v] : map_)
      if (!used_.count(n)) extra.push_back(v.first);
    GRAFT_CHECK(extra.empty(), "load_hf_bert: {}: {} unexpected tensor(s), e.g. '{}'; hint: the "
                "checkpoint is not a BERT of the sizes in config.json", what_, extra.size(),
                extra.empty() ? "" : extra[0]);
  }

 private:
  std::string what_;
  std::map<std::string, std::pair<std::string, Tensor>> map_;
  std::set<std::string> used_;
};

bool same_values(const Tensor& a, const Tensor& b) {
  return a.to(DType::f64).contiguous().to_vector<double>() ==
         b.to(DType::f64).contiguous().to_vector<double>();
}

}  // namespace

BertConfig bert_config_from_hf_json(const std::string& text, const std::string& what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    GRAFT_CHECK(false, "load_hf_bert: {}: config.json is not valid JSON ({})", what, e.what());
  }
  GRAFT_CHECK(j.is_object(), "load_hf_bert: {}: config.json must hold a JSON object", what);
  require_value(j, "model_type", std::string("bert"), what, "only BERT checkpoints load here");
  require_value(j, "hidden_act", std::string("gelu"), what,
                "graft's BERT uses the exact (erf) GELU");
  require_value(j, "position_embedding_type", std::string("absolute"), what,
                "relative position embeddings are not implemented");
  require_value(j, "is_decoder", false, what, "graft's BERT is an encoder");
  require_value(j, "add_cross_attention", false, what, "graft's BERT is an encoder");
  require_value(j, "tie_word_embeddings", true, what, "graft ties the MLM decoder to the embeddings");
  BertConfig c;
  c.vocab_size = get_size(j, "vocab_size", what, true, 0);
  c.hidden_size = get_size(j, "hidden_size", what, true, 0, 65536);
  c.num_layers = get_size(j, "num_hidden_layers", what, true, 0, 256);
  c.num_heads = get_size(j, "num_attention_heads", what, true, 0, 1024);
  c.intermediate_size = get_size(j, "intermediate_size", what, true, 0, 1 << 20);
  c.max_position_embeddings = get_size(j, "max_position_embeddings", what, true, 0, 1 << 20);
  c.type_vocab_size = get_size(j, "type_vocab_size", what, false, 2, 1024);
  GRAFT_CHECK(c.hidden_size % c.num_heads == 0, "load_hf_bert: {}: hidden_size {} is not a "
              "multiple of num_attention_heads {}", what, c.hidden_size, c.num_heads);
  GRAFT_CHECK(c.vocab_size * c.hidden_size <= (int64_t(1) << 32), "load_hf_bert: {}: vocab_size "
              "{} x hidden_size {} is implausibly large", what, c.vocab_size, c.hidden_size);
  c.layer_norm_eps = get_number(j, "layer_norm_eps", what, 1e-12, 1e-30, 1.0);
  const double hidden_p = get_number(j, "hidden_dropout_prob", what, 0.1, 0.0, 1.0);
  const double attn_p = get_number(j, "attention_probs_dropout_prob", what, 0.1, 0.0, 1.0);
  GRAFT_CHECK(hidden_p == attn_p, "load_hf_bert: {}: hidden_dropout_prob {} differs from "
              "attention_probs_dropout_prob {}; hint: graft's encoder has one dropout rate (set "
              "both to the same value; eval mode does not use them)", what, hidden_p, attn_p);
  c.dropout = hidden_p;
  if (j.contains("pad_token_id") && j["pad_token_id"].is_null()) {
    c.pad_token_id = -1;  // no padding token: nothing is masked
  } else if (j.contains("pad_token_id")) {
    const json& v = j["pad_token_id"];
    GRAFT_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 &&
                    v.get<int64_t>() < c.vocab_size,
                "load_hf_bert: {}: pad_token_id must be an id in [0, {}) or null, got {}", what,
                c.vocab_size, v.dump());
    c.pad_token_id = v.get<int64_t>();
  }
  return c;
}

std::string bert_config_to_hf_json(const BertConfig& c) {
  json j = {{"architectures", {"BertForPreTraining"}},
            {"attention_probs_dropout_prob", c.dropout},
            {"hidden_act", "gelu"},
            {"hidden_dropout_prob", c.dropout},
            {"hidden_size", c.hidden_size},
            {"initializer_range", 0.02},
            {"intermediate_size", c.intermediate_size},
            {"layer_norm_eps", c.layer_norm_eps},
            {"max_position_embeddings", c.max_position_embeddings},
            {"model_type", "bert"},
            {"num_attention_heads", c.num_heads},
            {"num_hidden_layers", c.num_layers},
            {"position_embedding_type", "absolute"},
            {"tie_word_embeddings", true},
            {"dtype", "float32"},        // transformers 5
            {"torch_dtype", "float32"},  // transformers 4
            {"type_vocab_size", c.type_vocab_size},
            {"vocab_size", c.vocab_size}};
  j["pad_token_id"] = c.pad_token_id >= 0 ? json(c.pad_token_id) : json(nullptr);
  return j.dump(2) + "\n";
}

nn::StateDict bert_state_dict_from_hf(const nn::NamedTensors& hf, const BertConfig& c,
                                      DType dtype, const std::string& what) {
  NoGradGuard no_grad;
  HfTensors in(hf, what);
  const int64_t C = c.hidden_size, V = c.vocab_size, F = c.intermediate_size;
  nn::StateDict sd;
  auto put = [&](const std::string& graft_name, const Tensor& t) {
    sd.emplace_back(graft_name, t.to(dtype).contiguous());
  };
  // Same name in both (HF's without the "bert." prefix).
  auto same = [&](const std::string& n, const Shape& shape) { put(n, in.take(n, shape)); };
  auto linear = [&](const std::string& hf_name, const std::string& graft_name, int64_t out,
                    int64_t inp) {
    put(graft_name + ".weight", in.take(hf_name + ".weight", {out, inp}));
    put(graft_name + ".bias", in.take(hf_name + ".bias", {out}));
  };
  auto norm = [&](const std::string& hf_name, const std::string& graft_name) {
    put(graft_name + ".weight", in.take(hf_name + ".weight", {C}));
    put(graft_name + ".bias", in.take(hf_name + ".bias", {C}));
  };
  same("embeddings.word_embeddings.weight", {V, C});
  same("embeddings.position_embeddings.weight", {c.max_position_embeddings, C});
  same("embeddings.token_type_embeddings.weight", {c.type_vocab_size, C});
  norm("embeddings.LayerNorm", "embeddings.LayerNorm");
  in.ignore("embeddings.position_ids");  // a buffer in older checkpoints: arange(max_pos)
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string h = fmt::format("encoder.layer.{}.", i);
    const std::string g = fmt::format("encoder.layers.{}.", i);
    // Packed in-projection: rows [q; k; v], each [C, C].
    std::vector<Tensor> w, b;
    for (const char* p : {"query", "key", "value"}) {
      w.push_back(in.take(h + "attention.self." + p + ".weight", {C, C}).to(dtype));
      b.push_back(in.take(h + "attention.self." + p + ".bias", {C}).to(dtype));
    }
    put(g + "self_attn.in_proj_weight", cat(w, 0));  // [3C, C]
    put(g + "self_attn.in_proj_bias", cat(b, 0));    // [3C]
    linear(h + "attention.output.dense", g + "self_attn.out_proj", C, C);
    norm(h + "attention.output.LayerNorm", g + "norm1");
    linear(h + "intermediate.dense", g + "linear1", F, C);
    linear(h + "output.dense", g + "linear2", C, F);
    norm(h + "output.LayerNorm", g + "norm2");
  }
  linear("pooler.dense", "pooler.dense", C, C);
  linear("cls.predictions.transform.dense", "cls.predictions.transform.dense", C, C);
  norm("cls.predictions.transform.LayerNorm", "cls.predictions.transform.LayerNorm");
  // MLM bias: cls.predictions.bias, or (older files) only cls.predictions.decoder.bias.
  const bool has_bias = in.has("cls.predictions.bias");
  const bool has_dec_bias = in.has("cls.predictions.decoder.bias");
  Tensor bias = in.take(has_bias || !has_dec_bias ? "cls.predictions.bias"
                                                  : "cls.predictions.decoder.bias", {V});
  if (has_bias && has_dec_bias)
    GRAFT_CHECK(same_values(bias, in.take("cls.predictions.decoder.bias", {V})),
                "load_hf_bert: {}: cls.predictions.decoder.bias differs from "
                "cls.predictions.bias; graft has one MLM bias", what);
  put("cls.predictions.bias", bias);
  if (in.has("cls.predictions.decoder.weight"))
    GRAFT_CHECK(same_values(in.take("cls.predictions.decoder.weight", {V, C}),
                            in.take("embeddings.word_embeddings.weight", {V, C})),
                "load_hf_bert: {}: cls.predictions.decoder.weight differs from the word "
                "embeddings; hint: graft's MLM decoder is tied to them (untied is unsupported)",
                what);
  linear("cls.seq_relationship", "cls.seq_relationship", 2, C);
  in.check_all_used();
  return sd;
}

nn::NamedTensors bert_state_dict_to_hf(const BertForPreTraining& m) {
  NoGradGuard no_grad;
  const int64_t C = m.config.hidden_size;
  std::map<std::string, Tensor> g;
  for (const auto& [n, t] : m.state_dict()) g.emplace(n, t);
  nn::NamedTensors out;
  auto put = [&](const std::string& hf_name, const Tensor& t) {
    out.emplace_back(hf_name, t.to(Device::cpu()).to(DType::f32).contiguous());
  };
  auto copy = [&](const std::string& hf_name, const std::string& graft_name) {
    auto it = g.find(graft_name);
    GRAFT_CHECK(it != g.end(), "save_hf_bert: the model has no tensor '{}'", graft_name);
    put(hf_name, it->second);
  };
  auto both = [&](const std::string& hf_name, const std::string& graft_name) {
    copy(hf_name + ".weight", graft_name + ".weight");
    copy(hf_name + ".bias", graft_name + ".bias");
  };
  for (const char* e : {"word_embeddings", "position_embeddings", "token_type_embeddings"})
    copy(fmt::format("bert.embeddings.{}.weight", e), fmt::format("embeddings.{}.weight", e));
  both("bert.embeddings.LayerNorm", "embeddings.LayerNorm");
  for (int64_t i = 0; i < m.config.num_layers; ++i) {
    const std::string h = fmt::format("bert.encoder.layer.{}.", i);
    const std::string p = fmt::format("encoder.layers.{}.", i);
    const Tensor& w = g.at(p + "self_attn.in_proj_weight");  // [3C, C] = [q; k; v]
    const Tensor& b = g.at(p + "self_attn.in_proj_bias");    // [3C]
    const char* qkv[] = {"query", "key", "value"};
    for (int64_t k = 0; k < 3; ++k) {
      put(h + "attention.self." + qkv[k] + ".weight", w.narrow(0, k * C, C));
      put(h + "attention.self." + qkv[k] + ".bias", b.narrow(0, k * C, C));
    }
    both(h + "attention.output.dense", p + "self_attn.out_proj");
    both(h + "attention.output.LayerNorm", p + "norm1");
    both(h + "intermediate.dense", p + "linear1");
    both(h + "output.dense", p + "linear2");
    both(h + "output.LayerNorm", p + "norm2");
  }
  both("bert.pooler.dense", "pooler.dense");
  copy("cls.predictions.bias", "cls.predictions.bias");
  both("cls.predictions.transform.dense", "cls.predictions.transform.dense");
  both("cls.predictions.transform.LayerNorm", "cls.predictions.transform.LayerNorm");
  both("cls.seq_relationship", "cls.seq_relationship");
  return out;
}

namespace {
// Config and graft state dict of a checkpoint directory, fully validated.
std::pair<BertConfig, nn::StateDict> read_checkpoint(const std::string& dir, DType dtype,
                                                     const BertConfig* expect) {
  const fs::path d(dir);
  GRAFT_CHECK(fs::is_directory(d), "load_hf_bert: '{}' is not a directory; hint: pass the "
              "folder save_pretrained wrote (config.json, model.safetensors)", dir);
  const std::string cfg_path = (d / "config.json").string();
  BertConfig c = bert_config_from_hf_json(read_file(cfg_path, "load_hf_bert", "config.json is missing"), cfg_path);
  if (expect)
    GRAFT_CHECK(c.vocab_size == expect->vocab_size && c.hidden_size == expect->hidden_size &&
                    c.num_layers == expect->num_layers && c.num_heads == expect->num_heads &&
                    c.intermediate_size == expect->intermediate_size &&
                    c.max_position_embeddings == expect->max_position_embeddings &&
                    c.type_vocab_size == expect->type_vocab_size,
                "load_hf_bert_into: {} describes vocab={} hidden={} layers={} heads={} ffn={} "
                "positions={} types={}, the model vocab={} hidden={} layers={} heads={} ffn={} "
                "positions={} types={}; hint: use load_hf_bert to build a model from the "
                "checkpoint", cfg_path, c.vocab_size, c.hidden_size, c.num_layers, c.num_heads,
                c.intermediate_size, c.max_position_embeddings, c.type_vocab_size,
                expect->vocab_size, expect->hidden_size, expect->num_layers, expect->num_heads,
                expect->intermediate_size, expect->max_position_embeddings,
                expect->type_vocab_size);
  // one file, or shards listed by the index (nn::load_checkpoint prefers the single file)
  fs::path st = d / "model.safetensors";
  if (!fs::exists(st) && fs::exists(d / "model.safetensors.index.json"))
    st = d / "model.safetensors.index.json";
  GRAFT_CHECK(fs::exists(st), "load_hf_bert: {} has no model.safetensors or "
              "model.safetensors.index.json{}", dir,
              fs::exists(d / "pytorch_model.bin") || fs::exists(d / "pytorch_model.bin.index.json")
                  ? "; hint: graft reads safetensors only: convert pytorch_model.bin with "
                    "transformers (model.save_pretrained(dir, safe_serialization=True))"
                  : "");
  nn::SafetensorsFile f = nn::load_checkpoint(st.string());
  return {c, bert_state_dict_from_hf(f.tensors, c, dtype, st.string())};
}
}  // namespace

std::unique_ptr<BertForPreTraining> load_hf_bert(const std::string& dir) {
  auto [c, sd] = read_checkpoint(dir, DType::f32, nullptr);
  auto m = std::make_unique<BertForPreTraining>(c);
  m->load_state_dict(sd);
  return m;
}

void load_hf_bert_into(BertForPreTraining& m, const std::string& dir) {
  const DType dtype = m.word_embeddings->weight.dtype();
  auto [c, sd] = read_checkpoint(dir, dtype, &m.config);
  m.load_state_dict(sd);  // validates names/shapes/dtypes before copying
}

void save_hf_bert(const BertForPreTraining& m, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  GRAFT_CHECK(fs::is_directory(dir), "save_hf_bert: cannot create directory {}: {}", dir,
              ec.message());
  nn::NamedTensors hf = bert_state_dict_to_hf(m);
  nn::save_safetensors((fs::path(dir) / "model.safetensors").string(), hf, {{"format", "pt"}});
  atomic_write((fs::path(dir) / "config.json").string(), bert_config_to_hf_json(m.config), "save_hf_bert");
}

BertHfOutput bert_forward_hf(BertForPreTraining& m, const Tensor& ids, const Tensor& types) {
  BertHfOutput o;
  o.last_hidden_state = m.encode(ids, types);  // [B, T, C]
  Tensor h = m.mlm_norm->forward(gelu(m.mlm_dense->forward(o.last_hidden_state)));
  o.mlm_logits = linear(h, m.word_embeddings->weight, m.mlm_bias);      // [B, T, V]
  o.nsp_logits = m.seq_relationship->forward(m.pool(o.last_hidden_state));  // [B, 2]
  return o;
}

}  // namespace graft::models
