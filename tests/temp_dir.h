// A fresh directory for one test case under the system's temporary directory, removed with
// everything in it at the end:
//
//   graft::test::TempDir tmp("plot", "one_run");   // /tmp/graft_plot_<pid>_one_run
//   save(tmp / "model.safetensors");
#pragma once
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <fmt/format.h>

namespace graft::test {

struct TempDir {
  std::filesystem::path dir;
  // graft_<prefix>_<pid>_<name>; an empty name stands for a clock tick (unique per call).
  // With `create` false the directory is only emptied (for code that must create it itself).
  explicit TempDir(const std::string& prefix, std::string name = "", bool create = true) {
    if (name.empty()) name = std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    dir = std::filesystem::temp_directory_path() / fmt::format("graft_{}_{}_{}", prefix, ::getpid(), name);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (create) std::filesystem::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return dir.string(); }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

}  // namespace graft::test
