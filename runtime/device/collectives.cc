#include "runtime/device/collectives.h"

#include <chrono>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/cpu/elementwise_kernels.h"

namespace tpuoff::runtime {

using hlo::PrimitiveType;

void CombineInto(PrimitiveType type, ReductionKind kind, const void* in,
                 void* inout, int64_t count) {
  hlo::HloOpcode op = hlo::HloOpcode::kAdd;
  switch (kind) {
    case ReductionKind::kSum: op = hlo::HloOpcode::kAdd; break;
    case ReductionKind::kProduct: op = hlo::HloOpcode::kMultiply; break;
    case ReductionKind::kMin: op = hlo::HloOpcode::kMinimum; break;
    case ReductionKind::kMax: op = hlo::HloOpcode::kMaximum; break;
    case ReductionKind::kAnd: op = hlo::HloOpcode::kAnd; break;
    case ReductionKind::kOr: op = hlo::HloOpcode::kOr; break;
    case ReductionKind::kXor: op = hlo::HloOpcode::kXor; break;
  }
  auto kernel = GetBinaryKernel(op, type);
  if (!kernel.ok()) return;  // validated by the executor before calling
  LoadKernel load = GetLoadKernel(type);
  StoreKernel store = GetStoreKernel(type);
  const int64_t width = hlo::ByteWidth(type);
  constexpr int64_t kBlock = 512;
  alignas(64) uint8_t a[kBlock * kMaxComputeWidth], b[kBlock * kMaxComputeWidth],
      r[kBlock * kMaxComputeWidth];
  for (int64_t start = 0; start < count; start += kBlock) {
    const int64_t n = std::min(kBlock, count - start);
    uint8_t* io = static_cast<uint8_t*>(inout) + start * width;
    load(io, 1, a, n);
    load(static_cast<const uint8_t*>(in) + start * width, 1, b, n);
    (*kernel)(a, b, r, n);
    store(r, io, n);
  }
}

struct InProcessCollectives::Rendezvous {
  std::vector<int64_t> group;
  std::vector<const void*> inputs;
  std::vector<bool> arrived;
  int64_t num_arrived = 0;
  int64_t num_departed = 0;
  absl::Status failure;  // set when the rendezvous timed out
};

InProcessCollectives::InProcessCollectives(int64_t num_devices,
                                           InProcessCollectivesOptions options)
    : num_devices_(num_devices), options_(options) {}

InProcessCollectives::~InProcessCollectives() = default;

absl::Status InProcessCollectives::ValidateCall(
    const CollectiveCall& call) const {
  std::set<int64_t> seen;
  bool member = false;
  for (int64_t d : call.group) {
    if (d < 0 || d >= num_devices_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", call.device, ": collective %", call.op_name,
          " names device ", d, " but the mesh has ", num_devices_,
          " device(s)"));
    }
    if (!seen.insert(d).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("device ", call.device, ": collective %", call.op_name,
                       " lists device ", d, " twice in its group"));
    }
    member |= d == call.device;
  }
  if (!member) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", call.device, ": collective %", call.op_name,
                     " called by a device outside its group {",
                     absl::StrJoin(call.group, ","), "}"));
  }
  return absl::OkStatus();
}

absl::Status InProcessCollectives::Arrive(const CollectiveCall& call,
                                          const void* in,
                                          std::shared_ptr<Rendezvous>* out_rv,
                                          std::vector<const void*>* inputs) {
  if (auto s = ValidateCall(call); !s.ok()) return s;
  const std::string key =
      absl::StrCat(call.key, "|", absl::StrJoin(call.group, ","));
  std::unique_lock<std::mutex> lock(mu_);
  if (!abort_status_.ok()) return abort_status_;
  std::shared_ptr<Rendezvous>& slot = pending_[key];
  if (slot == nullptr) {
    slot = std::make_shared<Rendezvous>();
    slot->group = call.group;
    slot->inputs.assign(call.group.size(), nullptr);
    slot->arrived.assign(call.group.size(), false);
  }
  std::shared_ptr<Rendezvous> rv = slot;
  size_t pos = 0;
  while (rv->group[pos] != call.device) ++pos;
  if (rv->arrived[pos]) {
    return absl::InternalError(absl::StrCat("device ", call.device,
                                            " entered collective %",
                                            call.op_name, " twice"));
  }
  rv->arrived[pos] = true;
  rv->inputs[pos] = in;
  rv->num_arrived++;
  const int64_t size = static_cast<int64_t>(rv->group.size());
  if (rv->num_arrived == size) cv_.notify_all();
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(options_.timeout_seconds));
  while (rv->num_arrived < size && rv->failure.ok() && abort_status_.ok()) {
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
        rv->num_arrived < size && rv->failure.ok()) {
      std::vector<int64_t> waiting, missing;
      for (size_t i = 0; i < rv->group.size(); ++i) {
        (rv->arrived[i] ? waiting : missing).push_back(rv->group[i]);
      }
      rv->failure = absl::DeadlineExceededError(absl::StrCat(
          "collective %", call.op_name, " (", call.key, ") did not complete in ",
          options_.timeout_seconds, "s: devices {",
          absl::StrJoin(waiting, ","), "} are waiting for devices {",
          absl::StrJoin(missing, ","), "}"));
      auto it = pending_.find(key);
      if (it != pending_.end() && it->second == rv) pending_.erase(it);
      cv_.notify_all();
    }
  }
  if (!rv->failure.ok()) return rv->failure;
  if (!abort_status_.ok()) return abort_status_;
  *inputs = rv->inputs;
  *out_rv = rv;
  return absl::OkStatus();
}

