// The clock of run directories' elapsed times. Their files are written with atomic_write and
// read with read_file (ops/file_io.h), so a crash leaves each file old or new, never torn.
#pragma once
#include "ops/file_io.h"

namespace graft::nn {

// Seconds on the monotonic clock (for elapsed times).
double monotonic_seconds();

}  // namespace graft::nn
