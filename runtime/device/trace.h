// Execution trace in Chrome trace-event JSON (opens in Perfetto): one process
// per simulated device, a complete event per executed op or fused group, and
// a counter track "HBM bytes in use" per device. Events sit on a track
// (thread) of their device: 0 the host emulator's wall time, 1 the predicted
// TPU v6e timeline (tools/cli/predicted_trace.h); flows link events of
// different devices (a collective's data moving between them).
#ifndef TPUOFF_RUNTIME_DEVICE_TRACE_H_
#define TPUOFF_RUNTIME_DEVICE_TRACE_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tpuoff::runtime {

struct TraceEvent {
  std::string name;      // instruction or fused group name
  std::string category;  // "op", "fusion", "collective", "while", ...
  int64_t device = 0;    // pid
  double start_us = 0;
  double duration_us = 0;
  int64_t bytes = 0;     // bytes written by the op
  int track = 0;         // tid: kHostTrack or kPredictedTrack
  // Extra numeric arguments shown by the viewer (flops, bound, ...).
  std::vector<std::pair<std::string, double>> args;
  std::string note;      // extra text argument ("bound": "memory", ...)
};

inline constexpr int kHostTrack = 0;
inline constexpr int kPredictedTrack = 1;

// An arrow from (device, time) to (device, time) on a track, drawn from the
// event enclosing its start to the event enclosing its end.
struct TraceFlow {
  std::string name;
  int64_t from_device = 0;
  double from_us = 0;
  int64_t to_device = 0;
  double to_us = 0;
  int track = kPredictedTrack;
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
  void AddFlow(TraceFlow flow);

  const std::vector<TraceEvent>& events() const { return events_; }
  const std::vector<CounterSample>& counters() const { return counters_; }
  const std::vector<TraceFlow>& flows() const { return flows_; }
  bool empty() const { return events_.empty() && counters_.empty(); }

  // {"traceEvents":[...], "displayTimeUnit":"ns"}; process names "TPU_<d>".
  std::string ToChromeJson() const;

 private:
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
  std::vector<CounterSample> counters_;
  int64_t dropped_events_ = 0;
  int64_t dropped_counters_ = 0;
  std::vector<TraceFlow> flows_;
};

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_DEVICE_TRACE_H_
