// The one interface through which collective ops move data between simulated
// devices. The executor flattens every collective to contiguous chunks in
// replica-group order, so a backend only moves and combines bytes; an MPI
// backend can replace the in-process one without touching the executor.
//
// A collective is submitted, not waited for: a device hands over where its
// inputs are and where its outputs go, and the backend either completes the
// collective at once (the device was the last of its group to arrive) or
// later, calling the device's completion when the last member arrives. That
// lets the executor run many devices on a few threads: a device waiting at
// a collective holds no thread (runtime/emulator/executor.h). Blocking
// helpers (AllReduce, ...) wrap Submit for callers that own one thread per
// device.
#ifndef TPUOFF_RUNTIME_DEVICE_COLLECTIVES_H_
#define TPUOFF_RUNTIME_DEVICE_COLLECTIVES_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hlo/ir/primitive_type.h"

namespace tpuoff::runtime {

enum class ReductionKind { kSum, kProduct, kMin, kMax, kAnd, kOr, kXor };

// Identifies one execution of one collective instruction on one device. Every
// device of `group` must call the backend with an equal `key`.
struct CollectiveCall {
  int64_t device = 0;           // caller's index in the mesh
  std::string key;              // "<instruction>#<channel>@<execution count>"
  std::string op_name;          // instruction name, for messages
  std::vector<int64_t> group;   // participating devices, in group order
};

// What one leaf of a collective does with the members' data (equal on every
// member of the group).
struct CollectiveOp {
  enum class Kind { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kCollectivePermute };
  Kind kind = Kind::kAllReduce;
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;  // reductions
  ReductionKind reduction = ReductionKind::kSum;
  // kAllReduce: elements of every member's input and output.
  // kReduceScatter: elements of each member's output (its input holds
  //   group-size such chunks).
  // kAllGather: bytes of each member's input (the output holds group-size
  //   inputs in group order).
  // kAllToAll: bytes of one chunk (input chunk j goes to member j; output
  //   chunk i comes from member i).
  // kCollectivePermute: bytes; `pairs` are (source, target) devices, and a
  //   target no pair names gets zeros.
  int64_t count = 0;
  std::vector<std::pair<int64_t, int64_t>> pairs;
};

// One member's data for one leaf: valid until the collective completes.
struct CollectiveLeaf {
  const void* in = nullptr;
  void* out = nullptr;
};

// Called once, from any thread, when a pending collective completed (OK:
// the member's outputs are written) or failed.
using CollectiveDone = std::function<void(const absl::Status&)>;

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual int64_t num_devices() const = 0;

  // Deposits the caller's leaves (one per op). Returns true when the
  // collective completed during the call (every member's outputs are
  // written; `done` is not called), false when it is pending: `done` is
  // called later, possibly before Submit returns. bf16/f16 reductions are
  // combined in f32 and rounded once per combine, in group order, so
  // results are bit-identical across runs.
  virtual absl::StatusOr<bool> Submit(const CollectiveCall& call,
                                      const std::vector<CollectiveOp>& ops,
                                      const std::vector<CollectiveLeaf>& leaves,
                                      CollectiveDone done) = 0;

  // A device that failed tells the others: their pending and future
  // collectives fail with ABORTED instead of waiting.
  virtual void Abort(int64_t device, const absl::Status& reason) = 0;

  // Fails pending collectives that have waited longer than the backend's
  // timeout (DEADLINE_EXCEEDED naming the devices that did and did not
  // arrive). Cheap when nothing is pending; the executor calls it often.
  virtual void ExpireStale() {}

  // Fails every pending collective: no missing member can arrive any more
  // (all of them finished or wait elsewhere). FAILED_PRECONDITION naming
  // the waiting and the missing devices.
  virtual void FailPending() {}

  // Blocking forms of Submit for one leaf (one thread per device).
  absl::Status AllReduce(const CollectiveCall& call, hlo::PrimitiveType type,
                         ReductionKind kind, const void* in, void* out, int64_t count);
  absl::Status AllGather(const CollectiveCall& call, const void* in, int64_t bytes,
                         void* out);
  absl::Status ReduceScatter(const CollectiveCall& call, hlo::PrimitiveType type,
                             ReductionKind kind, const void* in, void* out, int64_t count);
  absl::Status AllToAll(const CollectiveCall& call, const void* in, void* out,
                        int64_t chunk_bytes);
  absl::Status CollectivePermute(const CollectiveCall& call,
                                 const std::vector<std::pair<int64_t, int64_t>>& pairs,
                                 const void* in, void* out, int64_t bytes);
  // Submit, then wait for completion (calling ExpireStale while waiting).
  absl::Status SubmitAndWait(const CollectiveCall& call, const std::vector<CollectiveOp>& ops,
                             const std::vector<CollectiveLeaf>& leaves);
};

struct InProcessCollectivesOptions {
  // A collective whose group has not fully arrived after this long fails
  // with DEADLINE_EXCEEDED naming the devices that did and did not arrive.
  double timeout_seconds = 60.0;
};

// A rendezvous per (key, group) in one process. Every member deposits its
// leaves; the last to arrive computes every member's outputs (reading the
// others' inputs, combining in group order) and completes the others.
class InProcessCollectives : public CollectiveBackend {
 public:
  explicit InProcessCollectives(int64_t num_devices,
                                InProcessCollectivesOptions options = {});
  ~InProcessCollectives() override;

  int64_t num_devices() const override { return num_devices_; }
  absl::StatusOr<bool> Submit(const CollectiveCall& call, const std::vector<CollectiveOp>& ops,
                              const std::vector<CollectiveLeaf>& leaves,
                              CollectiveDone done) override;
  void Abort(int64_t device, const absl::Status& reason) override;
  void ExpireStale() override;
  void FailPending() override;

 private:
  struct Rendezvous;
  using Clock = std::chrono::steady_clock;
  absl::Status ValidateCall(const CollectiveCall& call) const;
  // Fails the pending rendezvous chosen by `pick` (under mu_), then calls
  // their members' completions (outside it).
  void FailWhere(const std::function<absl::Status(const Rendezvous&)>& pick);

  int64_t num_devices_;
  InProcessCollectivesOptions options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Rendezvous>> pending_;
  absl::Status abort_status_;  // first failure reported through Abort
};

// Every member's outputs of one leaf from every member's inputs, as the
// last member to arrive computes them (reductions in group order). `ins`
// and `outs` are per member in group order; an output that is nullptr (a
// member another process holds) is not written. Results are bit-identical
// whichever outputs are asked for.
void PerformCollectiveLeaf(const CollectiveOp& op, const std::vector<int64_t>& group,
                           const std::vector<const void*>& ins, const std::vector<void*>& outs);

// Bytes of one member's input of `op` in a group of `group_size`.
int64_t CollectiveInputBytes(const CollectiveOp& op, int64_t group_size);

// Combines `count` elements of `in` into `inout` (inout = inout (op) in).
void CombineInto(hlo::PrimitiveType type, ReductionKind kind, const void* in,
                 void* inout, int64_t count);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_DEVICE_COLLECTIVES_H_
