// The main() of every example: runs its body and turns an exception (a graft::Error for a bad
// flag or a missing file) into one line on stderr, "<name>: error: <what>", and exit status 1.
//
//   int main(int argc, char** argv) { return run_example("spirals", [&] { return run(argc, argv); }); }
#pragma once
#include <cstdio>
#include <exception>

#include <fmt/format.h>

template <class F> int run_example(const char* name, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: error: {}\n", name, e.what());
    return 1;
  }
}
