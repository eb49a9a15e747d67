// Small helpers that `graft train bert-*` (tools/cmd_bert.cpp) and `graft train abcnn`
// (tools/cmd_abcnn.cpp) share: the epoch order of their batches, and their one-line results.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace graft::tools {

// Rows [start, start + count) of the endless sequence of epochs over n rows, where epoch e
// visits every row once in an order shuffled with seed + e. A function of its arguments only:
// step s with batch B takes epoch_rows(s * B, B, ...), so a resumed run sees the same batches
// with no state to save.
inline std::vector<int64_t> epoch_rows(int64_t start, int64_t count, int64_t n, uint64_t seed) {
  std::vector<int64_t> out, order;
  int64_t epoch = -1;
  for (int64_t k = start; k < start + count; ++k) {
    if (k / n != epoch) {
      epoch = k / n;
      order.resize(size_t(n));
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937_64(seed + uint64_t(epoch)));
    }
    out.push_back(order[size_t(k % n)]);
  }
  return out;
}

// x rounded to 4 decimals (a results line shows 0.8125, not 0.81249999999999).
inline double round4(double x) { return std::isfinite(x) ? std::round(x * 1e4) / 1e4 : x; }

// j as compact JSON; bytes that are not UTF-8 (a file name may hold any) become U+FFFD instead
// of making nlohmann throw.
template <class Json> std::string json_dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// An object on one line as `{"key": value, "key": value}`: nlohmann escapes every key and
// string (a `"` or a newline in a path stays valid JSON); the spacing is the one the results
// lines always had, so `grep '"test_accuracy": '` keeps working. A non-finite number, which
// JSON cannot hold, is written as null.
inline std::string json_line(const nlohmann::ordered_json& j) {
  std::string s = "{";
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it != j.begin()) s += ", ";
    s += json_dump(nlohmann::ordered_json(it.key())) + ": " + json_dump(it.value());
  }
  return s + "}";
}

}  // namespace graft::tools
