// A TPU v6e machine model for the static cost analysis
// (hlo/analysis/cost_analysis.h): chip rates, the ICI topology of a slice,
// collectives costed by algorithm on that topology, and the predicted time of
// each op = max(compute, memory) + collective time, per device.
//
// Figures (docs/ARCHITECTURE.md and README "Predicted v6e time" cite them):
//  - 918 TFLOP/s bf16 (2x that for int8) per chip: Cloud TPU v6e docs.
//  - f32 matmuls run as bf16 passes on the MXU: 1 at DEFAULT precision,
//    3 at HIGH, 6 at HIGHEST (XLA's ALG_DOT_BF16_BF16_F32_X6 and jax's
//    "Matmul precision" page), so full-precision f32 is 918/6 = 153 TFLOP/s.
//  - 1.64e12 B/s HBM: jax/_src/tpu_info.py (TPU_V6E mem_bw_bytes_per_second).
//  - ICI 9e10 B/s one way per link, 4 links per chip, ~1 us per hop:
//    jax-ml/scaling-book (tpus.md, sharding.md). The 2x4 tray (v6e-8) has no
//    wraparound; only axes of 16 chips wrap (the 16x16 pod is a torus).
//  - VPU and transcendental throughput are not published for v6e; the model
//    assumes scaling-book's VPU shape (8 sublanes x 128 lanes x 4 ALUs per
//    cycle) and one transcendental per lane and sublane per cycle at
//    scaling-book's 1.5 GHz TPU clock. These two are labelled assumptions.
#ifndef TPUOFF_HLO_ANALYSIS_TPU_MODEL_H_
#define TPUOFF_HLO_ANALYSIS_TPU_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/analysis/cost_analysis.h"
#include "hlo/ir/module.h"

namespace tpuoff::hlo {

struct TpuChipSpec {
  std::string name = "v6e";
  double bf16_flops_per_s = 918e12;  // MXU, one bf16 pass
  double int8_ops_per_s = 1836e12;
  double hbm_bytes_per_s = 1.64e12;
  double vpu_ops_per_s = 8 * 128 * 4 * 1.5e9;       // assumption (see above)
  double transcendentals_per_s = 8 * 128 * 1.5e9;   // assumption
  double ici_link_bytes_per_s = 9e10;               // one way, per link
  int ici_links_per_chip = 4;
  double ici_hop_latency_s = 1e-6;
  int64_t hbm_capacity_bytes = int64_t{32} << 30;

  static TpuChipSpec V6e() { return TpuChipSpec(); }
  // Full-precision f32 matmul rate (6 bf16 passes).
  double f32_flops_per_s() const { return bf16_flops_per_s / 6; }
};

// The chips of a slice on a 2-D (or N-D) ICI grid, and which chip each
// logical device of the module runs on.
struct IciTopology {
  std::vector<int64_t> dims;      // chips per ICI axis, e.g. {2, 4}
  std::vector<bool> wraparound;   // per axis
  // Chip (row-major index over dims) of each logical device; empty means
  // device d runs on chip d.
  std::vector<int64_t> chip_of_device;

  // The smallest v6e slice holding `num_devices` chips: 1x1, 2x2, 2x4
  // (v6e-8, one host), 4x4, 4x8, 8x8, 8x16, 16x16; axes of 16 wrap.
  // Fewer devices than chips use the first ones.
  static absl::StatusOr<IciTopology> V6eSlice(int64_t num_devices);
  // "AxB" (or "A", "AxBxC"); `wrap` axes of 16 chips as v6e does, or every
  // axis with a trailing ":torus", none with ":mesh".
  static absl::StatusOr<IciTopology> Parse(absl::string_view text);

  int64_t num_chips() const;
  std::vector<int64_t> Coords(int64_t device) const;
  // Shortest ICI path between the chips of two devices.
  int64_t Hops(int64_t a, int64_t b) const;
  std::string ToString() const;  // "2x4 (no wraparound)", "16x16 torus"
};

enum class Bound { kCompute, kMemory, kCollective, kNone };
const char* BoundName(Bound b);

struct CollectiveEstimate {
  double seconds = 0;
  std::string algorithm;   // "ring all-reduce over 8 chips (2 axes) ..."
  int64_t group_size = 1;
  double bytes_per_s = 0;  // the links the algorithm uses at once
};

// One collective as device `device` runs it: its replica group (or the
// source/target pairs of a collective-permute) placed on the topology.
// Ring all-reduce 2(W-1)/W * V / B, all-gather and reduce-scatter
// (W-1)/W * V / B, all-to-all a quarter (torus) or half (no wraparound) of
// an all-gather of the same data, collective-permute V / link; B sums the
// group's axes, each axis one link each way (two with wraparound over the
// whole axis); plus 1 us per hop: per axis its ring's steps (n - 1, n/2
// with wraparound), at least the group's diameter on the slice.
absl::StatusOr<CollectiveEstimate> EstimateCollective(const HloInstruction& instr,
                                                      int64_t device, int64_t num_devices,
                                                      const IciTopology& topology,
                                                      const TpuChipSpec& chip);

struct OpTime {
  double compute_s = 0;     // max of MXU, VPU and transcendental time
  double memory_s = 0;      // bytes accessed / HBM bandwidth
  double collective_s = 0;  // ICI time of its collectives
  double seconds = 0;       // executions x (max(compute, memory) + collective)
  Bound bound = Bound::kNone;
};

// Times of every op of `cost` on each device, grouped: devices whose times
// are identical form one group (an SPMD module on a symmetric placement is
// one group).
struct DeviceTimes {
  std::vector<int64_t> devices;
  std::vector<OpTime> ops;  // parallel to ModuleCost::ops
  double seconds = 0;
  double compute_s = 0, memory_s = 0, collective_s = 0;  // summed per op
};

struct ModulePrediction {
  TpuChipSpec chip;
  IciTopology topology;
  int64_t num_devices = 1;
  std::vector<DeviceTimes> groups;
  double max_seconds = 0;  // the step time: the slowest device
};

// `num_devices` is the module's partition count (at least 1).
absl::StatusOr<ModulePrediction> PredictModule(const ModuleCost& cost, int64_t num_devices,
                                               const IciTopology& topology,
                                               const TpuChipSpec& chip = {});

// The devices a module runs on: its partitions x replicas, or more when its
// collectives name more (jax's lowered text of a shard_map carries
// num_partitions only in the compile options).
int64_t ModuleDeviceCount(const HloModule& module);

// The roofline of one op without collectives (for tests and the trace).
OpTime RooflineTime(const OpCost& op, const TpuChipSpec& chip);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_TPU_MODEL_H_
