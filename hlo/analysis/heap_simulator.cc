#include "hlo/analysis/heap_simulator.h"

#include <algorithm>
#include <limits>
#include <tuple>
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

namespace {

// Placed intervals indexed for "which overlap [start, end)": intervals
// sorted by start, and a segment tree holding, over ranges of that order,
// the latest end among the placed ones. A query walks the prefix starting
// before `end` and prunes every subtree ending by `start`, so it costs
// O((k + 1) log n) for k overlapping intervals.
class PlacedIndex {
 public:
  explicit PlacedIndex(absl::Span<const LiveInterval> intervals) {
    const int n = static_cast<int>(intervals.size());
    by_start_.resize(n);
    std::iota(by_start_.begin(), by_start_.end(), 0);
    std::stable_sort(by_start_.begin(), by_start_.end(), [&](int a, int b) {
      return intervals[a].start < intervals[b].start;
    });
    pos_.resize(n);
    starts_.resize(n);
    for (int k = 0; k < n; ++k) {
      pos_[by_start_[k]] = k;
      starts_[k] = intervals[by_start_[k]].start;
    }
    size_ = 1;
    while (size_ < n) size_ *= 2;
    max_end_.assign(2 * size_, kNothing);
  }

  void Place(int i, int64_t end) {
    int node = size_ + pos_[i];
    max_end_[node] = end;
    for (node /= 2; node >= 1; node /= 2) {
      max_end_[node] = std::max(max_end_[2 * node], max_end_[2 * node + 1]);
    }
  }

  // Calls f(i) for every placed interval with start < end and end > start.
  template <typename F>
  void ForEachOverlapping(int64_t start, int64_t end, F f) const {
    const int prefix = static_cast<int>(
        std::lower_bound(starts_.begin(), starts_.end(), end) - starts_.begin());
    if (prefix == 0) return;
    // (node, node's first position, its width)
    std::vector<std::tuple<int, int, int>> stack = {{1, 0, size_}};
    while (!stack.empty()) {
      const auto [node, lo, width] = stack.back();
      stack.pop_back();
      if (lo >= prefix || max_end_[node] <= start) continue;
      if (width == 1) {
        f(by_start_[lo]);
        continue;
      }
      stack.push_back({2 * node + 1, lo + width / 2, width / 2});
      stack.push_back({2 * node, lo, width / 2});
    }
  }

 private:
  static constexpr int64_t kNothing = std::numeric_limits<int64_t>::min();
  std::vector<int> by_start_;  // interval indices by start
  std::vector<int> pos_;       // interval index -> position in by_start_
  std::vector<int64_t> starts_;
  int size_ = 1;
  std::vector<int64_t> max_end_;
};

}  // namespace

int64_t CountOverlappingPairs(absl::Span<const LiveInterval> intervals) {
  // Each pair is counted at the later start (ties: once), as the number of
  // intervals already live there.
  std::vector<int64_t> starts, ends;
  for (const LiveInterval& iv : intervals) {
    if (iv.end <= iv.start || iv.bytes == 0) continue;
    starts.push_back(iv.start);
    ends.push_back(iv.end);
  }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  int64_t pairs = 0;
  for (size_t k = 0; k < starts.size(); ++k) {
    // Intervals started before this one (index order among equal starts)
    // minus those already ended by its start.
    const int64_t ended = std::upper_bound(ends.begin(), ends.end(), starts[k]) - ends.begin();
    pairs += std::max<int64_t>(0, static_cast<int64_t>(k) - ended);
  }
  return pairs;
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
  PlacedIndex placed(intervals);
  std::vector<std::pair<int64_t, int64_t>> taken;  // [offset, end) in the heap
  for (int i : order) {
    const LiveInterval& iv = intervals[i];
    if (iv.bytes == 0 || iv.end <= iv.start) continue;
    taken.clear();
    placed.ForEachOverlapping(iv.start, iv.end, [&](int j) {
      taken.push_back({out.offsets[j], out.offsets[j] + intervals[j].bytes});
    });
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
    placed.Place(i, iv.end);
  }
  return out;
}

}  // namespace tpuoff::hlo
