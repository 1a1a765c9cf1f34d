// Execution trace in Chrome trace-event JSON (opens in Perfetto): one process
// per simulated device, a complete event per executed op or fused group, and
// a counter track "HBM bytes in use" per device.
#ifndef TPUOFF_RUNTIME_DEVICE_TRACE_H_
#define TPUOFF_RUNTIME_DEVICE_TRACE_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace tpuoff::runtime {

struct TraceEvent {
  std::string name;      // instruction or fused group name
  std::string category;  // "op", "fusion", "collective", "while", ...
  int64_t device = 0;    // pid
  double start_us = 0;
  double duration_us = 0;
  int64_t bytes = 0;     // bytes written by the op
};

struct CounterSample {
  int64_t device = 0;
  double time_us = 0;
  int64_t bytes_in_use = 0;
};

class Trace {
 public:
  Trace() = default;
  Trace(const Trace& other);
  Trace& operator=(const Trace& other);
  Trace(Trace&& other) noexcept;
  Trace& operator=(Trace&& other) noexcept;

  // Thread-safe (devices record concurrently). A trace keeps at most
  // kMaxEvents events and kMaxCounters counter samples (a long loop would
  // otherwise grow it without bound); the rest are counted as dropped and
  // the JSON says so in "otherData".
  static constexpr size_t kMaxEvents = size_t{1} << 20;
  static constexpr size_t kMaxCounters = size_t{1} << 21;
  void AddEvent(TraceEvent event);
  void AddCounter(CounterSample sample);

  const std::vector<TraceEvent>& events() const { return events_; }
  const std::vector<CounterSample>& counters() const { return counters_; }
  bool empty() const { return events_.empty() && counters_.empty(); }

  // {"traceEvents":[...], "displayTimeUnit":"ns"}; process names "TPU_<d>".
  std::string ToChromeJson() const;

 private:
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
  std::vector<CounterSample> counters_;
  int64_t dropped_events_ = 0;
  int64_t dropped_counters_ = 0;
};

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_DEVICE_TRACE_H_
