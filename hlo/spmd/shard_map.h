// jax.shard_map over a device mesh (1-D or N-D, hlo/spmd/mesh.h has the
// device <-> coordinate mapping). The body is built once, per shard, on
// local shapes, and says its cross-device communication explicitly through
// ShardMapContext: psum/pmax/pmin -> all-reduce (add/max/min to_apply),
// all_gather -> all-gather, psum_scatter -> reduce-scatter, ppermute ->
// collective-permute, axis_index -> arithmetic on partition-id; every
// collective has a channel id and use_global_device_ids, and the replica
// groups of the mesh axes it runs over only (on a 2x4 mesh, a psum over
// axis 1 has groups {{0,1,2,3},{4,5,6,7}}), as XLA prints them.
//
// The result is the per-device SPMD module XLA runs after partitioning
// (num_partitions=N; entry parameters and root annotated with sharding=
// saying how the global arrays are split; global shapes recorded as in
// hlo/spmd/sharding_util.h), or with ShardMapOptions::global_form the global
// program JAX lowers a shard_map to: custom-call Sharding ->
// SPMDFullToShardShape ({manual}) -> body -> Sharding ({manual}) ->
// SPMDShardToFullShape, which XLA's SPMD partitioner accepts.
//
// This is not an automatic partitioner: the caller decides every split.
#ifndef TPUOFF_HLO_SPMD_SHARD_MAP_H_
#define TPUOFF_HLO_SPMD_SHARD_MAP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/builder.h"
#include "hlo/ir/module.h"
#include "hlo/spmd/mesh.h"

namespace tpuoff::hlo {

// How one array lies over the mesh (a jax PartitionSpec): `split_dim`
// splits one dimension over every mesh axis (the 1-D shorthand); `dims`
// splits each listed dimension over its mesh axes (major first, e.g.
// P('data', None, 'model') is {{0, {0}}, {2, {1}}}); each axis is used at
// most once, unused axes replicate the array.
struct PartitionSpec {
  std::optional<int64_t> split_dim;  // nullopt and no dims: replicated
  std::vector<std::pair<int64_t, AxisSet>> dims;
  // Whether a split dimension may be indivisible by its shard count. Shards
  // are then ceil(S/n) wide as XLA pads them: the last shards hold padding
  // (whose contents are unspecified) that the body must ignore, see
  // ShardMapContext::ValidShardSize.
  bool allow_padding = false;

  static PartitionSpec Replicated() { return {}; }
  static PartitionSpec Split(int64_t dim, bool allow_padding = false) {
    return {dim, {}, allow_padding};
  }
  static PartitionSpec Tiled(std::vector<std::pair<int64_t, AxisSet>> dims,
                             bool allow_padding = false) {
    return {std::nullopt, std::move(dims), allow_padding};
  }
  // (dimension, axes) pairs on `mesh`, dimensions split over no axis left out.
  std::vector<std::pair<int64_t, AxisSet>> Resolve(const Mesh& mesh) const;
};

struct ShardMapInput {
  std::string name;  // entry parameter name
  Shape global_shape;
  PartitionSpec spec;
};

struct ShardMapOutput {
  std::string name;  // output name (output_names attribute, op_name metadata)
  PartitionSpec spec;
  // Size of the split dimension of the global array; 0: local size * N.
  // Needed when the shards are padded (ShardSize(global) must be the local
  // size). For `dims` specs: global_sizes, (dimension, size) pairs.
  int64_t global_split_size = 0;
  std::vector<std::pair<int64_t, int64_t>> global_sizes;
};

struct ShardMapOptions {
  // Emit JAX's global form instead of the per-device module.
  bool global_form = false;
};

// What a shard_map body sees: the builder of the per-shard computation and
// the mesh-axis collectives. Collectives are emitted in the builder their
// operand belongs to, so they may be used inside loop bodies (every device
// must execute the same collectives in the same order).
class ShardMapContext {
 public:
  ShardMapContext(XlaBuilder* builder, Mesh mesh) : builder_(builder), mesh_(std::move(mesh)) {}

