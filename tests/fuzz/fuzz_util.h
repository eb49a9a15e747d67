// Helpers shared by the libFuzzer targets in this folder (header-only: each target is one
// compile unit plus the library code under test, see meson.build).
//
// Readers that take a path get the fuzz input through a scratch file: one private directory
// per process (under /dev/shm when it exists, so no disk writes), removed at exit.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

namespace graft::fuzz {

// The process's scratch directory, created on first use. (Held by a pointer that is never
// freed: the exit handler that removes the directory runs after static destructors.)
inline const std::string& scratch_dir() {
  static const std::string* const dir = [] {
    std::string base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    if (const char* t = std::getenv("GRAFT_FUZZ_TMP")) base = t;
    auto* path = new std::string(base + "/graft-fuzz-XXXXXX");
    if (::mkdtemp(path->data()) == nullptr) {
      std::perror("graft fuzz: mkdtemp");
      std::abort();
    }
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return path;
  }();
  return *dir;
}

// Writes `bytes` to scratch_dir()/name (replacing it) and returns the path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0) {
    std::perror("graft fuzz: writing a scratch file");
    std::abort();
  }
  return path;
}

// A property of the code under test does not hold: print why and crash, so that libFuzzer
// saves the input.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "graft fuzz: property violated: %s\n", what);
  std::fflush(stderr);
  __builtin_trap();
}

#define GRAFT_FUZZ_EXPECT(cond) \
  do {                          \
    if (!(cond)) ::graft::fuzz::fail(#cond); \
  } while (0)

// Splits "head\0tail" at the first NUL byte; without one, head and tail are both the whole text.
inline std::pair<std::string_view, std::string_view> split_at_nul(std::string_view s) {
  const size_t nul = s.find('\0');
  if (nul == std::string_view::npos) return {s, s};
  return {s.substr(0, nul), s.substr(nul + 1)};
}

}  // namespace graft::fuzz
