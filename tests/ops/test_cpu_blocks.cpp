// The CPU block caches behind Storage (ops/cpu_blocks.h): large requests round up to classes
// of a sixteenth of an octave, a freed large block serves the next request of its class (or one
// it is at most 50% larger than) as it is, and the cache gives its blocks back on request.
#include <cstdint>
#include <cstring>

#include "ops/cpu_blocks.h"
#include "ops/storage.h"
#include "tests/ops/kernel_test_util.h"

namespace {
constexpr size_t kMiB = size_t(1) << 20;
}  // namespace

using graft::detail::cpu_alloc;
using graft::detail::cpu_block_size;
using graft::detail::cpu_free;
using graft::detail::large_block_stats;

TEST_CASE("cpu blocks: large sizes round up by at most 6.25%, to classes") {
  CHECK(cpu_block_size(1000) == 1000);            // small: as asked
  CHECK(cpu_block_size(kMiB - 1) == kMiB - 1);
  CHECK(cpu_block_size(kMiB) == kMiB);            // 2^20 is a class
  CHECK(cpu_block_size(kMiB + 1) == kMiB + kMiB / 16);
  CHECK(cpu_block_size(3 * kMiB) == 3 * kMiB);    // 2^21 (1 + 8/16)
  size_t prev = 0;
  for (size_t n = kMiB; n < 300 * kMiB; n += 12345 * 7 + n / 9) {
    const size_t s = cpu_block_size(n);
    CHECK(s >= n);
    CHECK(double(s) <= 1.0625 * double(n));
    CHECK(s >= prev);  // monotone
    CHECK(cpu_block_size(s) == s);  // a class is its own class
    prev = s;
  }
}

TEST_CASE("cpu blocks: a freed large block serves the next request of its class") {
  if (!graft::detail::cpu_block_cache_enabled()) {
    MESSAGE("block caches are off (AddressSanitizer or GRAFT_BLOCK_CACHE=0): nothing to check");
    return;
  }
  graft::detail::release_cached_blocks();
  const auto s0 = large_block_stats();
  CHECK(s0.cached_bytes == 0);
  void* p = cpu_alloc(3 * kMiB);
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  std::memset(p, 1, 3 * kMiB);
  CHECK(large_block_stats().in_use_bytes == s0.in_use_bytes + 3 * kMiB);
  cpu_free(p, 3 * kMiB);
  CHECK(large_block_stats().cached_bytes == 3 * kMiB);
  // The same class (3 MiB - 1000 rounds up to 3 MiB), and a request the block is at most 50%
  // larger than, take it back without mapping.
  void* q = cpu_alloc(3 * kMiB - 1000);
  CHECK(q == p);
  CHECK(large_block_stats().hits == s0.hits + 1);
  cpu_free(q, 3 * kMiB - 1000);
  void* r = cpu_alloc(2 * kMiB + kMiB / 8);  // 2.125 MiB: 3 MiB is 41% larger
  CHECK(r == p);
  cpu_free(r, 2 * kMiB + kMiB / 8);
  // A request much smaller than the cached block maps a new one.
  const auto s1 = large_block_stats();
  void* t = cpu_alloc(kMiB);
  CHECK(t != p);
  CHECK(large_block_stats().misses == s1.misses + 1);
  cpu_free(t, kMiB);
  // Storage goes through the same cache: a 3 MiB tensor reuses the block.
  {
    graft::Storage st(graft::Shape{int64_t(3 * kMiB / 4)}, graft::DType::f32, graft::Device::cpu());
    CHECK(st.data() == p);
  }
  graft::detail::release_cached_blocks();
  CHECK(large_block_stats().cached_bytes == 0);
  CHECK(large_block_stats().in_use_bytes == s0.in_use_bytes);
}
