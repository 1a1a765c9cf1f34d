#include "hlo/analysis/heap_simulator.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace tpuoff::hlo {

HeapPeak FindPeak(absl::Span<const LiveInterval> intervals) {
  // Events (time, +bytes / -bytes); at equal times frees come first so that
  // [a, t) and [t, b) never count together.
  struct Event {
    int64_t time;
    bool start;
    int64_t bytes;
  };
  std::vector<Event> events;
  events.reserve(intervals.size() * 2);
  for (const LiveInterval& iv : intervals) {
    if (iv.end <= iv.start) continue;  // never live
    events.push_back({iv.start, true, iv.bytes});
    events.push_back({iv.end, false, iv.bytes});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    return !a.start && b.start;
  });
  HeapPeak peak;
  int64_t live = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    live += events[i].start ? events[i].bytes : -events[i].bytes;
    // Measure once every event at this time has been applied.
    const bool last_at_time =
        i + 1 == events.size() || events[i + 1].time != events[i].time;
    if (last_at_time && live > peak.bytes) {
      peak.bytes = live;
      peak.time = events[i].time;
    }
  }
  if (peak.time < 0) return peak;
  for (int i = 0; i < static_cast<int>(intervals.size()); ++i) {
    const LiveInterval& iv = intervals[i];
    if (iv.start <= peak.time && peak.time < iv.end) peak.live.push_back(i);
  }
  std::stable_sort(peak.live.begin(), peak.live.end(), [&](int a, int b) {
    return intervals[a].bytes > intervals[b].bytes;
  });
  return peak;
}

HeapPlacement BestFitPlacement(absl::Span<const LiveInterval> intervals) {
  const int n = static_cast<int>(intervals.size());
  HeapPlacement out;
  out.offsets.assign(n, 0);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const LiveInterval& x = intervals[a];
    const LiveInterval& y = intervals[b];
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    const int64_t lx = x.end - x.start, ly = y.end - y.start;
    if (lx != ly) return lx > ly;
    if (x.start != y.start) return x.start < y.start;
    return a < b;
  });
  std::vector<int> placed;
  std::vector<std::pair<int64_t, int64_t>> taken;  // [offset, end) in the heap
  for (int i : order) {
    const LiveInterval& iv = intervals[i];
    if (iv.bytes == 0 || iv.end <= iv.start) continue;
    taken.clear();
    for (int j : placed) {
      const LiveInterval& other = intervals[j];
      if (other.start < iv.end && iv.start < other.end) {
        taken.push_back({out.offsets[j], out.offsets[j] + other.bytes});
      }
    }
    std::sort(taken.begin(), taken.end());
    int64_t best = -1, best_gap = 0, cursor = 0;
    for (const auto& [lo, hi] : taken) {
      const int64_t gap = lo - cursor;
      if (gap >= iv.bytes && (best < 0 || gap < best_gap)) {
        best = cursor;
        best_gap = gap;
      }
      cursor = std::max(cursor, hi);
    }
    out.offsets[i] = best >= 0 ? best : cursor;
    out.heap_bytes = std::max(out.heap_bytes, out.offsets[i] + iv.bytes);
    placed.push_back(i);
  }
  return out;
}

}  // namespace tpuoff::hlo
