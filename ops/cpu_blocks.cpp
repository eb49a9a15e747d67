#include "ops/cpu_blocks.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "ops/error.h"
#include "ops/storage.h"

namespace graft::detail {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// GRAFT_BLOCK_CACHE=0 turns both caches off (read once).
bool caching() {
  static const bool on = [] {
    if (kSanitized) return false;
    const char* e = std::getenv("GRAFT_BLOCK_CACHE");
    return !(e && e[0] == '0' && e[1] == '\0');
  }();
  return on;
}

// ---- small blocks: per-thread power-of-two classes 64 B .. 64 KiB

constexpr int kClasses = 11;  // 64 << 10 = 64 KiB
constexpr int kMaxPerClass = 64;

struct SmallCache {
  std::vector<void*> free[kClasses];
  ~SmallCache() {
    for (auto& v : free)
      for (void* p : v) std::free(p);
  }
};
thread_local SmallCache t_small __attribute__((tls_model("initial-exec")));

int small_class(size_t n) {
  int c = 0;
  size_t s = 64;
  while (s < n) s <<= 1, ++c;
  return c;
}

// ---- large blocks: mapped, classes of 1/16 octave, one cache for the process

constexpr size_t kLargeMin = size_t(1) << 20;
constexpr uint64_t kMinCap = uint64_t(256) << 20;

struct Cached {
  void* p;
  uint64_t tick;  // when it was cached: the oldest goes first
};

struct LargeCache {
  std::mutex m;
  std::map<size_t, std::deque<Cached>> free;  // block size -> cached blocks, oldest first
  std::unordered_map<void*, size_t> in_use;   // block -> its size
  uint64_t cached = 0, used = 0, peak_used = 0, tick = 0, hits = 0, misses = 0;
};
// Never destroyed: tensors may be freed during static destruction.
LargeCache& large() {
  static LargeCache* c = new LargeCache;
  return *c;
}

void* map_block(size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
  ::madvise(p, size, MADV_HUGEPAGE);  // advice only: ignored where huge pages are off
#endif
  return p;
}

// Unmaps the oldest cached block; false when the cache is empty. Caller holds c.m.
bool evict_oldest(LargeCache& c) {
  auto oldest = c.free.end();
  for (auto it = c.free.begin(); it != c.free.end(); ++it)
    if (oldest == c.free.end() || it->second.front().tick < oldest->second.front().tick) oldest = it;
  if (oldest == c.free.end()) return false;
  ::munmap(oldest->second.front().p, oldest->first);
  c.cached -= oldest->first;
  oldest->second.pop_front();
  if (oldest->second.empty()) c.free.erase(oldest);
  return true;
}

void* large_alloc(size_t nbytes) {
  const size_t size = cpu_block_size(nbytes);
  LargeCache& c = large();
  std::lock_guard<std::mutex> lock(c.m);
  // The smallest cached block of this class or of one at most 50% larger.
  auto it = c.free.lower_bound(size);
  void* p = nullptr;
  size_t got = size;
  if (it != c.free.end() && it->first <= size + size / 2) {
    got = it->first;
    p = it->second.back().p;  // the most recently cached: its pages are likeliest warm
    it->second.pop_back();
    if (it->second.empty()) c.free.erase(it);
    c.cached -= got;
    ++c.hits;
  } else {
    // Cached blocks give way before graft's memory as a whole would pass physical memory (the
    // kernel would overcommit, then kill a process when the pages are touched).
    const uint64_t phys = physical_memory_bytes();
    while (phys > 0 && live_cpu_bytes() + c.cached + size > phys && evict_oldest(c)) {
    }
    p = map_block(size);
    while (!p && evict_oldest(c)) p = map_block(size);  // out of memory: give back the cache
    if (!p) throw std::bad_alloc();
    ++c.misses;
  }
  try {
    c.in_use.emplace(p, got);
  } catch (const std::bad_alloc&) {  // no memory for the bookkeeping: give the block back
    ::munmap(p, got);
    throw;
  }
  c.used += got;
  c.peak_used = std::max(c.peak_used, c.used);
  return p;
}

void large_free(void* p) {
  LargeCache& c = large();
  std::lock_guard<std::mutex> lock(c.m);
  auto u = c.in_use.find(p);
  GRAFT_ASSERT(u != c.in_use.end());  // every large block was mapped by large_alloc
  const size_t size = u->second;
  c.in_use.erase(u);
  c.used -= size;
  const uint64_t phys = physical_memory_bytes();
  const uint64_t cap = std::min(std::max(kMinCap, 2 * c.peak_used),
                                phys > 0 ? std::max(kMinCap, phys / 4) : kMinCap);
  while (c.cached + size > cap && evict_oldest(c)) {
  }
  if (c.cached + size > cap) {
    ::munmap(p, size);
    return;
  }
  try {
    c.free[size].push_back({p, ++c.tick});
    c.cached += size;
  } catch (const std::bad_alloc&) {  // no memory for the bookkeeping: unmap instead
    ::munmap(p, size);
  }
}

}  // namespace

bool cpu_block_cache_enabled() { return caching(); }

size_t cpu_block_size(size_t nbytes) {
  if (nbytes < kLargeMin) return nbytes;
  // n in (2^k, 2^(k+1)]: round up to a multiple of 2^k / 16, i.e. to 2^k (1 + j/16).
  const int k = int(std::bit_width(nbytes - 1)) - 1;
  const size_t step = size_t(1) << (k - 4);
  return (nbytes + step - 1) / step * step;
}

void* cpu_alloc(size_t nbytes) {
  if (caching() && nbytes >= kLargeMin) return large_alloc(nbytes);
  const int c = small_class(nbytes);
  if (caching() && c < kClasses) {
    auto& v = t_small.free[c];
    if (!v.empty()) {
      void* p = v.back();
      v.pop_back();
      return p;
    }
    void* p = std::aligned_alloc(64, size_t(64) << c);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  return p;
}

void cpu_free(void* p, size_t nbytes) {
  if (caching() && nbytes >= kLargeMin) return large_free(p);
  const int c = small_class(nbytes);
  if (caching() && c < kClasses && t_small.free[c].size() < kMaxPerClass) {
    try {  // the cache's own growth may fail when memory is short: then free the block
      t_small.free[c].push_back(p);
      return;
    } catch (const std::bad_alloc&) {
    }
  }
  std::free(p);
}

LargeBlockStats large_block_stats() {
  LargeCache& c = large();
  std::lock_guard<std::mutex> lock(c.m);
  return {c.cached, c.used, c.hits, c.misses};
}

void release_cached_blocks() {
  LargeCache& c = large();
  std::lock_guard<std::mutex> lock(c.m);
  while (evict_oldest(c)) {
  }
}

}  // namespace graft::detail
