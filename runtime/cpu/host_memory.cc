#include "runtime/cpu/host_memory.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace tpuoff::runtime {
namespace {

struct CachedBlock {
  size_t bytes;
  void* data;
};

// Blocks this large are mapped with their pages populated up front: the
// kernel fills the page table in one call per slice instead of one page
// fault per 4 KiB on first touch, and blocks of several slices are
// populated by several threads at once (MADV_POPULATE_WRITE, Linux 5.14).
// Measured on the 2-core KVM guest (2.6 GB, 4 runs each): MAP_POPULATE
// (one thread) 1.45-1.63 s; MADV_POPULATE_WRITE on two threads 0.75-1.0 s;
// first touch on two threads 1.17 s; 2 MiB transparent huge pages
// (MADV_HUGEPAGE, this guest's THP mode is `madvise` with direct
// compaction) 0.23-2.96 s depending on how fragmented free memory is, so
// not used. (Earlier, at load average ~10: first touch 5.7-6.2 s,
// MAP_POPULATE 3.0-3.9 s, huge pages 5.6-12 s.) Measured again on
// 2026-11-29 with 14 GB of free 4 MiB blocks (no compaction stalls, every
// fault a huge page), 1.16 GiB on two threads: huge pages 0.15-0.20 s
// when run back to back but 0.92-1.12 s after 8 s idle, 4 KiB pages
// 0.32-0.46 s either way (plus 0.13-0.16 s to unmap them, huge: 5 ms).
// This guest's virtio balloon does free page reporting (feature bit 5 in
// /sys/bus/virtio/drivers/virtio_balloon/virtio0/features): free blocks of
// 2 MiB and more go back to the host a few seconds after they are freed,
// and a huge page is carved from exactly such a block, so a process
// started after a pause pays the host's faults too; small pages come from
// smaller fragments, which the guest keeps backed.
// Every large block is written in full by its user (device buffers,
// inputs, outputs), so populating costs no memory that would not be used;
// a block the host cannot back is refused here (nullptr: the caller's
// out-of-memory error) instead of failing at first touch.
// Under AddressSanitizer every block stays a malloc block, so overruns of
// large buffers are still caught.
#if defined(__SANITIZE_ADDRESS__)
#define TPUOFF_HOST_MALLOC_ONLY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TPUOFF_HOST_MALLOC_ONLY 1
#endif
#endif
#ifdef TPUOFF_HOST_MALLOC_ONLY
constexpr size_t kPopulateMinBytes = SIZE_MAX;
#else
constexpr size_t kPopulateMinBytes = size_t{8} << 20;
#endif
// Slices of at least this many bytes per populating thread.
constexpr size_t kPopulateSliceBytes = size_t{64} << 20;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int UsableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// Populates [p, p + bytes) for writing, `slices` page-aligned slices on as
// many threads (this one included). 0, or the first failing call's errno.
int PopulateForWrite(char* p, size_t bytes, int slices) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t per = (bytes / slices + page - 1) / page * page;
  std::vector<int> err(static_cast<size_t>(slices), 0);
  auto populate = [&](int k) {
    const size_t begin = std::min(bytes, per * k);
    const size_t end = k + 1 == slices ? bytes : std::min(bytes, per * (k + 1));
    if (end > begin && madvise(p + begin, end - begin, MADV_POPULATE_WRITE) != 0) err[k] = errno;
  };
  std::vector<std::thread> threads;
  for (int k = 1; k < slices; ++k) {
    try {
      threads.emplace_back(populate, k);
    } catch (const std::system_error&) {  // no thread: this one does it
      populate(k);
    }
  }
  populate(0);
  for (std::thread& t : threads) t.join();
  for (int e : err) {
    if (e != 0) return e;
  }
  return 0;
}

