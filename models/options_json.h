// Reading model options back from JSON (a run's model.safetensors metadata, config files).
// Such text comes from disk and may be damaged or tampered with, so every value is checked
// for its type and for the range the command-line flags allow: "layers": 100000 gets an error
// naming the key, the value and the range instead of an hour of building layers, and
// "hidden": 1e9 (a float) is refused before anything is allocated.
//
//   for (auto& [k, v] : j.items())
//     if (k == "hidden") o.hidden = json_int(v, "Seq2SeqOptions", k, 1, 65536);
//
// An options struct with many fields lists them once, as OptionField rows, and gets both
// directions from that list (options_to_json, options_from_json).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ops/error.h"
#include "ops/storage.h"

namespace graft::models {

// An integer in [lo, hi]; graft::Error "<owner>: key "<key>" = <value> ..." otherwise.
inline int64_t json_int(const nlohmann::json& v, const char* owner, const std::string& key,
                        int64_t lo, int64_t hi) {
  GRAFT_CHECK(v.is_number_integer(), "{}: key \"{}\" = {} must be an integer in [{}, {}]", owner,
              key, v.dump(), lo, hi);
  // A positive value above int64's range is held unsigned; it is out of range either way.
  const bool fits = !v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(INT64_MAX);
  const int64_t x = fits ? v.get<int64_t>() : INT64_MAX;
  GRAFT_CHECK(fits && x >= lo && x <= hi, "{}: key \"{}\" = {} is outside the allowed range [{}, "
              "{}]; hint: the file was damaged or edited, use the one the run wrote",
              owner, key, v.dump(), lo, hi);
  return x;
}

// A finite number in [lo, hi].
inline double json_real(const nlohmann::json& v, const char* owner, const std::string& key,
                        double lo, double hi) {
  GRAFT_CHECK(v.is_number(), "{}: key \"{}\" = {} must be a number in [{}, {}]", owner, key,
              v.dump(), lo, hi);
  const double x = v.get<double>();
  GRAFT_CHECK(std::isfinite(x) && x >= lo && x <= hi, "{}: key \"{}\" = {} is outside the "
              "allowed range [{}, {}]; hint: the file was damaged or edited, use the one the run "
              "wrote", owner, key, v.dump(), lo, hi);
  return x;
}

// One member of an options struct O: its JSON key and, for numbers, the range a value read
// back must lie in (strings and booleans take any value of their type).
template <class O> struct OptionField {
  using Member = std::variant<int64_t O::*, uint64_t O::*, double O::*, bool O::*, std::string O::*>;
  const char* key;
  Member member;
  int64_t lo = 0, hi = 0;    // integers
  double rlo = 0, rhi = 0;   // reals
  OptionField(const char* k, int64_t O::*m, int64_t l, int64_t h) : key(k), member(m), lo(l), hi(h) {}
  OptionField(const char* k, uint64_t O::*m, int64_t l, int64_t h) : key(k), member(m), lo(l), hi(h) {}
  OptionField(const char* k, double O::*m, double l, double h) : key(k), member(m), rlo(l), rhi(h) {}
  OptionField(const char* k, bool O::*m) : key(k), member(m) {}
  OptionField(const char* k, std::string O::*m) : key(k), member(m) {}
};

// The fields of `o` as a JSON object, in the order listed, indented by one space.
template <class O>
std::string options_to_json(const O& o, const std::vector<OptionField<O>>& fields) {
  nlohmann::ordered_json j;
  for (const OptionField<O>& f : fields) std::visit([&](auto m) { j[f.key] = o.*m; }, f.member);
  return j.dump(1);
}

// Options read from a JSON object: the listed keys (any subset, any order; the rest keep their
// defaults), each checked for its type and range. graft::Error starting with `owner` for bad
// JSON, a value of the wrong type or out of range, or a key that is not listed.
template <class O>
O options_from_json(const std::string& text, const char* owner, const std::vector<OptionField<O>>& fields) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", owner, e.what()));
  }
  GRAFT_CHECK(j.is_object(), "{}: expected a JSON object", owner);
  O o;
  for (auto it = j.begin(); it != j.end(); ++it) {
    // named references, not a structured binding: the lambda below captures them
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    const OptionField<O>* f = nullptr;
    for (const OptionField<O>& c : fields)
      if (key == c.key) f = &c;
    GRAFT_CHECK(f != nullptr, "{}: unknown key \"{}\"", owner, key);
    try {
      std::visit([&](auto m) {
        using T = std::remove_reference_t<decltype(o.*m)>;
        if constexpr (std::is_same_v<T, int64_t>) o.*m = json_int(v, owner, key, f->lo, f->hi);
        else if constexpr (std::is_same_v<T, uint64_t>) o.*m = uint64_t(json_int(v, owner, key, f->lo, f->hi));
        else if constexpr (std::is_same_v<T, double>) o.*m = json_real(v, owner, key, f->rlo, f->rhi);
        else o.*m = v.template get<T>();
      }, f->member);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: key \"{}\" has the wrong type: {}", owner, key, e.what()));
    }
  }
  return o;
}

// Largest sizes accepted from JSON; they match the flags of graft train (vocabularies come
// from the data: a word vocabulary of up to a million tokens plus the specials).
inline constexpr int64_t kMaxJsonVocab = int64_t(1) << 24;
inline constexpr int64_t kMaxJsonWidth = 65536;       // embed, hidden, d_model
inline constexpr int64_t kMaxJsonFeedForward = 1 << 20;
inline constexpr int64_t kMaxJsonPositions = 1 << 20;  // max_len

// graft::Error when a model's float32 weights alone (`params`, a lower bound the model
// computes from its sizes, in a double: it may exceed int64) exceed this machine's physical
// memory. Each tensor is checked when allocated as well, but a model whose tensors fit one by
// one could take minutes of initialising gigabytes before the sum is refused; this says so at
// once.
inline void check_model_fits(const char* model, double params) {
  const double bytes = 4.0 * params, phys = double(physical_memory_bytes());
  GRAFT_CHECK(phys <= 0 || bytes <= phys, "{}: these sizes need at least {} for {:.4g} float32 "
              "weights; this machine has {} of memory; hint: use smaller sizes (width, layers, "
              "vocabulary, max_len)", model, format_bytes(bytes), params, format_bytes(phys));
}

}  // namespace graft::models
