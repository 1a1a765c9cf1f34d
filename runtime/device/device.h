// A simulated TPU v6e core: HBM capacity, allocator statistics and a record of
// every allocation and free. Buffers live in host memory; only their logical
// byte sizes are accounted on the device.
#ifndef TPUOFF_RUNTIME_DEVICE_DEVICE_H_
#define TPUOFF_RUNTIME_DEVICE_DEVICE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpuoff::runtime {

class Trace;

inline constexpr int64_t kDefaultHbmBytes = 32LL << 30;  // v6e: 32 GiB

// Allocator statistics in the spirit of IREE's iree_hal_allocator_statistics.
struct AllocatorStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes = 0;
  int64_t num_allocs = 0;
  int64_t largest_alloc = 0;
};

// One allocation or free, in the order they happened.
struct AllocationRecord {
  enum class Kind { kAlloc, kFree };
  Kind kind = Kind::kAlloc;
  int64_t buffer_id = 0;  // unique per device and run
  std::string op;         // the instruction (or step) that caused it
  int64_t bytes = 0;
  double time_us = 0;     // since the start of the run
  int64_t bytes_in_use_after = 0;
};

// A device buffer: aligned host memory whose logical size is accounted on
// the owning device. Freed through Device::Free only.
struct DeviceBuffer {
  void* data = nullptr;
  int64_t bytes = 0;
  int64_t id = 0;
  std::string op;  // who allocated it (for OOM reports)
  // False for borrowed host memory (AllocateBorrowed) and after TakeData:
  // the device then never frees `data`.
  bool owns_data = true;
  size_t live_index = 0;  // position in the device's live list
};

// What a run reports per device.
struct DeviceReport {
  int64_t device_id = 0;
  std::string name;  // "TPU_0 (v6e)"
  int64_t hbm_capacity_bytes = kDefaultHbmBytes;
  AllocatorStats stats;
  std::vector<AllocationRecord> records;
};

class Device {
 public:
  using Clock = std::chrono::steady_clock;
  // `record_allocations`: keep an AllocationRecord per allocation and free
  // (Report().records); off, the device's memory stays flat however many
  // allocations a run makes (a loop of millions of iterations).
  Device(int64_t id, int64_t hbm_capacity_bytes, Clock::time_point epoch,
         Trace* trace /*nullable*/, bool record_allocations = true);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int64_t id() const { return id_; }
  int64_t capacity() const { return capacity_; }
  const AllocatorStats& stats() const { return stats_; }

  // Allocates `bytes` for `op`. RESOURCE_EXHAUSTED when the device would
  // exceed its HBM capacity (message in the style of XLA's TPU OOM report).
  absl::StatusOr<DeviceBuffer*> Allocate(int64_t bytes, const std::string& op);
  // Accounted exactly like Allocate, but backed by the caller's host memory
  // (e.g. an argument literal; the executor never writes arguments), which
  // must outlive the buffer and is not freed by the device.
  absl::StatusOr<DeviceBuffer*> AllocateBorrowed(int64_t bytes, const std::string& op,
                                                 void* data);
  // Hands the buffer's host memory to the caller (release it with
  // runtime::HostFree), e.g. to become an output literal without a copy; the
  // buffer stays accounted until freed. nullptr for borrowed memory.
  void* TakeData(DeviceBuffer* buffer);
  void Free(DeviceBuffer* buffer, const std::string& op);
  // Frees every buffer still live (end of run); not recorded as events.
  void ReleaseAll();

  DeviceReport Report() const;
  double NowMicros() const;

 private:
  absl::StatusOr<DeviceBuffer*> Account(int64_t bytes, const std::string& op, void* data,
                                        bool owns_data);
  absl::Status CheckCapacity(int64_t bytes, const std::string& op) const;
  int64_t id_;
  int64_t capacity_;
  Clock::time_point epoch_;
  Trace* trace_;
  AllocatorStats stats_;
  bool record_allocations_;
  std::vector<AllocationRecord> records_;
  std::vector<DeviceBuffer*> live_;  // unordered (DeviceBuffer::live_index); OOM reports
  int64_t next_buffer_id_ = 1;
};

// "32.00G", "1.50M", "12B" as XLA prints sizes.
std::string HumanBytes(int64_t bytes);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_DEVICE_DEVICE_H_
