// The one interface through which collective ops move data between simulated
// devices. The executor flattens every collective to contiguous chunks in
// replica-group order, so a backend only moves and combines bytes; an MPI
// backend can replace the in-process one without touching the executor.
#ifndef TPUOFF_RUNTIME_DEVICE_COLLECTIVES_H_
#define TPUOFF_RUNTIME_DEVICE_COLLECTIVES_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
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

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual int64_t num_devices() const = 0;

  // out[i] = reduce over group members g (in group order) of in_g[i].
  // bf16/f16 are combined in f32 and rounded once per combine.
  virtual absl::Status AllReduce(const CollectiveCall& call,
                                 hlo::PrimitiveType type, ReductionKind kind,
                                 const void* in, void* out, int64_t count) = 0;
  // out = concat over group members (group order) of their `bytes` inputs.
  virtual absl::Status AllGather(const CollectiveCall& call, const void* in,
                                 int64_t bytes, void* out) = 0;
  // `in` holds group-size chunks of `count` elements; out = reduction over
  // members of the chunk at the caller's position in the group.
  virtual absl::Status ReduceScatter(const CollectiveCall& call,
                                     hlo::PrimitiveType type, ReductionKind kind,
                                     const void* in, void* out,
                                     int64_t count) = 0;
  // Chunk j of `in` goes to group member j; out chunk i comes from member i.
  virtual absl::Status AllToAll(const CollectiveCall& call, const void* in,
                                void* out, int64_t chunk_bytes) = 0;
  // out = input of the device whose pair targets the caller; zeros if none.
  // `pairs` are (source, target) device indices; `call.group` lists every
  // device that takes part (sources and targets).
  virtual absl::Status CollectivePermute(
      const CollectiveCall& call,
      const std::vector<std::pair<int64_t, int64_t>>& pairs, const void* in,
      void* out, int64_t bytes) = 0;

  // A device that failed tells the others, so their pending and future
  // collectives return ABORTED instead of waiting.
  virtual void Abort(int64_t device, const absl::Status& reason) = 0;
};

struct InProcessCollectivesOptions {
  // A collective whose group has not fully arrived after this long fails
  // with DEADLINE_EXCEEDED naming the devices that did and did not arrive.
  double timeout_seconds = 60.0;
};

// Threads + rendezvous in one process. Every member deposits its input, the
// last to arrive wakes the others, each computes its own output reading the
// others' inputs (combining in group order, so results are bit-identical
// across runs), and a second barrier keeps inputs alive until all have read.
class InProcessCollectives : public CollectiveBackend {
 public:
  explicit InProcessCollectives(int64_t num_devices,
                                InProcessCollectivesOptions options = {});
  ~InProcessCollectives() override;

  int64_t num_devices() const override { return num_devices_; }
  absl::Status AllReduce(const CollectiveCall& call, hlo::PrimitiveType type,
                         ReductionKind kind, const void* in, void* out,
                         int64_t count) override;
  absl::Status AllGather(const CollectiveCall& call, const void* in,
                         int64_t bytes, void* out) override;
  absl::Status ReduceScatter(const CollectiveCall& call, hlo::PrimitiveType type,
                             ReductionKind kind, const void* in, void* out,
                             int64_t count) override;
  absl::Status AllToAll(const CollectiveCall& call, const void* in, void* out,
                        int64_t chunk_bytes) override;
  absl::Status CollectivePermute(
      const CollectiveCall& call,
      const std::vector<std::pair<int64_t, int64_t>>& pairs, const void* in,
      void* out, int64_t bytes) override;
  void Abort(int64_t device, const absl::Status& reason) override;

 private:
  struct Rendezvous;
  // Deposits `in`, waits for the group, returns every member's input in
  // group order (valid until Depart).
  absl::Status Arrive(const CollectiveCall& call, const void* in,
                      std::shared_ptr<Rendezvous>* rv,
                      std::vector<const void*>* inputs);
  void Depart(const CollectiveCall& call, const std::shared_ptr<Rendezvous>& rv);
  absl::Status ValidateCall(const CollectiveCall& call) const;

  int64_t num_devices_;
  InProcessCollectivesOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Rendezvous>> pending_;
  absl::Status abort_status_;  // first failure reported through Abort
};

// Combines `count` elements of `in` into `inout` (inout = inout (op) in).
void CombineInto(hlo::PrimitiveType type, ReductionKind kind, const void* in,
                 void* inout, int64_t count);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_DEVICE_COLLECTIVES_H_
