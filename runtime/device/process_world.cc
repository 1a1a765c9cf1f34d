#include "runtime/device/process_world.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#ifdef TPUOFF_HAVE_MPI
#include <mpi.h>
#endif

namespace tpuoff::runtime {
namespace {

int g_rank = 0;
int g_size = 1;
bool g_mpi_initialized = false;

}  // namespace

bool MpiBuilt() {
#ifdef TPUOFF_HAVE_MPI
  return true;
#else
  return false;
#endif
}

int LauncherWorldSize() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(name);
    int n = 0;
    if (v != nullptr && absl::SimpleAtoi(v, &n) && n > 0) return n;
  }
  return 1;
}

int WorldRank() { return g_rank; }
int WorldSize() { return g_size; }

absl::StatusOr<DeviceBlock> DeviceBlockOf(int64_t num_devices, int rank) {
  const int p = WorldSize();
  if (num_devices <= 0 || num_devices % p != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the mesh has ", num_devices, " device(s), which ", p,
        " MPI ranks cannot share evenly: run with a number of ranks that divides ", num_devices));
  }
  const int64_t per_rank = num_devices / p;
  return DeviceBlock{rank * per_rank, per_rank};
}

int RankOfDevice(int64_t device, int64_t num_devices) {
  const int64_t per_rank = std::max<int64_t>(1, num_devices / WorldSize());
  return static_cast<int>(device / per_rank);
}

#ifdef TPUOFF_HAVE_MPI

absl::Status InitProcessWorld(int* argc, char*** argv) {
  if (LauncherWorldSize() <= 1) return absl::OkStatus();
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    return absl::UnavailableError("MPI_Init_thread failed");
  }
  g_mpi_initialized = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  // Errors are statuses, not MPI's default abort without a message.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided < MPI_THREAD_SERIALIZED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", g_rank, ": this MPI library gives thread level ", provided,
        ", tpuoff needs MPI_THREAD_SERIALIZED (its collectives progress on their own thread)"));
  }
  return absl::OkStatus();
}

void FinalizeProcessWorld() {
  if (g_mpi_initialized) MPI_Finalize();
  g_mpi_initialized = false;
}

void AbortProcessWorld(int exit_code, const std::string& message) {
  if (!message.empty()) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
  }
  std::fflush(stdout);
  if (g_mpi_initialized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

namespace {

constexpr int kGatherTag = 7101;
constexpr int64_t kPiece = int64_t{1} << 30;

absl::Status MpiError(int code, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return absl::InternalError(absl::StrCat("rank ", g_rank, ": ", what, " failed: ",
                                          std::string(text, len)));
}

absl::Status SendBytes(const std::string& bytes, int to) {
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (int rc = MPI_Send(&size, 1, MPI_INT64_T, to, kGatherTag, MPI_COMM_WORLD); rc) {
    return MpiError(rc, "MPI_Send");
  }
  for (int64_t at = 0; at < size; at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, size - at));
    if (int rc = MPI_Send(bytes.data() + at, n, MPI_BYTE, to, kGatherTag, MPI_COMM_WORLD); rc) {
      return MpiError(rc, "MPI_Send");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RecvBytes(int from) {
  int64_t size = 0;
  if (int rc = MPI_Recv(&size, 1, MPI_INT64_T, from, kGatherTag, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE);
      rc) {
    return MpiError(rc, "MPI_Recv");
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  for (int64_t at = 0; at < size; at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, size - at));
    if (int rc = MPI_Recv(bytes.data() + at, n, MPI_BYTE, from, kGatherTag, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
        rc) {
      return MpiError(rc, "MPI_Recv");
    }
  }
  return bytes;
}

}  // namespace

absl::Status SendToRoot(const std::string& mine,
                        const std::function<absl::Status(int, std::string)>& take) {
  if (!g_mpi_initialized || g_size == 1) return absl::OkStatus();
  if (g_rank != 0) return SendBytes(mine, 0);
  for (int r = 1; r < g_size; ++r) {
    absl::StatusOr<std::string> got = RecvBytes(r);
    if (!got.ok()) return got.status();
    if (absl::Status s = take(r, *std::move(got)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> BroadcastFromRoot(const std::string& value) {
  if (!g_mpi_initialized || g_size == 1) return value;
  if (g_rank == 0) {
    for (int r = 1; r < g_size; ++r) {
      if (absl::Status s = SendBytes(value, r); !s.ok()) return s;
    }
    return value;
  }
  return RecvBytes(0);
}

#else  // !TPUOFF_HAVE_MPI

absl::Status InitProcessWorld(int*, char***) {
  const int n = LauncherWorldSize();
  if (n > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "launched as one of ", n,
        " MPI ranks, but this tpuoff was built without MPI (CMake TPUOFF_MPI=OFF or no MPI "
        "found): it would run ", n,
        " identical copies; install libopenmpi-dev and rebuild, or run without mpirun"));
  }
  return absl::OkStatus();
}

void FinalizeProcessWorld() {}

void AbortProcessWorld(int exit_code, const std::string& message) {
  if (!message.empty()) std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::exit(exit_code);
}

absl::Status SendToRoot(const std::string&, const std::function<absl::Status(int, std::string)>&) {
  return absl::OkStatus();
}

absl::StatusOr<std::string> BroadcastFromRoot(const std::string& value) { return value; }

absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeMpiCollectives(
    int64_t, const std::vector<std::vector<int64_t>>&, double) {
  return absl::UnimplementedError("this tpuoff was built without MPI (CMake TPUOFF_MPI=OFF)");
}

#endif  // TPUOFF_HAVE_MPI

}  // namespace tpuoff::runtime
