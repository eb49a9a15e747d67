// The monotonic clock of nn/run_files.h.
#include "nn/run_files.h"

#include <chrono>

namespace graft::nn {

double monotonic_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace graft::nn
