#include "runtime/device/collectives.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/status_macros.h"
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
  std::string key;  // pending_ key
  std::string op_name;
  std::string call_key;
  std::vector<int64_t> group;
  std::vector<CollectiveOp> ops;
  // Per member (group order): its leaves, completion and whether it came.
  std::vector<std::vector<CollectiveLeaf>> leaves;
  std::vector<CollectiveDone> done;
  std::vector<bool> arrived;
  int64_t num_arrived = 0;
  Clock::time_point first_arrival;
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

namespace {

int64_t PositionIn(const std::vector<int64_t>& group, int64_t device) {
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] == device) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace

void PerformCollectiveLeaf(const CollectiveOp& op, const std::vector<int64_t>& group,
                           const std::vector<const void*>& ins, const std::vector<void*>& outs) {
  const size_t g = group.size();
  auto in = [&](size_t m) { return static_cast<const uint8_t*>(ins[m]); };
  auto out = [&](size_t m) { return static_cast<uint8_t*>(outs[m]); };
  switch (op.kind) {
    case CollectiveOp::Kind::kAllReduce: {
      const int64_t bytes = op.count * hlo::ByteWidth(op.type);
      if (bytes == 0) return;
      // Combined into the first member written here, in group order: the
      // same bits whichever members a process holds.
      size_t f = 0;
      while (f < g && out(f) == nullptr) ++f;
      if (f == g) return;
      std::memcpy(out(f), in(0), bytes);
      for (size_t m = 1; m < g; ++m) CombineInto(op.type, op.reduction, in(m), out(f), op.count);
      for (size_t m = f + 1; m < g; ++m) {
        if (out(m) != nullptr) std::memcpy(out(m), out(f), bytes);
      }
      return;
    }
    case CollectiveOp::Kind::kAllGather:
      if (op.count == 0) return;
      for (size_t m = 0; m < g; ++m) {
        if (out(m) == nullptr) continue;
        for (size_t i = 0; i < g; ++i) std::memcpy(out(m) + i * op.count, in(i), op.count);
      }
      return;
    case CollectiveOp::Kind::kReduceScatter: {
      const int64_t bytes = op.count * hlo::ByteWidth(op.type);
      if (bytes == 0) return;
      for (size_t p = 0; p < g; ++p) {
        if (out(p) == nullptr) continue;
        std::memcpy(out(p), in(0) + p * bytes, bytes);
        for (size_t m = 1; m < g; ++m) {
          CombineInto(op.type, op.reduction, in(m) + p * bytes, out(p), op.count);
        }
      }
      return;
    }
    case CollectiveOp::Kind::kAllToAll:
      if (op.count == 0) return;
      for (size_t p = 0; p < g; ++p) {
        if (out(p) == nullptr) continue;
        for (size_t i = 0; i < g; ++i) {
          std::memcpy(out(p) + i * op.count, in(i) + p * op.count, op.count);
        }
      }
      return;
    case CollectiveOp::Kind::kCollectivePermute:
      if (op.count == 0) return;
      for (size_t t = 0; t < g; ++t) {
        if (out(t) == nullptr) continue;
        int64_t source = -1;
        for (const auto& [s, target] : op.pairs) {
          if (target == group[t]) source = s;
        }
        const int64_t pos = source >= 0 ? PositionIn(group, source) : -1;
        if (pos >= 0) {
          std::memcpy(out(t), in(pos), op.count);
        } else {
          std::memset(out(t), 0, op.count);
        }
      }
      return;
  }
}

int64_t CollectiveInputBytes(const CollectiveOp& op, int64_t group_size) {
  switch (op.kind) {
    case CollectiveOp::Kind::kAllReduce: return op.count * hlo::ByteWidth(op.type);
    case CollectiveOp::Kind::kReduceScatter:
      return group_size * op.count * hlo::ByteWidth(op.type);
    case CollectiveOp::Kind::kAllGather: return op.count;
    case CollectiveOp::Kind::kAllToAll: return group_size * op.count;
    case CollectiveOp::Kind::kCollectivePermute: return op.count;
  }
  return 0;
}