void* MapPopulated(size_t bytes) {
  const int slices = static_cast<int>(std::min<size_t>(
      static_cast<size_t>(std::min(UsableCpus(), 16)), std::max<size_t>(1, bytes / kPopulateSliceBytes)));
  if (slices > 1) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    const int err = PopulateForWrite(static_cast<char*>(p), bytes, slices);
    if (err == 0) return p;
    munmap(p, bytes);
    // EINVAL: a kernel without MADV_POPULATE_WRITE; populate in the mmap
    // call below. Anything else (ENOMEM, EFAULT, ...): the host cannot back
    // the block.
    if (err != EINVAL) return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void ReleaseBlock(void* p, size_t bytes) {
  if (bytes >= kPopulateMinBytes) {
    munmap(p, bytes);
  } else {
    std::free(p);
  }
}

void* AllocateBlock(size_t bytes) {
  return bytes >= kPopulateMinBytes ? MapPopulated(bytes) : std::aligned_alloc(64, bytes);
}

class HostCache {
 public:
  HostCache() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    // Half the machine at most: a cache, not a reservation.
    capacity_ = pages > 0 && page > 0 ? static_cast<size_t>(pages) * page / 2 : size_t{4} << 30;
  }

  void* Alloc(size_t bytes) {
    const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    if (rounded >= kHostCacheMinBytes) {
      std::lock_guard<std::mutex> l(mu_);
      for (auto it = cached_.begin(); it != cached_.end(); ++it) {
        if (it->bytes != rounded) continue;
        void* p = it->data;
        cached_bytes_ -= rounded;
        cached_.erase(it);
        live_[p] = rounded;
        return p;
      }
    }
    void* p = AllocateBlock(rounded);
    if (p == nullptr && cached_bytes() > 0) {
      // Out of memory (or address space, under `ulimit -v`) while blocks
      // sit in the cache: give them back and try once more.
      Release();
      p = AllocateBlock(rounded);
    }
    if (p != nullptr && rounded >= kHostCacheMinBytes) {
      std::lock_guard<std::mutex> l(mu_);
      live_[p] = rounded;
      // Freshly mapped anonymous memory reads as zeros.
      if (rounded >= kPopulateMinBytes) zeroed_.insert(p);
    }
    return p;
  }

  bool TakeZeroed(void* p) {
    std::lock_guard<std::mutex> l(mu_);
    return zeroed_.erase(p) > 0;
  }

  void Free(void* p) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> l(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) {  // a small block
      std::free(p);
      return;
    }
    const size_t bytes = it->second;
    live_.erase(it);
    zeroed_.erase(p);
    if (bytes > capacity_) {
      ReleaseBlock(p, bytes);
      return;
    }
    cached_.push_back({bytes, p});
    cached_bytes_ += bytes;
    while (cached_bytes_ > capacity_) {  // oldest first
      cached_bytes_ -= cached_.front().bytes;
      ReleaseBlock(cached_.front().data, cached_.front().bytes);
      cached_.pop_front();
    }
  }

  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    for (const CachedBlock& b : cached_) ReleaseBlock(b.data, b.bytes);
    cached_.clear();
    cached_bytes_ = 0;
  }

  int64_t cached_bytes() {
    std::lock_guard<std::mutex> l(mu_);
    return static_cast<int64_t>(cached_bytes_);
  }

 private:
  std::mutex mu_;
  size_t capacity_ = 0;
  size_t cached_bytes_ = 0;
  std::list<CachedBlock> cached_;  // oldest first
  absl::flat_hash_map<void*, size_t> live_;  // large blocks in use
  // Blocks in use that were freshly mapped and not yet claimed by TakeZeroed.
  absl::flat_hash_set<void*> zeroed_;
};

HostCache& Cache() {
  // Leaked: outputs may be released by static destructors after main.
  static HostCache* cache = new HostCache();
  return *cache;
}

}  // namespace

namespace {

// The first number on the line of `path` starting with `key` (in kB for
// /proc files), or -1.
int64_t ReadKeyedNumber(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    std::istringstream rest(line.substr(key.size()));
    int64_t v = -1;
    if (rest >> v) return v;
  }
  return -1;
}

// A file holding one number ("max" = no limit: -1).
int64_t ReadNumberFile(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return -1;
  char* end = nullptr;
  const long long v = std::strtoll(word.c_str(), &end, 10);
  return end != nullptr && *end == '\0' && v >= 0 ? static_cast<int64_t>(v) : -1;
}

// memory.max - memory.current over this process's cgroup (v2) and its
// ancestors, the tightest; -1 when none is limited.
int64_t CgroupAvailable() {
  std::ifstream in("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) return -1;
  int64_t best = -1;
  while (true) {
    const std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
    const int64_t max = ReadNumberFile(dir + "/memory.max");
    const int64_t current = ReadNumberFile(dir + "/memory.current");
    if (max >= 0 && current >= 0) {
      const int64_t left = std::max<int64_t>(0, max - current);
      best = best < 0 ? left : std::min(best, left);
    }
    if (path == "/" || path.empty()) break;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return best;
}

// rlimit - used, or -1 without a limit.
int64_t LimitLeft(int resource, int64_t used) {
  struct rlimit r;
  if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return -1;
  const int64_t limit = static_cast<int64_t>(r.rlim_cur);
  return std::max<int64_t>(0, limit - std::max<int64_t>(used, 0));
}

}  // namespace

HostMemoryInfo QueryHostMemory() {
  HostMemoryInfo info;
  const int64_t kb = ReadKeyedNumber("/proc/meminfo", "MemAvailable:");
  if (kb >= 0) info.mem_available = kb * 1024;
  info.cgroup_available = CgroupAvailable();
  const int64_t vm_size = ReadKeyedNumber("/proc/self/status", "VmSize:");
  const int64_t vm_data = ReadKeyedNumber("/proc/self/status", "VmData:");
  info.address_space_used = vm_size >= 0 ? vm_size * 1024 : 0;
  info.address_space_available = LimitLeft(RLIMIT_AS, info.address_space_used);
  info.data_used = vm_data >= 0 ? vm_data * 1024 : 0;
  info.data_available = LimitLeft(RLIMIT_DATA, info.data_used);
  // Memory this process already holds in its cache is available to it.
  const int64_t cached = HostCacheBytes();
  if (info.mem_available >= 0) info.mem_available += cached;
  if (info.cgroup_available >= 0) info.cgroup_available += cached;
  info.available = -1;
  for (int64_t v : {info.mem_available, info.cgroup_available, info.address_space_available,
                    info.data_available}) {
    if (v >= 0) info.available = info.available < 0 ? v : std::min(info.available, v);
  }
  return info;
}

void* HostAlloc(size_t bytes) { return Cache().Alloc(bytes); }
void* HostMapFresh(size_t bytes) { return bytes == 0 ? nullptr : MapPopulated(bytes); }
void HostUnmapFresh(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, bytes);
}
void HostFree(void* p) { Cache().Free(p); }
bool HostTakeZeroed(void* p) { return p != nullptr && Cache().TakeZeroed(p); }
void ReleaseHostCache() { Cache().Release(); }
int64_t HostCacheBytes() { return Cache().cached_bytes(); }

}  // namespace tpuoff::runtime
