// CPU kernels: the fast versions (xsimd, OpenMP, oneDNN) in namespace graft::cpu and the
// scalar reference versions in graft::cpu::ref. Each family lives in one .cpp file with both.
// Signatures and contracts: see the kernel list, ops/kernel_list.h.
//
// ISA levels: a portable x86-64 build compiles the kernel files once for the baseline and again
// with -march=x86-64-v3 and -march=x86-64-v4 and -DGRAFT_KERNEL_ISA=avx2 / avx512 (meson.build).
// Each copy opens GRAFT_CPU_NAMESPACE (graft::cpu, graft::cpu::avx2, graft::cpu::avx512), so
// the copies coexist in one library, and ops/cpu/backend.cpp picks one table at run time.
// So graft::cpu::k is always the baseline copy: code that wants the copy this CPU runs calls
// cpu_backend().k (the kernel tests in tests/ops call graft::cpu:: and graft::cpu::ref:: directly).
#pragma once
#include "ops/kernels.h"

#ifdef GRAFT_KERNEL_ISA
#define GRAFT_CPU_NAMESPACE graft::cpu::GRAFT_KERNEL_ISA
#else
#define GRAFT_CPU_NAMESPACE graft::cpu
#endif

namespace graft::cpu {
// Work below this many elements runs on one thread (no OpenMP fork cost for tiny tensors).
inline constexpr int64_t kParallelGrain = 32768;
}  // namespace graft::cpu

namespace GRAFT_CPU_NAMESPACE {

// The fast kernels, one per entry of ops/kernel_list.h ...
#define GRAFT_KERNEL(k, roles, devices, params) void k params;
#include "ops/kernel_list.h"

// ... and their scalar reference twins.
namespace ref {
#define GRAFT_KERNEL(k, roles, devices, params) void k params;
#include "ops/kernel_list.h"
}  // namespace ref

}  // namespace GRAFT_CPU_NAMESPACE
