// Run directories: the clock of their elapsed times and the layout of their checkpoints. Their
// files are written with atomic_write and read with read_file (ops/file_io.h), so a crash
// leaves each file old or new, never torn.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ops/file_io.h"

namespace graft::nn {

// Seconds on the monotonic clock (for elapsed times).
double monotonic_seconds();

// The step of a checkpoint directory named "step-<digits>" (nn/trainer.h's layout), or -1.
int64_t parse_step_dir(const std::string& name);

// The step directories under run_dir/checkpoint, newest step first (empty if there are none).
std::vector<std::pair<int64_t, std::filesystem::path>> checkpoint_step_dirs(const std::string& run_dir);

}  // namespace graft::nn
