#include "runtime/device/device.h"

#include <algorithm>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/device/trace.h"

namespace tpuoff::runtime {

std::string HumanBytes(int64_t bytes) {
  if (bytes < 0) return absl::StrCat("-", HumanBytes(-bytes));
  if (bytes < 1024) return absl::StrCat(bytes, "B");
  static const char kUnits[] = "KMGTPE";
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.2f%c", v, kUnits[unit]);
}

Device::Device(int64_t id, int64_t hbm_capacity_bytes, Clock::time_point epoch,
               Trace* trace, bool record_allocations)
    : id_(id), capacity_(hbm_capacity_bytes), epoch_(epoch), trace_(trace),
      record_allocations_(record_allocations) {}

Device::~Device() { ReleaseAll(); }

double Device::NowMicros() const {
  return std::chrono::duration<double, std::micro>(Clock::now() - epoch_)
      .count();
}

absl::Status Device::CheckCapacity(int64_t bytes, const std::string& op) const {
  if (bytes < 0) {
    return absl::InternalError(
        absl::StrCat("device ", id_, ": negative allocation for ", op));
  }
  if (stats_.bytes_in_use + bytes > capacity_) {
    std::vector<const DeviceBuffer*> live(live_.begin(), live_.end());
    std::sort(live.begin(), live.end(),
              [](const DeviceBuffer* a, const DeviceBuffer* b) {
                return a->bytes != b->bytes ? a->bytes > b->bytes : a->id < b->id;
              });
    std::string largest;
    for (size_t i = 0; i < live.size() && i < 5; ++i) {
      absl::StrAppend(&largest, i ? ", " : "", HumanBytes(live[i]->bytes),
                      " for %", live[i]->op);
    }
    if (largest.empty()) largest = "none";
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", id_, ": out of HBM while allocating ", HumanBytes(bytes),
        " (", bytes, " bytes) for %", op, " (in use ",
        HumanBytes(stats_.bytes_in_use), " (", stats_.bytes_in_use,
        " bytes) of ", HumanBytes(capacity_), " hbm); largest live buffers: ",
        largest));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceBuffer*> Device::Allocate(int64_t bytes,
                                               const std::string& op) {
  if (absl::Status s = CheckCapacity(bytes, op); !s.ok()) return s;
  // Host memory: 64-byte aligned, at least one cache line so empty arrays
  // still have a valid address; large blocks are recycled across runs
  // (runtime/cpu/host_memory.h).
  void* data = HostAlloc(std::max<int64_t>(bytes, 1));
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", id_, ": host memory exhausted while allocating ",
        HumanBytes(bytes), " for %", op));
  }
  return Account(bytes, op, data, /*owns_data=*/true);
}

absl::StatusOr<DeviceBuffer*> Device::AllocateBorrowed(int64_t bytes, const std::string& op,
                                                       void* data) {
  if (absl::Status s = CheckCapacity(bytes, op); !s.ok()) return s;
  return Account(bytes, op, data, /*owns_data=*/false);
}

void* Device::TakeData(DeviceBuffer* buffer) {
  if (buffer == nullptr || !buffer->owns_data) return nullptr;
  buffer->owns_data = false;
  return buffer->data;
}

absl::StatusOr<DeviceBuffer*> Device::Account(int64_t bytes, const std::string& op,
                                              void* data, bool owns_data) {
  auto* buffer = new DeviceBuffer{data, bytes, next_buffer_id_++, op, owns_data, live_.size()};
  live_.push_back(buffer);
  stats_.bytes_in_use += bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
  stats_.num_allocs += 1;
  stats_.largest_alloc = std::max(stats_.largest_alloc, bytes);
  if (record_allocations_ || trace_ != nullptr) {
    const double now = NowMicros();
    if (record_allocations_) {
      records_.push_back({AllocationRecord::Kind::kAlloc, buffer->id, op, bytes, now,
                          stats_.bytes_in_use});
    }
    if (trace_ != nullptr) trace_->AddCounter({id_, now, stats_.bytes_in_use});
  }
  return buffer;
}

void Device::Free(DeviceBuffer* buffer, const std::string& op) {
  if (buffer == nullptr) return;
  // Constant-time removal from the unordered live list.
  const size_t at = buffer->live_index;
  if (at < live_.size() && live_[at] == buffer) {
    live_[at] = live_.back();
    live_[at]->live_index = at;
    live_.pop_back();
  }
  stats_.bytes_in_use -= buffer->bytes;
  if (record_allocations_ || trace_ != nullptr) {
    const double now = NowMicros();
    if (record_allocations_) {
      records_.push_back({AllocationRecord::Kind::kFree, buffer->id, op, buffer->bytes, now,
                          stats_.bytes_in_use});
    }
    if (trace_ != nullptr) trace_->AddCounter({id_, now, stats_.bytes_in_use});
  }
  if (buffer->owns_data) HostFree(buffer->data);
  delete buffer;
}

void Device::ReleaseAll() {
  for (DeviceBuffer* b : live_) {
    if (b->owns_data) HostFree(b->data);
    delete b;
  }
  live_.clear();
}

DeviceReport Device::Report() const {
  DeviceReport r;
  r.device_id = id_;
  r.name = absl::StrCat("TPU_", id_, " (v6e)");
  r.hbm_capacity_bytes = capacity_;
  r.stats = stats_;
  r.records = records_;
  return r;
}

}  // namespace tpuoff::runtime
