#include "hlo/analysis/v6e_memory_spaces.h"

#include <algorithm>

#include "hlo/analysis/heap_simulator.h"
#include "hlo/analysis/v6e_loop_residency.h"

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

bool ReadOnlyByDots(const HloInstruction* x);

// A slice, dynamic-slice, or a select over one, read only by dots.
bool OperandWindow(const HloInstruction* x) {
  switch (x->opcode()) {
    case HloOpcode::kSlice:
    case HloOpcode::kDynamicSlice:
      break;
    case HloOpcode::kSelect: {
      const HloInstruction* on = x->operand(1);
      if (on->opcode() != HloOpcode::kSlice && on->opcode() != HloOpcode::kDynamicSlice) {
        return false;
      }
      break;
    }
    default:
      return false;
  }
  return ReadOnlyByDots(x);
}

bool ReadOnlyByDots(const HloInstruction* x) {
  if (x->users().empty()) return false;
  for (const HloInstruction* u : x->users()) {
    if (u->opcode() != HloOpcode::kDot && !OperandWindow(u)) return false;
  }
  return true;
}

}  // namespace

bool AbsorbedByXlaTpuDot(const AllocatedBuffer& b) {
  const HloInstruction* x = b.instruction;
  if (x == nullptr || b.kind != BufferKind::kTemp || b.written_over) return false;
  if (x->opcode() == HloOpcode::kDot) {
    return x->users().size() == 1 && x->users()[0]->opcode() == HloOpcode::kAdd;
  }
  return OperandWindow(x);
}

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
        if (AbsorbedByXlaTpuDot(b)) {
          ++s.num_fused;
          break;
        }
        if (b.tpu_bytes > 0 && b.end > b.start) {
          temps.push_back(static_cast<int>(i));
          times.push_back(b.start);
          times.push_back(b.end);
        }
        break;
    }
  }
  std::vector<V6eLoopResident> residents;
  if (options.loop_residents) residents = FindV6eLoopResidents(a);
  for (const V6eLoopResident& r : residents) {
    times.push_back(r.start);
    times.push_back(r.end);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  auto index = [&](int64_t t) {
    return static_cast<size_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  // Smallest first; ties: earlier, then lower index (deterministic).
  std::sort(temps.begin(), temps.end(), [&](int x, int y) {
    if (bufs[x].tpu_bytes != bufs[y].tpu_bytes) return bufs[x].tpu_bytes < bufs[y].tpu_bytes;
    if (bufs[x].start != bufs[y].start) return bufs[x].start < bufs[y].start;
    return x < y;
  });
  const int64_t budget = options.msa_budget();
  SegmentMax vmem(times.empty() ? 1 : times.size() - 1);
  std::vector<LiveInterval> hbm, in_vmem;
  auto fits = [&](int64_t bytes, int64_t start, int64_t end) {
    const size_t lo = index(start), hi = index(end);
    if (bytes > budget || vmem.Max(lo, hi) + bytes > budget) return false;
    vmem.Add(lo, hi, bytes);
    in_vmem.push_back({bytes, start, end});
    return true;
  };
  for (const V6eLoopResident& r : residents) {
    if (fits(r.bytes, r.start, r.end)) ++s.num_loop_residents;
  }
  for (int i : temps) {
    const AllocatedBuffer& b = bufs[i];
    if (fits(b.tpu_bytes, b.start, b.end)) {
      s.in_vmem[i] = true;
      ++s.num_vmem_buffers;
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
