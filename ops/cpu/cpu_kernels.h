// CPU kernels: the fast versions (xsimd, OpenMP, oneDNN) in namespace graft::cpu and the
// scalar reference versions in graft::cpu::ref. Each family lives in one .cpp file with both.
// Signatures and contracts: see the kernel list, ops/kernel_list.h.
#pragma once
#include "ops/kernels.h"

namespace graft::cpu {

// Work below this many elements runs on one thread (no OpenMP fork cost for tiny tensors).
inline constexpr int64_t kParallelGrain = 32768;

// The fast kernels, one per entry of ops/kernel_list.h ...
#define GRAFT_KERNEL(k, roles, devices, params) void k params;
#include "ops/kernel_list.h"

// ... and their scalar reference twins.
namespace ref {
#define GRAFT_KERNEL(k, roles, devices, params) void k params;
#include "ops/kernel_list.h"
}  // namespace ref

}  // namespace graft::cpu
