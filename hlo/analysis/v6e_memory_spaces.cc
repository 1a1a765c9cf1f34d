#include "hlo/analysis/v6e_memory_spaces.h"

#include <algorithm>
#include <numeric>

#include "hlo/analysis/heap_simulator.h"

namespace tpuoff::hlo {
namespace {

// Range add / range max over the elementary segments of a time axis: the
// VMEM bytes in use in each segment as temporaries are placed.
class SegmentMax {
 public:
  explicit SegmentMax(size_t n) : n_(std::max<size_t>(n, 1)), max_(4 * n_), add_(4 * n_) {}
  int64_t Max(size_t lo, size_t hi) const { return Max(1, 0, n_, lo, hi); }
  void Add(size_t lo, size_t hi, int64_t v) { Add(1, 0, n_, lo, hi, v); }

 private:
  int64_t Max(size_t node, size_t l, size_t r, size_t lo, size_t hi) const {
    if (hi <= l || r <= lo) return 0;
    if (lo <= l && r <= hi) return max_[node];
    const size_t m = (l + r) / 2;
    return add_[node] + std::max(Max(2 * node, l, m, lo, hi), Max(2 * node + 1, m, r, lo, hi));
  }
  void Add(size_t node, size_t l, size_t r, size_t lo, size_t hi, int64_t v) {
    if (hi <= l || r <= lo) return;
    if (lo <= l && r <= hi) {
      max_[node] += v;
      add_[node] += v;
      return;
    }
    const size_t m = (l + r) / 2;
    Add(2 * node, l, m, lo, hi, v);
    Add(2 * node + 1, m, r, lo, hi, v);
    max_[node] = add_[node] + std::max(max_[2 * node], max_[2 * node + 1]);
  }
  size_t n_;
  std::vector<int64_t> max_, add_;
};

}  // namespace

V6eMemorySplit SplitV6eMemory(const MemoryAnalysis& a, const V6eMemoryOptions& options) {
  V6eMemorySplit s;
  const std::vector<AllocatedBuffer>& bufs = a.buffers;
  s.in_vmem.assign(bufs.size(), false);
  std::vector<int> temps;
  std::vector<int64_t> times;
  for (size_t i = 0; i < bufs.size(); ++i) {
    const AllocatedBuffer& b = bufs[i];
    switch (b.kind) {
      case BufferKind::kArgument:
        s.argument_bytes += b.tpu_bytes;
        break;
      case BufferKind::kOutput:
        s.output_bytes += b.tpu_bytes;
        break;
      case BufferKind::kTemp:
        if (b.tpu_bytes > 0 && b.end > b.start) {
          temps.push_back(static_cast<int>(i));
          times.push_back(b.start);
          times.push_back(b.end);
        }
        break;
    }
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  auto index = [&](int64_t t) {
    return static_cast<size_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  // Largest first; ties: earlier, then lower index (deterministic).
  std::sort(temps.begin(), temps.end(), [&](int x, int y) {
    if (bufs[x].tpu_bytes != bufs[y].tpu_bytes) return bufs[x].tpu_bytes > bufs[y].tpu_bytes;
    if (bufs[x].start != bufs[y].start) return bufs[x].start < bufs[y].start;
    return x < y;
  });
  const int64_t budget = options.msa_budget();
  SegmentMax vmem(times.empty() ? 1 : times.size() - 1);
  std::vector<LiveInterval> hbm, in_vmem;
  for (int i : temps) {
    const AllocatedBuffer& b = bufs[i];
    const size_t lo = index(b.start), hi = index(b.end);
    if (b.tpu_bytes <= budget && vmem.Max(lo, hi) + b.tpu_bytes <= budget) {
      vmem.Add(lo, hi, b.tpu_bytes);
      s.in_vmem[i] = true;
      ++s.num_vmem_buffers;
      in_vmem.push_back({b.tpu_bytes, b.start, b.end});
    } else {
      ++s.num_hbm_temps;
      s.largest_hbm_temp = std::max(s.largest_hbm_temp, b.tpu_bytes);
      hbm.push_back({b.tpu_bytes, b.start, b.end});
    }
  }
  s.hbm_temp_bytes = FindPeak(hbm).bytes;
  s.vmem_bytes = FindPeak(in_vmem).bytes;
  s.hbm_bytes = s.argument_bytes + s.output_bytes + s.hbm_temp_bytes;
  return s;
}

}  // namespace tpuoff::hlo
