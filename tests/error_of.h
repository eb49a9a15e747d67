// What the bad-input tests ask of a graft::Error: the message f throws, and whether a message
// contains a part.
//
//   CHECK(has(error_of([&] { load("x"); }), "cannot open"));
#pragma once
#include <string>

#include "ops/error.h"

namespace graft::test {

// The message of the graft::Error thrown by f, or a marker (that no test expects) when none is.
template <class F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no graft::Error thrown>";
}

inline bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
inline bool contains(const std::string& s, const std::string& part) { return has(s, part); }

}  // namespace graft::test
