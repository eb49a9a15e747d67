// What every example shares: its main() (run_example), its last line and exit status (verdict)
// and, for the examples that train, the --steps / --quick flags (parse_steps).
//
// run_example runs the body and turns an exception (a graft::Error for a bad flag or a missing
// file) into one line on stderr, "<name>: error: <what>", and exit status 1.
//
//   int main(int argc, char** argv) { return run_example("spirals", [&] { return run(argc, argv); }); }
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>

#include <fmt/format.h>

#include "ops/error.h"

template <class F> int run_example(const char* name, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: error: {}\n", name, e.what());
    return 1;
  }
}

// The example's last line and exit status: "FAILED: <failure>" and 1 when `failure` is not
// empty, else "OK" (with ": <success>" when that is given) and 0. `lead` is printed first.
inline int verdict(const std::string& failure, const std::string& success = "", const char* lead = "") {
  if (!failure.empty()) {
    fmt::print("{}FAILED: {}\n", lead, failure);
    return 1;
  }
  fmt::print("{}OK{}{}\n", lead, success.empty() ? "" : ": ", success);
  return 0;
}

// The flags of an example that trains: --steps N (default `steps`) and --quick (`quick_steps`,
// for CI); the later flag wins. `more(i)`, when given, may take another flag at argv[i]
// (advancing i past its value) and says whether it did. Any other argument is a graft::Error
// "unknown argument '<arg>'", followed by "; usage: <usage>" when `usage` is not empty.
inline int64_t parse_steps(int argc, char** argv, int64_t steps, int64_t quick_steps,
                           const std::string& usage, const std::function<bool(int&)>& more = {}) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) steps = quick_steps;
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::stoll(argv[++i]);
    else if (!more || !more(i))
      throw graft::Error(fmt::format("unknown argument '{}'{}", argv[i],
                                     usage.empty() ? std::string() : "; usage: " + usage));
  }
  return steps;
}