absl::StatusOr<bool> InProcessCollectives::Submit(const CollectiveCall& call,
                                                  const std::vector<CollectiveOp>& ops,
                                                  const std::vector<CollectiveLeaf>& leaves,
                                                  CollectiveDone done) {
  RETURN_IF_ERROR(ValidateCall(call));
  if (ops.size() != leaves.size()) {
    return absl::InternalError(absl::StrCat("collective %", call.op_name, ": ", ops.size(),
                                            " ops for ", leaves.size(), " leaves"));
  }
  const std::string key = absl::StrCat(call.key, "|", absl::StrJoin(call.group, ","));
  std::shared_ptr<Rendezvous> rv;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!abort_status_.ok()) return abort_status_;
    std::shared_ptr<Rendezvous>& slot = pending_[key];
    if (slot == nullptr) {
      slot = std::make_shared<Rendezvous>();
      slot->key = key;
      slot->op_name = call.op_name;
      slot->call_key = call.key;
      slot->group = call.group;
      slot->ops = ops;
      slot->leaves.resize(call.group.size());
      slot->done.resize(call.group.size());
      slot->arrived.assign(call.group.size(), false);
      slot->first_arrival = Clock::now();
    }
    Rendezvous& r = *slot;
    const int64_t pos = PositionIn(r.group, call.device);
    if (r.arrived[pos]) {
      return absl::InternalError(absl::StrCat("device ", call.device, " entered collective %",
                                              call.op_name, " twice"));
    }
    if (r.ops.size() != ops.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", call.device, ": collective %", call.op_name, " has ", ops.size(),
          " leaves here but ", r.ops.size(), " on another device"));
    }
    r.arrived[pos] = true;
    r.leaves[pos] = leaves;
    r.done[pos] = std::move(done);
    if (++r.num_arrived < static_cast<int64_t>(r.group.size())) return false;
    rv = slot;  // complete: every member's data is here and stays put
    pending_.erase(key);
  }
  for (size_t l = 0; l < rv->ops.size(); ++l) {
    std::vector<const void*> ins(rv->group.size());
    std::vector<void*> outs(rv->group.size());
    for (size_t m = 0; m < rv->group.size(); ++m) {
      ins[m] = rv->leaves[m][l].in;
      outs[m] = rv->leaves[m][l].out;
    }
    PerformCollectiveLeaf(rv->ops[l], rv->group, ins, outs);
  }
  for (size_t m = 0; m < rv->group.size(); ++m) {
    if (rv->group[m] != call.device && rv->done[m]) rv->done[m](absl::OkStatus());
  }
  return true;
}

void InProcessCollectives::FailWhere(
    const std::function<absl::Status(const Rendezvous&)>& pick) {
  std::vector<std::pair<std::shared_ptr<Rendezvous>, absl::Status>> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      absl::Status why = pick(*it->second);
      if (why.ok()) {
        ++it;
        continue;
      }
      failed.push_back({it->second, why});
      it = pending_.erase(it);
    }
  }
  for (auto& [rv, why] : failed) {
    for (size_t m = 0; m < rv->group.size(); ++m) {
      if (rv->arrived[m] && rv->done[m]) rv->done[m](why);
    }
  }
}

namespace {

std::string WaitingText(const std::vector<int64_t>& group, const std::vector<bool>& arrived) {
  std::vector<int64_t> waiting, missing;
  for (size_t i = 0; i < group.size(); ++i) (arrived[i] ? waiting : missing).push_back(group[i]);
  return absl::StrCat("devices {", absl::StrJoin(waiting, ","), "} are waiting for devices {",
                      absl::StrJoin(missing, ","), "}");
}

}  // namespace

void InProcessCollectives::Abort(int64_t device, const absl::Status& reason) {
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abort_status_.ok()) {
      abort_status_ = absl::AbortedError(absl::StrCat(
          "collective aborted: device ", device, " failed: ", reason.message()));
    }
    status = abort_status_;
  }
  FailWhere([&](const Rendezvous&) { return status; });
}

