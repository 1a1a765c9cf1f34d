// The processes one run spans: a single process, or the ranks of an MPI job
// (`mpirun -np P tpuoff run ...`) when tpuoff is built with MPI
// (CMake TPUOFF_MPI). The mesh's devices are spread over the ranks in
// contiguous blocks: with N devices and P ranks (P divides N), rank r runs
// the devices [r*N/P, (r+1)*N/P) — partition ids, which are row-major over
// the mesh axes, so on a 2x4 mesh over 2 ranks rank 0 holds mesh row 0.
//
// Launched by mpirun (detected from the launcher's environment) a build
// without MPI refuses to run instead of running P identical copies.
#ifndef TPUOFF_RUNTIME_DEVICE_PROCESS_WORLD_H_
#define TPUOFF_RUNTIME_DEVICE_PROCESS_WORLD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/device/collectives.h"

namespace tpuoff::runtime {

// Whether this build can run across MPI ranks.
bool MpiBuilt();

// Ranks the launcher started, from its environment (Open MPI, MPICH/Hydra,
// PMIx); 1 when not launched by an MPI launcher.
int LauncherWorldSize();

// Joins the MPI job when launched by mpirun with more than one rank
// (MPI_Init_thread); otherwise stays a single process. FAILED_PRECONDITION
// when launched with several ranks by a build without MPI.
absl::Status InitProcessWorld(int* argc, char*** argv);
// Leaves the job normally (MPI_Finalize); a no-op for a single process.
void FinalizeProcessWorld();
// Ends every rank of the job with `exit_code` (MPI_Abort) after printing
// `message` on stderr; a single process just exits.
[[noreturn]] void AbortProcessWorld(int exit_code, const std::string& message);

int WorldRank();  // 0 for a single process
int WorldSize();  // 1 for a single process
inline bool Distributed() { return WorldSize() > 1; }

// The devices rank `rank` runs of a mesh of `num_devices` (contiguous
// blocks). INVALID_ARGUMENT when the world size does not divide it.
struct DeviceBlock {
  int64_t first = 0;
  int64_t count = 0;
};
absl::StatusOr<DeviceBlock> DeviceBlockOf(int64_t num_devices, int rank);
// The rank that runs `device`.
int RankOfDevice(int64_t device, int64_t num_devices);

// Every other rank's `mine` to rank 0, which hands each to `take` as it
// arrives (ranks 1, 2, ... in order; `take` may consume the string), so
// rank 0 holds one rank's bytes at a time. Any size (sent in pieces below
// MPI's int counts). Rank 0's own `mine` is not sent.
absl::Status SendToRoot(const std::string& mine,
                        const std::function<absl::Status(int rank, std::string bytes)>& take);
// Rank 0's `value` on every rank.
absl::StatusOr<std::string> BroadcastFromRoot(const std::string& value);

// A collective backend across the ranks for a mesh of `num_devices`: this
// rank's devices meet at a rendezvous as in InProcessCollectives; a group
// spanning several ranks then exchanges its members' inputs over MPI (one
// communicator per distinct group, made up front from `groups`, which every
// rank must pass equal) and every rank combines them in group order, so
// results are bit-identical to the single-process run. A collective whose
// ranks do not all arrive within `timeout_seconds` fails with
// DEADLINE_EXCEEDED naming this rank, its devices and the group's ranks.
// UNIMPLEMENTED in a build without MPI.
absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeMpiCollectives(
    int64_t num_devices, const std::vector<std::vector<int64_t>>& groups,
    double timeout_seconds);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_DEVICE_PROCESS_WORLD_H_
