#include "runtime/cpu/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <list>
#include <mutex>

#include "absl/container/flat_hash_map.h"

namespace tpuoff::runtime {
namespace {

struct CachedBlock {
  size_t bytes;
  void* data;
};

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
    void* p = std::aligned_alloc(64, rounded);
    if (p != nullptr && rounded >= kHostCacheMinBytes) {
      std::lock_guard<std::mutex> l(mu_);
      live_[p] = rounded;
    }
    return p;
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
    if (bytes > capacity_) {
      std::free(p);
      return;
    }
    cached_.push_back({bytes, p});
    cached_bytes_ += bytes;
    while (cached_bytes_ > capacity_) {  // oldest first
      cached_bytes_ -= cached_.front().bytes;
      std::free(cached_.front().data);
      cached_.pop_front();
    }
  }

  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    for (const CachedBlock& b : cached_) std::free(b.data);
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
};

HostCache& Cache() {
  // Leaked: outputs may be released by static destructors after main.
  static HostCache* cache = new HostCache();
  return *cache;
}

}  // namespace

void* HostAlloc(size_t bytes) { return Cache().Alloc(bytes); }
void HostFree(void* p) { Cache().Free(p); }
void ReleaseHostCache() { Cache().Release(); }
int64_t HostCacheBytes() { return Cache().cached_bytes(); }

}  // namespace tpuoff::runtime
