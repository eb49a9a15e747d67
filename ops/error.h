// graft::Error — the one exception type for user mistakes; GRAFT_ASSERT for internal invariants.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace graft {

// Thrown for bad user input: wrong shapes, dtypes, devices, indices, files, flags.
// Messages name the op, what was expected, what was given and, where possible, a hint.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Raised by GRAFT_ASSERT: a bug in graft itself, not in the caller's input.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& msg) : std::logic_error(msg) {}
};

}  // namespace graft

// GRAFT_CHECK(cond, "op: fmt {}", args...) -> throws graft::Error with a formatted message.
#define GRAFT_CHECK(cond, ...)                                \
  do {                                                        \
    if (!(cond)) throw ::graft::Error(::fmt::format(__VA_ARGS__)); \
  } while (0)

#define GRAFT_ASSERT(cond)                                                                   \
  do {                                                                                       \
    if (!(cond))                                                                             \
      throw ::graft::InternalError(::fmt::format("graft internal error: {} at {}:{}", #cond, \
                                                 __FILE__, __LINE__));                       \
  } while (0)
