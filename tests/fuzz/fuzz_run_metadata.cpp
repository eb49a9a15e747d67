// libFuzzer target for rebuilding a model from a run's metadata, as `graft translate`, resume and
// fine-tuning do: the JSON options that model.safetensors carries (Seq2SeqOptions::from_json,
// TransformerOptions::from_json, the "gpt" options of `train gpt`) and a Hugging Face BERT
// config.json (bert_config_from_hf_json), each followed by the model's constructor. Tampered
// metadata must raise graft::Error before anything is allocated for it; a crash, a sanitizer
// report, a hang, std::bad_alloc, any other exception or a huge allocation is a bug (run with
// -malloc_limit_mb and -rss_limit_mb, as run.sh does).
//
// Input layout: byte 0 picks the model (value % 4: seq2seq, transformer, gpt, bert), the rest is
// the JSON text.
//
// Building a model is slow for mid-sized options, so the target builds it only when its own
// parameter estimate is small (< kSmall elements: the constructor runs its checks and must
// succeed or raise graft::Error) or absurd (> kAbsurd elements, 40 GB of float32: the options
// must be rejected before allocating). In between, only the parse is fuzzed.
//
//   build/tests/fuzz/fuzz_run_metadata -dict=tests/fuzz/run_metadata.dict -malloc_limit_mb=1024 \
//       -rss_limit_mb=2048 -max_total_time=60 /tmp/corpus tests/fuzz/corpus/run_metadata
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "models/bert.h"
#include "models/bert_hf.h"
#include "models/gpt.h"
#include "models/seq2seq.h"
#include "models/transformer.h"
#include "ops/error.h"
#include "tests/fuzz/fuzz_util.h"

using namespace graft;

namespace {

constexpr double kSmall = 4e6, kAbsurd = 1e10;

bool should_build(double elements) {
  return !std::isfinite(elements) || elements < kSmall || elements > kAbsurd;
}
double d(int64_t v) { return std::fabs(double(v)); }

// Parameter estimates (upper bounds, in elements) from the options alone.
double estimate(const models::Seq2SeqOptions& o) {
  const double E = d(o.embed), H = d(o.hidden), L = d(o.layers);
  const double A = o.attn_dim ? d(o.attn_dim) : H;
  const double rnn = 4 * ((E + 2 * H) * H + H * H + 2 * H);  // one LSTM layer, one direction
  return (d(o.src_vocab) + d(o.tgt_vocab)) * E + 3 * L * rnn + 4 * A * H + 2 * H * H +
         H * d(o.tgt_vocab) + d(o.window);
}
double estimate(const models::TransformerOptions& o) {
  const double D = d(o.d_model), F = d(o.dim_feedforward);
  const double layer = 8 * D * D + 2 * D * F + F + 10 * D;  // self + cross attention, FFN, norms
  return (d(o.src_vocab) + 2 * d(o.tgt_vocab)) * D +
         (d(o.num_encoder_layers) + d(o.num_decoder_layers)) * layer + d(o.max_len) * D;
}
double estimate(const models::GPTOptions& o) {
  const double D = d(o.d_model), F = o.dim_feedforward ? d(o.dim_feedforward) : 4 * D;
  return (d(o.vocab) + d(o.max_len)) * D + d(o.num_layers) * (4 * D * D + 2 * D * F + F + 10 * D);
}
double estimate(const models::BertConfig& c) {
  const double C = d(c.hidden_size), I = d(c.intermediate_size);
  return (d(c.vocab_size) + d(c.max_position_embeddings) + d(c.type_vocab_size)) * C +
         d(c.num_layers) * (4 * C * C + 2 * C * I + I + 10 * C) + 2 * C * C + d(c.vocab_size);
}

void seq2seq(const std::string& text) {
  const models::Seq2SeqOptions o = models::Seq2SeqOptions::from_json(text);
  if (!should_build(estimate(o))) return;
  models::Seq2Seq m(o);
  // What a run saves must load back to the same options.
  GRAFT_FUZZ_EXPECT(models::Seq2SeqOptions::from_json(o.to_json()).to_json() == o.to_json());
}

void transformer(const std::string& text) {
  const models::TransformerOptions o = models::TransformerOptions::from_json(text);
  if (!should_build(estimate(o))) return;
  models::Transformer m(o);
  GRAFT_FUZZ_EXPECT(models::TransformerOptions::from_json(o.to_json()).to_json() == o.to_json());
}

// `train gpt` stores its options as JSON under "gpt" and graft has no parser for them yet, so
// the target reads them itself: any integer or number reaches the constructor, whose checks are
// what is fuzzed. Keys it does not know are the run's other settings (context, data, ...).
void gpt(const std::string& text) {
  models::GPTOptions o;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return;  // the target's own parse: not graft's code
  }
  if (!j.is_object()) return;
  auto int_of = [](const nlohmann::json& v, int64_t& out) {
    // (nlohmann's get<int64_t>() of a float outside int64's range is undefined behaviour)
    if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
      out = v.get<int64_t>();
  };
  for (const auto& [k, v] : j.items()) {
    if (k == "vocab") int_of(v, o.vocab);
    else if (k == "d_model") int_of(v, o.d_model);
    else if (k == "nhead") int_of(v, o.nhead);
    else if (k == "num_layers") int_of(v, o.num_layers);
    else if (k == "dim_feedforward") int_of(v, o.dim_feedforward);
    else if (k == "max_len") int_of(v, o.max_len);
    else if (k == "dropout" && v.is_number()) o.dropout = v.get<double>();
    else if (k == "activation" && v.is_string()) o.activation = v.get<std::string>();
  }
  if (!should_build(estimate(o))) return;
  models::GPT m(o);
}

void bert(const std::string& text) {
  const models::BertConfig c = models::bert_config_from_hf_json(text, "fuzz/config.json");
  if (!should_build(estimate(c))) return;
  models::BertForPreTraining m(c);
  const models::BertConfig back = models::bert_config_from_hf_json(models::bert_config_to_hf_json(c), "copy");
  GRAFT_FUZZ_EXPECT(models::bert_config_to_hf_json(back) == models::bert_config_to_hf_json(c));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: seq2seq(text); break;
      case 1: transformer(text); break;
      case 2: gpt(text); break;
      default: bert(text); break;
    }
  } catch (const Error&) {
  }
  return 0;
}
