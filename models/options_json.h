// Reading model options back from JSON (a run's model.safetensors metadata, config files).
// Such text comes from disk and may be damaged or tampered with, so every value is checked
// for its type and for the range the command-line flags allow: "layers": 100000 gets an error
// naming the key, the value and the range instead of an hour of building layers, and
// "hidden": 1e9 (a float) is refused before anything is allocated.
//
//   for (auto& [k, v] : j.items())
//     if (k == "hidden") o.hidden = json_int(v, "Seq2SeqOptions", k, 1, 65536);
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

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
