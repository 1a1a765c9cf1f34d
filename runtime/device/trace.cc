#include "runtime/device/trace.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tpuoff::runtime {
namespace {

std::string JsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

Trace::Trace(const Trace& other) {
  std::lock_guard<std::mutex> lock(other.mu_);
  events_ = other.events_;
  counters_ = other.counters_;
  dropped_events_ = other.dropped_events_;
  dropped_counters_ = other.dropped_counters_;
}
Trace& Trace::operator=(const Trace& other) {
  if (this == &other) return *this;
  std::scoped_lock lock(mu_, other.mu_);
  events_ = other.events_;
  counters_ = other.counters_;
  dropped_events_ = other.dropped_events_;
  dropped_counters_ = other.dropped_counters_;
  return *this;
}
Trace::Trace(Trace&& other) noexcept {
  std::lock_guard<std::mutex> lock(other.mu_);
  events_ = std::move(other.events_);
  counters_ = std::move(other.counters_);
  dropped_events_ = other.dropped_events_;
  dropped_counters_ = other.dropped_counters_;
}
Trace& Trace::operator=(Trace&& other) noexcept {
  if (this == &other) return *this;
  std::scoped_lock lock(mu_, other.mu_);
  events_ = std::move(other.events_);
  counters_ = std::move(other.counters_);
  dropped_events_ = other.dropped_events_;
  dropped_counters_ = other.dropped_counters_;
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

std::string Trace::ToChromeJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<int64_t> devices;
  for (const TraceEvent& e : events_) devices.insert(e.device);
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
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (int64_t d : devices) {
    sep();
    absl::StrAppend(&out,
                    "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", d,
                    ",\"tid\":0,\"args\":{\"name\":\"TPU_", d, " (v6e)\"}}");
    sep();
    absl::StrAppend(&out,
                    "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":", d,
                    ",\"tid\":0,\"args\":{\"sort_index\":", d, "}}");
  }
  for (const TraceEvent& e : events_) {
    sep();
    absl::StrAppend(
        &out, "{\"ph\":\"X\",\"name\":\"", JsonEscape(e.name), "\",\"cat\":\"",
        JsonEscape(e.category), "\",\"pid\":", e.device, ",\"tid\":0,\"ts\":",
        absl::StrFormat("%.3f", e.start_us), ",\"dur\":",
        absl::StrFormat("%.3f", std::max(0.0, e.duration_us)),
        ",\"args\":{\"bytes\":", e.bytes, "}}");
  }
  for (const CounterSample& c : counters_) {
    sep();
    absl::StrAppend(&out,
                    "{\"ph\":\"C\",\"name\":\"HBM bytes in use\",\"pid\":",
                    c.device, ",\"tid\":0,\"ts\":",
                    absl::StrFormat("%.3f", c.time_us),
                    ",\"args\":{\"bytes\":", c.bytes_in_use, "}}");
  }
  out += "\n]}\n";
  return out;
}

}  // namespace tpuoff::runtime
