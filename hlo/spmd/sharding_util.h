// Arithmetic of XLA shardings on array shapes (per-device shape, which
// device holds which tile) and the signature of a partitioned per-device
// module: for every entry parameter and result leaf its per-device shape,
// its global shape and its sharding.
//
// Uneven splits follow XLA: a dimension of size S split in t tiles has
// shards of ceil(S/t) elements; the last shards are padded. The global size
// cannot be recovered from the per-device shape alone, so ShardMap records
// the global shapes in two module frontend attributes (below); without them
// the global size is the per-device size times the tile count.
#ifndef TPUOFF_HLO_SPMD_SHARDING_UTIL_H_
#define TPUOFF_HLO_SPMD_SHARDING_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "hlo/ir/attributes.h"
#include "hlo/ir/module.h"
#include "hlo/ir/shape.h"

namespace tpuoff::hlo {

// Module frontend attributes: ';'-separated global shapes ("f32[2,5,37];
// s32[2,5]") of the entry parameters and of the result leaves.
inline constexpr absl::string_view kGlobalParameterShapesAttr = "global_parameter_shapes";
inline constexpr absl::string_view kGlobalOutputShapesAttr = "global_output_shapes";

std::string EncodeShapeList(absl::Span<const Shape> shapes);
// INVALID_ARGUMENT naming the bad entry.
absl::StatusOr<std::vector<Shape>> DecodeShapeList(absl::string_view text);

// XLA's shard size of a dimension of `size` split in `tiles`: ceil(size/tiles).
int64_t ShardSize(int64_t size, int64_t tiles);

// The sharding of a rank-`rank` array split along `dim` over devices 0..n-1
// in order ({devices=[1,..,n,..,1]<=[n]}); replicated when n == 1.
HloSharding SplitSharding(int64_t rank, int64_t dim, int64_t n);

// Tiles along each of the `rank` data dimensions: the tile assignment's
// leading dimensions for a tiled sharding (trailing replication/subgroup
// dimensions excluded), all 1 otherwise. INVALID_ARGUMENT when a tiled
// sharding does not have enough dimensions.
absl::StatusOr<std::vector<int64_t>> DataTileCounts(const HloSharding& sharding,
                                                     int64_t rank);

// The per-device shape of `global` under `sharding` (manual: `global`
// without its leading device dimension; replicated, maximal: unchanged).
absl::StatusOr<Shape> ShardShape(const Shape& global, const HloSharding& sharding);

// Tile coordinates (one per data dimension) that `device` holds under a
// tiled sharding. NOT_FOUND when the tile assignment does not name it.
absl::StatusOr<std::vector<int64_t>> TileIndexOfDevice(const HloSharding& sharding,
                                                       int64_t rank, int64_t device);

// Where each entry parameter and each result leaf of a partitioned module
// lives. Global shapes: the recorded attributes when present (checked
// against the per-device shapes), else per-device size * tiles; a manual
// array's global form stacks the devices' arrays along a new dimension 0.
struct PartitionedSignature {
  int64_t num_devices = 1;
  std::vector<std::string> parameter_names;
  std::vector<Shape> local_parameters;
  std::vector<Shape> global_parameters;
  std::vector<HloSharding> parameter_shardings;
  std::vector<Shape> local_outputs;  // result leaves, depth-first
  std::vector<Shape> global_outputs;
  std::vector<HloSharding> output_shardings;
};

// num_partitions > 1 and every entry parameter and the root carry a sharding:
// the module is a per-device program whose arrays are pieces of global ones.
bool IsPartitionedModule(const HloModule& module);

// INVALID_ARGUMENT naming the parameter/output when a sharding does not fit
// its shape or the mesh (a tile count that is not the device count, a device
// outside 0..num_partitions-1, a recorded global shape that disagrees);
// UNIMPLEMENTED for a shard_map's global form (SPMDFullToShardShape), which
// only XLA's partitioner makes per-device.
absl::StatusOr<PartitionedSignature> GetPartitionedSignature(const HloModule& module);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_SPMD_SHARDING_UTIL_H_
