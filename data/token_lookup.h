// The two lookups of a vocabulary kept as a token list (id -> token) and an index
// (token -> id), shared by data::Vocab and data::WordPieceTokenizer.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/error.h"

namespace graft::data {

// The id of `token`, `absent` when the index does not hold it.
inline int64_t find_token_id(const std::unordered_map<std::string, int64_t>& index,
                             const std::string& token, int64_t absent) {
  auto it = index.find(token);
  return it == index.end() ? absent : it->second;
}

// The token of `id`; graft::Error "<who>: id ... is outside the vocabulary [0, n); hint: <hint>"
// when id is not in [0, n).
inline const std::string& token_of_id(const std::vector<std::string>& tokens, int64_t id,
                                      const char* who, const char* hint) {
  const int64_t n = int64_t(tokens.size());
  GRAFT_CHECK(id >= 0 && id < n, "{}: id {} is outside the vocabulary [0, {}); hint: {}", who, id,
              n, hint);
  return tokens[size_t(id)];
}

}  // namespace graft::data
