// Device groups of a collective's mesh-axes replica groups (XLA's
// MeshAxesReplicaGroupList: `mesh['a'=4,'b'=2], device_ids=(...) {'a'}`).
//
// A mesh is a row-major array of devices with named axes; its device at
// position k is device_ids[k] (k itself without a list). A collective names
// some axes or sub-axes (`'a':(m)k`: axis a reshaped to [m, k, rest], the
// middle part); one group per index of everything not named, running over
// the named parts in the order named (the first major).
#ifndef TPUOFF_HLO_IR_MESH_REPLICA_GROUPS_H_
#define TPUOFF_HLO_IR_MESH_REPLICA_GROUPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "hlo/ir/attributes.h"

namespace tpuoff::hlo {

// Groups over the whole axes `selected` of a mesh of axis sizes `sizes`
// whose devices are numbered row-major (no device id list).
std::vector<std::vector<int64_t>> MeshReplicaGroups(const std::vector<int64_t>& sizes,
                                                    const std::vector<int>& selected);

// The groups of `g`'s mesh form (g.mesh_axes not empty), checked as XLA
// checks them: a device id list is a permutation of 0..n-1 for the mesh's n
// devices (given as a list or as its `[dims]T(perm)` iota form); every named
// axis exists; sub-axes fit their axis (pre_size >= 1, 1 < size < the
// axis, pre_size * size divides it) and parts of one axis do not overlap.
absl::StatusOr<std::vector<std::vector<int64_t>>> MeshAxesGroups(const ReplicaGroups& g);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_MESH_REPLICA_GROUPS_H_
