// Global SPMD programs: what jax.jit lowers a sharded function to before
// XLA's SPMD partitioner runs (global shapes, sharding annotations, Shardy
// `xla.sdy.*` or GSPMD `Sharding` / `SPMDFullToShardShape` /
// `SPMDShardToFullShape` custom-calls around shard_map bodies).
//
// tpuoff does not reimplement XLA's partitioner. It runs such a program
// *replicated* on every device of the mesh: each device computes the global
// values (annotations are pass-throughs), and the manual (shard_map) regions
// run on each device's own shard with their real collectives. To that end
// LowerGlobalProgram rewrites, in place:
//   - a global -> local marker into a dynamic-slice of the device's tile
//     (offsets from partition-id through small constant tables);
//   - a local -> global marker into an all-gather over the mesh and the
//     reassembly of the tiles (slice, concatenate, reshape, transpose);
//   - every entry parameter and the root to sharding={replicated}, and
//     num_partitions to the mesh size,
// after which the module is an ordinary partitioned module whose inputs and
// outputs are the global arrays (every device's copy of an output must
// agree). Per-device HBM is therefore the unpartitioned footprint.
#ifndef TPUOFF_HLO_SPMD_GLOBAL_PROGRAM_H_
#define TPUOFF_HLO_SPMD_GLOBAL_PROGRAM_H_

#include "absl/status/status.h"
#include "hlo/ir/module.h"

namespace tpuoff::hlo {

// Whether `module` is a global program: it has Shardy meshes
// (xla.sdy.meshes) or a sharding/manual-region custom-call.
bool IsGlobalProgram(const HloModule& module);

// Rewrites a global program as described above. UNIMPLEMENTED (naming the
// instruction) for shardings it cannot map: sub-axes, explicit device
// orders of a Shardy mesh, uneven shard_map splits.
absl::Status LowerGlobalProgram(HloModule* module);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_SPMD_GLOBAL_PROGRAM_H_