void InProcessCollectives::Depart(const CollectiveCall& call,
                                  const std::shared_ptr<Rendezvous>& rv) {
  const std::string key =
      absl::StrCat(call.key, "|", absl::StrJoin(call.group, ","));
  std::unique_lock<std::mutex> lock(mu_);
  rv->num_departed++;
  const int64_t size = static_cast<int64_t>(rv->group.size());
  if (rv->num_departed == size) {
    auto it = pending_.find(key);
    if (it != pending_.end() && it->second == rv) pending_.erase(it);
    cv_.notify_all();
    return;
  }
  // Keep our input alive until every member has read it. All members have
  // arrived, so this wait is bounded by their copy time; abort ends it.
  while (rv->num_departed < size && abort_status_.ok()) cv_.wait(lock);
}

void InProcessCollectives::Abort(int64_t device, const absl::Status& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (abort_status_.ok()) {
    abort_status_ = absl::AbortedError(absl::StrCat(
        "collective aborted: device ", device, " failed: ", reason.message()));
  }
  cv_.notify_all();
}

namespace {
int64_t PositionIn(const std::vector<int64_t>& group, int64_t device) {
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] == device) return static_cast<int64_t>(i);
  }
  return -1;
}
}  // namespace

absl::Status InProcessCollectives::AllReduce(const CollectiveCall& call,
                                             PrimitiveType type,
                                             ReductionKind kind, const void* in,
                                             void* out, int64_t count) {
  std::shared_ptr<Rendezvous> rv;
  std::vector<const void*> inputs;
  if (auto s = Arrive(call, in, &rv, &inputs); !s.ok()) return s;
  const int64_t bytes = count * hlo::ByteWidth(type);
  std::memcpy(out, inputs[0], bytes);
  for (size_t i = 1; i < inputs.size(); ++i) {
    CombineInto(type, kind, inputs[i], out, count);
  }
  Depart(call, rv);
  return absl::OkStatus();
}

absl::Status InProcessCollectives::AllGather(const CollectiveCall& call,
                                             const void* in, int64_t bytes,
                                             void* out) {
  std::shared_ptr<Rendezvous> rv;
  std::vector<const void*> inputs;
  if (auto s = Arrive(call, in, &rv, &inputs); !s.ok()) return s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::memcpy(static_cast<uint8_t*>(out) + i * bytes, inputs[i], bytes);
  }
  Depart(call, rv);
  return absl::OkStatus();
}

absl::Status InProcessCollectives::ReduceScatter(const CollectiveCall& call,
                                                 PrimitiveType type,
                                                 ReductionKind kind,
                                                 const void* in, void* out,
                                                 int64_t count) {
  std::shared_ptr<Rendezvous> rv;
  std::vector<const void*> inputs;
  if (auto s = Arrive(call, in, &rv, &inputs); !s.ok()) return s;
  const int64_t bytes = count * hlo::ByteWidth(type);
  const int64_t pos = PositionIn(call.group, call.device);
  std::memcpy(out, static_cast<const uint8_t*>(inputs[0]) + pos * bytes, bytes);
  for (size_t i = 1; i < inputs.size(); ++i) {
    CombineInto(type, kind, static_cast<const uint8_t*>(inputs[i]) + pos * bytes,
                out, count);
  }
  Depart(call, rv);
  return absl::OkStatus();
}

absl::Status InProcessCollectives::AllToAll(const CollectiveCall& call,
                                            const void* in, void* out,
                                            int64_t chunk_bytes) {
  std::shared_ptr<Rendezvous> rv;
  std::vector<const void*> inputs;
  if (auto s = Arrive(call, in, &rv, &inputs); !s.ok()) return s;
  const int64_t pos = PositionIn(call.group, call.device);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::memcpy(static_cast<uint8_t*>(out) + i * chunk_bytes,
                static_cast<const uint8_t*>(inputs[i]) + pos * chunk_bytes,
                chunk_bytes);
  }
  Depart(call, rv);
  return absl::OkStatus();
}

absl::Status InProcessCollectives::CollectivePermute(
    const CollectiveCall& call,
    const std::vector<std::pair<int64_t, int64_t>>& pairs, const void* in,
    void* out, int64_t bytes) {
  std::shared_ptr<Rendezvous> rv;
  std::vector<const void*> inputs;
  if (auto s = Arrive(call, in, &rv, &inputs); !s.ok()) return s;
  int64_t source = -1;
  for (const auto& [s, t] : pairs) {
    if (t == call.device) source = s;
  }
  const int64_t pos = source >= 0 ? PositionIn(call.group, source) : -1;
  if (pos >= 0) {
    std::memcpy(out, inputs[pos], bytes);
  } else {
    std::memset(out, 0, bytes);
  }
  Depart(call, rv);
  return absl::OkStatus();
}

}  // namespace tpuoff::runtime