void InProcessCollectives::ExpireStale() {
  const Clock::time_point now = Clock::now();
  const auto limit = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.timeout_seconds));
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool stale = false;
    for (const auto& [key, rv] : pending_) stale |= now - rv->first_arrival > limit;
    if (!stale) return;
  }
  FailWhere([&](const Rendezvous& rv) {
    if (now - rv.first_arrival <= limit) return absl::OkStatus();
    return absl::DeadlineExceededError(absl::StrCat(
        "collective %", rv.op_name, " (", rv.call_key, ") did not complete in ",
        options_.timeout_seconds, "s: ", WaitingText(rv.group, rv.arrived)));
  });
}

void InProcessCollectives::FailPending() {
  FailWhere([](const Rendezvous& rv) {
    return absl::FailedPreconditionError(absl::StrCat(
        "collective %", rv.op_name, " (", rv.call_key, ") can never complete: ",
        WaitingText(rv.group, rv.arrived),
        ", which finished or wait at another collective"));
  });
}

// Blocking forms.

absl::Status CollectiveBackend::SubmitAndWait(const CollectiveCall& call,
                                              const std::vector<CollectiveOp>& ops,
                                              const std::vector<CollectiveLeaf>& leaves) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    absl::Status status;
  };
  auto waiter = std::make_shared<Waiter>();
  absl::StatusOr<bool> done = Submit(call, ops, leaves, [waiter](const absl::Status& s) {
    std::lock_guard<std::mutex> lock(waiter->mu);
    waiter->finished = true;
    waiter->status = s;
    waiter->cv.notify_all();
  });
  if (!done.ok()) return done.status();
  if (*done) return absl::OkStatus();
  std::unique_lock<std::mutex> lock(waiter->mu);
  while (!waiter->finished) {
    if (!waiter->cv.wait_for(lock, std::chrono::milliseconds(20),
                             [&] { return waiter->finished; })) {
      lock.unlock();
      ExpireStale();
      lock.lock();
    }
  }
  return waiter->status;
}

absl::Status CollectiveBackend::AllReduce(const CollectiveCall& call, PrimitiveType type,
                                          ReductionKind kind, const void* in, void* out,
                                          int64_t count) {
  CollectiveOp op;
  op.kind = CollectiveOp::Kind::kAllReduce;
  op.type = type;
  op.reduction = kind;
  op.count = count;
  return SubmitAndWait(call, {op}, {{in, out}});
}

absl::Status CollectiveBackend::AllGather(const CollectiveCall& call, const void* in,
                                          int64_t bytes, void* out) {
  CollectiveOp op;
  op.kind = CollectiveOp::Kind::kAllGather;
  op.count = bytes;
  return SubmitAndWait(call, {op}, {{in, out}});
}

absl::Status CollectiveBackend::ReduceScatter(const CollectiveCall& call, PrimitiveType type,
                                              ReductionKind kind, const void* in, void* out,
                                              int64_t count) {
  CollectiveOp op;
  op.kind = CollectiveOp::Kind::kReduceScatter;
  op.type = type;
  op.reduction = kind;
  op.count = count;
  return SubmitAndWait(call, {op}, {{in, out}});
}

absl::Status CollectiveBackend::AllToAll(const CollectiveCall& call, const void* in, void* out,
                                         int64_t chunk_bytes) {
  CollectiveOp op;
  op.kind = CollectiveOp::Kind::kAllToAll;
  op.count = chunk_bytes;
  return SubmitAndWait(call, {op}, {{in, out}});
}

absl::Status CollectiveBackend::CollectivePermute(
    const CollectiveCall& call, const std::vector<std::pair<int64_t, int64_t>>& pairs,
    const void* in, void* out, int64_t bytes) {
  CollectiveOp op;
  op.kind = CollectiveOp::Kind::kCollectivePermute;
  op.count = bytes;
  op.pairs = pairs;
  return SubmitAndWait(call, {op}, {{in, out}});
}

}  // namespace tpuoff::runtime
