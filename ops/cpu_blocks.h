// CPU memory for Storage (ops/storage.cpp): 64-byte-aligned blocks, with two caches of freed
// blocks so that a training step's tensors reuse the memory of the step before.
//
// * small (64 B .. 64 KiB): per-thread lists in power-of-two classes, so the many tiny tensors
//   of an eager graph do not pay malloc each time;
// * large (1 MiB and up): one process-wide cache of mapped blocks in classes of a sixteenth of an
//   octave (a request is rounded up by at most 6.25%). Variable-length batches make tensors of
//   new shapes every step; from the heap each new size grew it and faulted fresh pages in (the
//   Bible Transformer's heap grew to 4.5 GB over 55 steps), while a cached block of the same
//   class, or one at most 50% larger, is reused as it is (2.0 GB). Large blocks are mapped
//   with transparent huge pages where the kernel allows it. The cache holds at most twice the
//   most large-block bytes ever in use at once (256 MiB at least): a smaller cap kept unmapping
//   blocks that the next batch shapes needed again (system time 24 s instead of 6 s over those
//   55 steps), and never more than a quarter of physical memory. Past the cap it unmaps its
//   oldest blocks; it unmaps them too before a new block would take graft's live and cached
//   bytes past physical memory, and when mapping fails.
//
// Both caches are off under AddressSanitizer (use-after-free stays detectable) and with
// GRAFT_BLOCK_CACHE=0 in the environment (for measuring what they are worth).
#pragma once
#include <cstddef>
#include <cstdint>

namespace graft::detail {

// A block of at least nbytes (> 0), 64-byte aligned; std::bad_alloc when memory runs out.
void* cpu_alloc(size_t nbytes);
// Gives back a block from cpu_alloc(nbytes), with the same nbytes.
void cpu_free(void* p, size_t nbytes);

// Whether the caches are on (off under AddressSanitizer and with GRAFT_BLOCK_CACHE=0).
bool cpu_block_cache_enabled();

// The size a large request is rounded up to (its class); nbytes itself below 1 MiB.
size_t cpu_block_size(size_t nbytes);

struct LargeBlockStats {
  uint64_t cached_bytes = 0;  // held in the cache, not in use
  uint64_t in_use_bytes = 0;  // large blocks now in use
  uint64_t hits = 0;          // large requests served from the cache
  uint64_t misses = 0;        // large requests that mapped a new block
};
LargeBlockStats large_block_stats();
// Unmaps every cached large block (blocks in use stay).
void release_cached_blocks();

}  // namespace graft::detail
