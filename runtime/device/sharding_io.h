// Between global arrays and the per-device arrays of a partitioned module:
// split each global argument by its parameter's sharding, and reassemble
// each global output from the devices' results by the root's sharding.
// Uneven splits follow XLA (shards of ceil(S/t); the last ones padded): the
// padding of split arguments is zero-filled and dropped on reassembly.
#ifndef TPUOFF_RUNTIME_DEVICE_SHARDING_IO_H_
#define TPUOFF_RUNTIME_DEVICE_SHARDING_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/attributes.h"
#include "hlo/ir/literal.h"
#include "hlo/spmd/sharding_util.h"

namespace tpuoff::runtime {

// Per-device arrays of shape `local` cut from `global` (shape checked
// against sharding and `local`): replicated/maximal: copies; tiled: each
// device's tile; manual: slice d of the leading device dimension.
// Only devices [first, first + count) when count >= 0 (result[i] is device
// first + i's).
absl::StatusOr<std::vector<hlo::Literal>> SplitGlobal(const hlo::Literal& global,
                                                      const hlo::HloSharding& sharding,
                                                      const hlo::Shape& local,
                                                      int64_t num_devices, int64_t first = 0,
                                                      int64_t count = -1);

// Where device `device`'s array of shape `local` comes from in the global
// array of shape `global`: the box of `extent` elements at `origin` (global
// coordinates), laid out in the device array as a row-major array of
// `dims` (the same rank as the box) starting at its origin; the rest of the
// device array (padding of an uneven split) is zero. For a manual sharding
// the box has the global's leading device dimension (extent 1).
struct PieceBox {
  std::vector<int64_t> origin, extent, dims;
  bool padded = false;  // the box does not fill the device array
};
absl::StatusOr<PieceBox> PieceBoxOf(const hlo::HloSharding& sharding, const hlo::Shape& global,
                                    const hlo::Shape& local, int64_t device);

// The global array of shape `global` from the devices' arrays (device
// order). Replicated: every copy must be bitwise equal to device 0's
// (FAILED_PRECONDITION naming the first differing device and element
// otherwise); the same for devices holding the same tile. `what` names the
// array in messages.
absl::StatusOr<hlo::Literal> AssembleGlobal(absl::Span<const hlo::Literal* const> per_device,
                                            const hlo::HloSharding& sharding,
                                            const hlo::Shape& global, const std::string& what);

// Every argument of a partitioned module split for its devices:
// result[d] are device d's arguments. `global_args` match
// signature.global_parameters (INVALID_ARGUMENT naming the parameter).
// With count >= 0 only devices [first, first + count) (result[i] is device
// first + i's).
absl::StatusOr<std::vector<std::vector<hlo::Literal>>> SplitArguments(
    const hlo::PartitionedSignature& signature, absl::Span<const hlo::Literal> global_args,
    int64_t first = 0, int64_t count = -1);

// The global outputs from RunSpmd's device-major result leaves (device 0's
// leaves, then device 1's, ...).
absl::StatusOr<std::vector<hlo::Literal>> AssembleOutputs(
    const hlo::PartitionedSignature& signature, absl::Span<const hlo::Literal> per_device,
    const std::vector<std::string>& output_names);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_DEVICE_SHARDING_IO_H_
