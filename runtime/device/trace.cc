#include "runtime/device/trace.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tpuoff::runtime {
namespace {

using Json = nlohmann::ordered_json;

// Microseconds with nanosecond resolution (what Perfetto shows).
double Microseconds(double us) { return std::round(us * 1000.0) / 1000.0; }

// One event per line; the document is built event by event (a trace has an
// event per executed op per device), never as one tree.
void AppendEvent(std::string* out, bool* first, const Json& event) {
  if (!*first) out->append(",\n");
  *first = false;
  out->append(event.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace

Trace::Trace(const Trace& other) {
  std::lock_guard<std::mutex> lock(other.mu_);
  events_ = other.events_;
  counters_ = other.counters_;
  dropped_events_ = other.dropped_events_;
  dropped_counters_ = other.dropped_counters_;
  flows_ = other.flows_;
}
Trace& Trace::operator=(const Trace& other) {
  if (this == &other) return *this;
  std::scoped_lock lock(mu_, other.mu_);
  events_ = other.events_;
  counters_ = other.counters_;
  dropped_events_ = other.dropped_events_;
  dropped_counters_ = other.dropped_counters_;
  flows_ = other.flows_;
  return *this;
}
Trace::Trace(Trace&& other) noexcept {
  std::lock_guard<std::mutex> lock(other.mu_);
  events_ = std::move(other.events_);
  counters_ = std::move(other.counters_);
  dropped_events_ = other.dropped_events_;
  dropped_counters_ = other.dropped_counters_;
  flows_ = std::move(other.flows_);
}
Trace& Trace::operator=(Trace&& other) noexcept {
  if (this == &other) return *this;
  std::scoped_lock lock(mu_, other.mu_);
  events_ = std::move(other.events_);
  counters_ = std::move(other.counters_);
  dropped_events_ = other.dropped_events_;
  dropped_counters_ = other.dropped_counters_;
  flows_ = std::move(other.flows_);
  return *this;
}

void Trace::AddEvent(TraceEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= kMaxEvents) {
    ++dropped_events_;
    return;
  }
  events_.push_back(std::move(event));
}

void Trace::AddCounter(CounterSample sample) {
  std::lock_guard<std::mutex> lock(mu_);
  if (counters_.size() >= kMaxCounters) {
    ++dropped_counters_;
    return;
  }
  counters_.push_back(sample);
}

void Trace::AddFlow(TraceFlow flow) {
  std::lock_guard<std::mutex> lock(mu_);
  flows_.push_back(std::move(flow));
}

std::string Trace::ToChromeJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<int64_t> devices;
  std::set<std::pair<int64_t, int>> tracks;
  for (const TraceEvent& e : events_) {
    devices.insert(e.device);
    tracks.insert({e.device, e.track});
  }
  for (const CounterSample& c : counters_) devices.insert(c.device);
  std::string out = "{\"displayTimeUnit\":\"ns\",";
  if (dropped_events_ > 0 || dropped_counters_ > 0) {
    absl::StrAppend(&out, "\"otherData\":{\"truncated\":\"the trace keeps the first ",
                    kMaxEvents, " events and ", kMaxCounters,
                    " counter samples\",\"dropped_events\":", dropped_events_,
                    ",\"dropped_counter_samples\":", dropped_counters_, "},");
  }
  out += "\"traceEvents\":[\n";
  bool first = true;
  for (int64_t d : devices) {
    AppendEvent(&out, &first,
                {{"ph", "M"}, {"name", "process_name"}, {"pid", d}, {"tid", 0},
                 {"args", {{"name", absl::StrCat("TPU_", d, " (v6e)")}}}});
    AppendEvent(&out, &first,
                {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", d}, {"tid", 0},
                 {"args", {{"sort_index", d}}}});
  }
  // Name the tracks when the predicted timeline is present.
  bool predicted = false;
  for (const auto& [d, t] : tracks) predicted = predicted || t == kPredictedTrack;
  if (predicted) {
    for (const auto& [d, t] : tracks) {
      AppendEvent(&out, &first,
                  {{"ph", "M"}, {"name", "thread_name"}, {"pid", d}, {"tid", t},
                   {"args", {{"name", t == kPredictedTrack ? "v6e predicted (tpuoff cost model)"
                                                           : "host emulator (wall time)"}}}});
    }
  }
  for (const TraceEvent& e : events_) {
    Json args = {{"bytes", e.bytes}};
    for (const auto& [k, v] : e.args) args[k] = v;
    if (!e.note.empty()) args["note"] = e.note;
    AppendEvent(&out, &first,
                {{"ph", "X"}, {"name", e.name}, {"cat", e.category}, {"pid", e.device},
                 {"tid", e.track}, {"ts", Microseconds(e.start_us)},
                 {"dur", Microseconds(std::max(0.0, e.duration_us))},
                 {"args", std::move(args)}});
  }
  int64_t id = 0;
  for (const TraceFlow& f : flows_) {
    ++id;
    AppendEvent(&out, &first,
                {{"ph", "s"}, {"id", id}, {"name", f.name}, {"cat", "flow"},
                 {"pid", f.from_device}, {"tid", f.track}, {"ts", Microseconds(f.from_us)}});
    AppendEvent(&out, &first,
                {{"ph", "f"}, {"bp", "e"}, {"id", id}, {"name", f.name}, {"cat", "flow"},
                 {"pid", f.to_device}, {"tid", f.track}, {"ts", Microseconds(f.to_us)}});
  }
  for (const CounterSample& c : counters_) {
    AppendEvent(&out, &first,
                {{"ph", "C"}, {"name", "HBM bytes in use"}, {"pid", c.device}, {"tid", 0},
                 {"ts", Microseconds(c.time_us)}, {"args", {{"bytes", c.bytes_in_use}}}});
  }
  out += "\n]}\n";
  return out;
}

}  // namespace tpuoff::runtime
