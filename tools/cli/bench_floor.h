// The physical references `tpuoff bench` measures next to the emulator:
//  - a hand-fused floor: the GRPO (or entropy) math of GRPO_SPEC.md written
//    as one streaming forward pass (online reference max and sums) and one
//    backward pass over the logits, row by row on all cores, with the widest
//    vector ISA the CPU has (bench_floor_rows.h: AVX-512, AVX2 or the
//    build's baseline, chosen at run time) and non-temporal dlogits stores.
//    It lives here, in the benchmark, not in the runtime: it is what a
//    hand-written kernel for this one computation costs on this machine;
//  - this machine's streaming memory bandwidth (read and write), from which
//    the bandwidth bound of a kernel follows;
//  - the host's resident-set peak (VmHWM), resettable between runs.
#ifndef TPUOFF_TOOLS_CLI_BENCH_FLOOR_H_
#define TPUOFF_TOOLS_CLI_BENCH_FLOOR_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/literal.h"
#include "kernels/grpo_config.h"

namespace tpuoff::tools {

struct FreeDeleter {
  void operator()(void* p) const;  // runtime::HostFree
};

// What the floor computes: per-token forward values and, with the backward,
// dlogits (the logits' shape and element type). dlogits is uninitialised
// memory written once (no zero fill), from the same recycling host allocator
// as the emulator's buffers (runtime/cpu/host_memory.h), so after a warm-up
// neither pays first-touch page faults.
struct FloorOutputs {
  double loss = 0;  // GRPO only
  std::vector<float> per_token_loss, logp, entropy, lse;  // [B*T]
  std::unique_ptr<void, FreeDeleter> dlogits;  // GRPO with backward only
  hlo::Shape dlogits_shape;
};

struct FloorOptions {
  bool backward = true;  // GRPO: also write dlogits (fwd_bwd)
  bool entropy_only = false;  // entropy kernel: per-token entropy only
  int num_threads = 0;  // 0: all
};

// Runs the floor on the arguments of a GRPO / entropy kernel module whose
// entry is `params` (parameters named as in GRPO_SPEC.md). UNIMPLEMENTED for
// configurations the floor does not cover (post_lse temperature,
// sequence_mean/constant aggregation with a token count input, the fused
// linear kernel); INVALID_ARGUMENT when an argument is missing.
absl::StatusOr<FloorOutputs> RunFloor(const kernels::GrpoConfig& config,
                                      const hlo::HloComputation& params,
                                      absl::Span<const hlo::Literal> args,
                                      const FloorOptions& options);

struct Bandwidth {
  double read_bytes_per_s = 0;
  double write_bytes_per_s = 0;
};

// Streaming bandwidth with `num_threads` threads (0: all) over a buffer of
// `bytes` (make it several times the last-level cache): the best of `reps`
// sum-reduction (read) and fill (write) passes.
Bandwidth MeasureBandwidth(int64_t bytes, int num_threads, int reps);

// Seconds to read `read_bytes` and write `write_bytes` at `bw`.
double BandwidthBoundSeconds(const Bandwidth& bw, double read_bytes, double write_bytes);

// Peak resident set since the last ResetPeakRss (VmHWM), and the current
// one (VmRSS), in bytes; 0 when /proc is unavailable.
int64_t PeakRssBytes();
int64_t CurrentRssBytes();
// Resets VmHWM to the current RSS (Linux >= 4.0: "5" > /proc/self/clear_refs).
// False when the kernel refuses; the peak then covers the process lifetime.
bool ResetPeakRss();

// Largest |a - b| / (atol + rtol * |b|) over `b`'s elements, `a` holding
// the same number of elements of b's type in row-major order; <= 1 means
// they agree.
double MaxScaledDifference(const void* a, const hlo::Literal& b, double atol, double rtol);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_BENCH_FLOOR_H_
