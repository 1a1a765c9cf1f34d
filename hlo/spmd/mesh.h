// Device meshes of the shard_map partitioner: 1-D or N-D (a v6e-8 slice as
// 2x4, a v6e-256 pod as 16x16), the axis arithmetic of partition ids, the
// replica groups of a set of axes, the tiled sharding of an array whose
// dimensions are split over mesh axes, and the physical chip each mesh
// position sits on.
//
// Device <-> coordinate mapping. Partition ids (what partition-id returns,
// what replica groups with use_global_device_ids name, the index of a device
// in the emulator) number the mesh positions row-major: on a mesh of axis
// sizes (A, B), position (a, b) is partition a*B + b, the first axis major,
// as jax.sharding.Mesh numbers its device array. An array dimension split
// over several axes (e.g. `--shard=vocab,vocab` on 16x16) is indexed by the
// mixed radix of those axes' coordinates, the first listed major: the
// PartitionSpec P(('x','y')) of jax.
//
// Physical chips (V6eChipOrder): what create_device_mesh(mesh_shape) of
// jax puts at each mesh position on a v6e slice of exactly that many chips
// (jax/_src/mesh_utils.py, read at jax-ml/jax cec06d1). Chips are numbered
// as jax lists them, sorted by reversed coordinates (x minor): chip
// x + X*y on an X-by-Y slice (v6e-8: X=4, Y=2). The handler of "TPU v6
// lite" (_v5e_create_device_mesh) reorders a tray of 8 into the ring
// (0,1,2,3,7,6,5,4) before reshaping to the mesh shape, whatever that shape
// (8, 2x4, 4x2), so neighbouring positions are ICI neighbours; 4 chips take
// (0,1,3,2); 16 chips (4x4) the ring (0,1,2,3,7,6,5,9,10,11,15,14,13,12,8,4)
// when one mesh axis spans all 16. Otherwise jax maps mesh axes onto the
// physical torus (_create_device_mesh_for_nd_torus, last axis first, each
// taking physical axes whose sizes multiply to its size): a 16x16 mesh on a
// v6e-256 gets axis 0 = y, axis 1 = x, i.e. partition p is chip p; a 1-D
// mesh of 256 gets x major, partition p is chip 16*(p%16) + p/16. Counts
// with no known v6e shape (or one jax cannot map) keep the sequential order.
// The emulator runs partitions; the chip of each is reported (memory, run)
// and matters on hardware only.
#ifndef TPUOFF_HLO_SPMD_MESH_H_
#define TPUOFF_HLO_SPMD_MESH_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/attributes.h"

namespace tpuoff::hlo {

// Module frontend attribute of a shard_map over an N-D mesh: its shape,
// e.g. "2x4" (partition ids numbered row-major over it).
inline constexpr absl::string_view kMeshShapeAttr = "mesh_shape";

// Mesh axes by index, the first listed major.
using AxisSet = std::vector<int64_t>;

// A mesh of devices 0..num_devices-1 (default: the 8 chips of a v6e-8 as
// one axis). `axis_sizes` empty means one axis of num_devices devices.
struct Mesh {
  int64_t num_devices = 8;
  std::string axis_name = "x";  // the 1-D axis's name (for messages)
  std::vector<int64_t> axis_sizes;      // major first; product = num_devices
  std::vector<std::string> axis_names;  // empty: "x", "y", "z", "a3", ...

  // An N-D mesh of these sizes.
  static Mesh Grid(std::vector<int64_t> sizes, std::vector<std::string> names = {});

  int64_t num_axes() const;
  int64_t axis_size(int64_t axis) const;
  std::string name(int64_t axis) const;
  // "8" or "2x4".
  std::string ShapeString() const;
  // All axes, in order.
  AxisSet AllAxes() const;
  // Product of the sizes of `axes` (1 for none).
  int64_t Size(const AxisSet& axes) const;
  // Coordinates (one per axis) of partition `device`, and back.
  std::vector<int64_t> Coordinates(int64_t device) const;
  int64_t Device(const std::vector<int64_t>& coords) const;
  // Index of `device` along `axes`: the mixed radix of its coordinates on
  // them, the first axis major (0 for no axes).
  int64_t IndexAlong(int64_t device, const AxisSet& axes) const;
  // The replica groups of a collective over `axes`: one group per
  // combination of the other axes' coordinates (in partition order of their
  // first member), each listing its devices in IndexAlong order.
  ReplicaGroups Groups(const AxisSet& axes) const;
};

inline constexpr int64_t kMaxMeshDevices = 4096;
// INVALID_ARGUMENT unless 1 <= num_devices <= kMaxMeshDevices and the axis
// sizes are >= 1 with product num_devices.
absl::Status ValidateMesh(const Mesh& mesh);

// Parses "N" or "AxB[xC...]" (each size >= 1); INVALID_ARGUMENT otherwise.
absl::StatusOr<Mesh> ParseMeshShape(absl::string_view text);

// INVALID_ARGUMENT when `axes` names an axis outside the mesh or one twice.
absl::Status CheckAxisSet(const Mesh& mesh, const AxisSet& axes, absl::string_view what);

// The XLA sharding of a rank-`rank` array whose dimension dim_axes[d].first
// is split over the mesh axes dim_axes[d].second (each axis used at most once
// overall): tiles per dimension the product of their axis sizes, devices
// placed by IndexAlong, the unused axes as a trailing replicated tile
// dimension (last_tile_dim_replicate). Replicated when nothing is split over
// more than one device. Written in iota form <=[sizes]T(perm).
HloSharding MeshSharding(const Mesh& mesh, int64_t rank,
                         const std::vector<std::pair<int64_t, AxisSet>>& dim_axes);

// Physical chip id (jax's sequential order, see above) of every partition of
// `mesh`, for a slice of exactly mesh.num_devices v6e chips.
std::vector<int64_t> V6eChipOrder(const Mesh& mesh);
// "partition -> chip" as text, e.g. "0:0 1:1 2:2 3:3 4:7 5:6 6:5 7:4".
std::string DescribeChipOrder(const Mesh& mesh);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_SPMD_MESH_H_