  XlaBuilder* builder() const { return builder_; }
  const Mesh& mesh() const { return mesh_; }
  int64_t num_devices() const { return mesh_.num_devices; }
  // The replica groups over `axes` (Mesh::Groups); without axes, over every
  // axis: the one group {{0, ..., N-1}}.
  ReplicaGroups AxisGroups() const;
  ReplicaGroups AxisGroups(const AxisSet& axes) const;

  // psum / pmax / pmin over every mesh axis, or over `axes` only (no axes:
  // the identity). One all-reduce; several operands of one shape are
  // stacked into one array for a single all-reduce (XLA's partitioner takes
  // no variadic all-reduce in manual code); others get one each.
  XlaOp Psum(XlaOp x);
  XlaOp Pmax(XlaOp x);
  XlaOp Pmin(XlaOp x);
  std::vector<XlaOp> Psum(absl::Span<const XlaOp> xs);
  std::vector<XlaOp> Pmax(absl::Span<const XlaOp> xs);
  XlaOp Psum(XlaOp x, const AxisSet& axes);
  XlaOp Pmax(XlaOp x, const AxisSet& axes);
  std::vector<XlaOp> Psum(absl::Span<const XlaOp> xs, const AxisSet& axes);
  std::vector<XlaOp> Pmax(absl::Span<const XlaOp> xs, const AxisSet& axes);
  // all_gather(x, tiled=True): the devices' arrays concatenated along `dim`.
  XlaOp AllGather(XlaOp x, int64_t dim);
  XlaOp AllGather(XlaOp x, int64_t dim, const AxisSet& axes);
  // psum_scatter(x, scatter_dimension=dim, tiled=True).
  XlaOp PsumScatter(XlaOp x, int64_t dim);
  XlaOp PsumScatter(XlaOp x, int64_t dim, const AxisSet& axes);
  // ppermute: device s's x goes to device t for each (s, t); devices that
  // receive nothing get zeros.
  XlaOp Ppermute(XlaOp x, std::vector<std::pair<int64_t, int64_t>> perm);
  // axis_index as s32, emitted in `b` (default: the body's builder): the
  // partition id, or the device's index along `axes` (Mesh::IndexAlong).
  XlaOp AxisIndex(XlaBuilder* b = nullptr);
  XlaOp AxisIndex(const AxisSet& axes, XlaBuilder* b = nullptr);
  // For a dimension of global size S split over `axes` (n = their size,
  // with padding; default: every axis): the global index of this device's
  // first element, AxisIndex * ceil(S/n), and the number of its elements
  // that are not padding, clamp(S - offset, 0, ceil(S/n)). s32 scalars
  // emitted in `b`.
  XlaOp ShardOffset(int64_t global_size, XlaBuilder* b = nullptr);
  XlaOp ValidShardSize(int64_t global_size, XlaBuilder* b = nullptr);
  XlaOp ShardOffset(int64_t global_size, const AxisSet& axes, XlaBuilder* b = nullptr);
  XlaOp ValidShardSize(int64_t global_size, const AxisSet& axes, XlaBuilder* b = nullptr);

 private:
  std::vector<XlaOp> AllReduce(absl::Span<const XlaOp> xs, HloOpcode op, const AxisSet& axes);

  XlaBuilder* builder_;
  Mesh mesh_;
  XlaOp partition_id_;  // the body builder's, emitted once
};

// Builds the local body: `args` are the per-shard values of the inputs (in
// order); returns one local array per output spec. Errors go to the builder.
using ShardMapBody =
    std::function<std::vector<XlaOp>(ShardMapContext& ctx, absl::Span<const XlaOp> args)>;

// The verified module of `body` mapped over `mesh`. INVALID_ARGUMENT for a
// bad mesh, a split dimension out of range or indivisible without
// allow_padding, or a body output whose shape does not fit its spec.
absl::StatusOr<std::unique_ptr<HloModule>> ShardMap(const std::string& module_name,
                                                    const Mesh& mesh,
                                                    absl::Span<const ShardMapInput> in_specs,
                                                    absl::Span<const ShardMapOutput> out_specs,
                                                    const ShardMapBody& body,
                                                    const ShardMapOptions& options = {});

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_SPMD_SHARD_MAP_H_
