// The monotonic clock and the checkpoint layout of nn/run_files.h.
#include "nn/run_files.h"

#include <algorithm>
#include <chrono>

namespace graft::nn {

namespace fs = std::filesystem;

double monotonic_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

int64_t parse_step_dir(const std::string& name) {
  if (name.size() < 6 || name.size() > 5 + 18 || name.rfind("step-", 0) != 0) return -1;
  int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

std::vector<std::pair<int64_t, fs::path>> checkpoint_step_dirs(const std::string& run_dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  const fs::path dir = fs::path(run_dir) / "checkpoint";
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t s = parse_step_dir(e.path().filename().string());
    if (s >= 0 && e.is_directory(ec)) out.emplace_back(s, e.path());
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

}  // namespace graft::nn
