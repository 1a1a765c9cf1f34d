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

// True once for a block HostAlloc just mapped fresh from the system (so
// every byte is zero) when nothing claimed it since: the caller is about to
// write it first and may skip writing zeros. False for recycled blocks and
// small ones, and after the first call.
bool HostTakeZeroed(void* p);

// Returns every cached block to the system (e.g. between benchmark cases
// with different shapes, or before measuring RSS of something else).
void ReleaseHostCache();
// Bytes currently cached (not in use).
int64_t HostCacheBytes();

inline constexpr size_t kHostCacheMinBytes = size_t{1} << 20;

// A block of `bytes` (> 0) mapped fresh from the system the way HostAlloc
// maps its large blocks (page-aligned, every page populated for writing, on
// several threads when the block has several slices), outside the cache;
// nullptr when the host cannot back it. For measuring what fresh memory
// costs on this host (`tpuoff bench`'s cold runs). Release with
// HostUnmapFresh(p, bytes).
void* HostMapFresh(size_t bytes);
void HostUnmapFresh(void* p, size_t bytes);

// What the host can still give this process, so callers can refuse work
// that cannot fit before allocating anything. Bytes; -1 = no such limit
// (or unknown).
struct HostMemoryInfo {
  int64_t available = -1;         // the tightest of the four below
  int64_t mem_available = -1;     // /proc/meminfo MemAvailable
  int64_t cgroup_available = -1;  // cgroup v2 memory.max - memory.current
  // RLIMIT_AS (`ulimit -v`) minus the address space in use (VmSize).
  int64_t address_space_available = -1;
  int64_t address_space_used = 0;
  // RLIMIT_DATA (`ulimit -d`) minus the data segment in use (VmData).
  int64_t data_available = -1;
  int64_t data_used = 0;
};
// Blocks in HostAlloc's cache count as available (this process reuses them).
HostMemoryInfo QueryHostMemory();

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_CPU_HOST_MEMORY_H_
