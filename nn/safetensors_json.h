// Internal to nn/safetensors*.cpp: the strict JSON parser the safetensors header and the sharded
// index share, and the shortening of names from a file for messages.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace graft::nn::detail {

// Parses [begin, end) as JSON, raising graft::Error ("<what>: <kind> ...") for invalid JSON, a
// key twice in one object (ambiguous: which would a reader take?) or nesting deeper than 16.
nlohmann::json parse_json_strict(const char* begin, const char* end, const std::string& what,
                                 const char* kind);

// s, cut to about 200 bytes at a UTF-8 boundary (names from a hostile file can be long).
std::string shown_name(const std::string& s);

}  // namespace graft::nn::detail
