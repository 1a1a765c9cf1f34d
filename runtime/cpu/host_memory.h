// Host memory behind the emulator's device buffers (and the arrays handed
// over as output literals). Large blocks are cached after release and
// reused for a later request of the same size: a kernel run again and again
// (a training loop, a benchmark) allocates the same buffers every time, and
// fresh memory costs a page fault per 4 KiB (for GiB-sized logits and
// dlogits, as much as the whole computation). The cache never changes the
// simulated HBM accounting, which is done by Device.
#ifndef TPUOFF_RUNTIME_CPU_HOST_MEMORY_H_
#define TPUOFF_RUNTIME_CPU_HOST_MEMORY_H_

#include <cstddef>
#include <cstdint>

namespace tpuoff::runtime {

// 64-byte aligned, at least `bytes` (> 0) bytes, uninitialised; nullptr when
// the host is out of memory. Release with HostFree.
void* HostAlloc(size_t bytes);
// Releases a HostAlloc block (nullptr is ignored). Blocks of at least
// kHostCacheMinBytes are kept for reuse while the cache holds less than its
// capacity; the oldest cached blocks are returned to the system first.
void HostFree(void* p);

// Returns every cached block to the system (e.g. between benchmark cases
// with different shapes, or before measuring RSS of something else).
void ReleaseHostCache();
// Bytes currently cached (not in use).
int64_t HostCacheBytes();

inline constexpr size_t kHostCacheMinBytes = size_t{1} << 20;

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_CPU_HOST_MEMORY_H_
