// Static cost of a module, without running it: per instruction (or per
// planned step) flops, transcendentals and bytes read / written, with while
// loops multiplied by their trip counts when those are known.
//
// Two ways of counting:
//  - kXla counts exactly as XLA's HloCostAnalysis does (what jaxlib's
//    cost_analysis() reports for the same module): every instruction of the
//    entry on its own (no fusion), default bytes = operands + output with
//    XLA's per-opcode exceptions (slices read what they output, get-tuple-
//    element and bitcast move nothing, a tuple writes its pointer table,
//    fusions read their parameters once...), a while loop's body and
//    condition counted once, a conditional's most expensive branch.
//  - kFused counts what the emulator's plan (hlo/analysis/buffer_plan.h, the
//    loop fusion of hlo/analysis/loop_fusion.h) really moves: a fused group
//    reads the arrays it takes from outside once (only the slice of an array
//    it reads through a slice / dynamic-slice) and writes its roots; aliased
//    values (reshape, bitcast, tuple, get-tuple-element, in-place updates)
//    move nothing; loop bodies run their trip count.
//
// The v6e time of each op comes from hlo/analysis/tpu_model.h.
#ifndef TPUOFF_HLO_ANALYSIS_COST_ANALYSIS_H_
#define TPUOFF_HLO_ANALYSIS_COST_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "hlo/analysis/buffer_plan.h"
#include "hlo/ir/module.h"

namespace tpuoff::hlo {

enum class CostCounting { kXla, kFused };
const char* CostCountingName(CostCounting counting);  // "xla" | "fused"

// The cost of one op per execution. kXla: one entry instruction (a while,
// call or conditional includes its callees). kFused: one step of the plan
// (an op or a fused group), in the entry or inside a callee.
struct OpCost {
  const HloInstruction* instruction = nullptr;  // the op, or the group's root
  std::string name;   // instruction name, or "fusion.<root>(<n> ops)"
  std::string where;  // the computation chain, e.g. "main > tile_loop_body"
  int64_t fused_ops = 1;
  // Executions per run of the module: the product of the trip counts of the
  // loops around it (1 in the entry, and for everything with kXla).
  double executions = 1;
  double flops = 0;     // includes mxu_flops (XLA's "flops" key)
  double mxu_flops = 0; // of dot / convolution: the matrix unit's work
  // bf16 passes per MXU flop the op asks for (f32 with HIGHEST precision: 6).
  double mxu_passes = 1;
  double transcendentals = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  // Collectives inside this op (itself, or in a kXla while/call), each with
  // the number of times it runs per execution of this op.
  std::vector<std::pair<const HloInstruction*, double>> collectives;

  double bytes_accessed() const { return bytes_read + bytes_written; }
};

struct CostTotals {
  double flops = 0;
  double transcendentals = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  double bytes_accessed() const { return bytes_read + bytes_written; }
};

struct ModuleCost {
  std::string module_name;
  CostCounting counting = CostCounting::kFused;
  std::vector<OpCost> ops;  // schedule order; callees' steps after their op
  CostTotals totals;        // sum of executions x per-execution costs
  // Loops whose trip count could not be determined (counted once), etc.
  std::vector<std::string> notes;
};

struct CostOptions {
  CostCounting counting = CostCounting::kFused;
  // kFused: the plan the emulator runs (fusion on unless disabled).
  PlanOptions plan;
};

// kXla: no errors beyond malformed modules. kFused: the planner's errors.
absl::StatusOr<ModuleCost> AnalyzeCost(const HloModule& module,
                                       const CostOptions& options = {});

// XLA's per-instruction numbers (HloCostAnalysis), exposed for the fused
// counting and tests: flops, transcendentals and bytes of `instr` as XLA
// counts them (callees included as XLA includes them).
struct XlaInstructionCost {
  double flops = 0;
  double transcendentals = 0;
  double bytes_accessed = 0;
  double output_bytes = 0;  // XLA's "bytes accessedout{}"
  double mxu_flops = 0;     // dot / convolution flops (part of flops)
};
XlaInstructionCost XlaCostOf(const HloInstruction& instr);

// XLA's shape size on CPU: array bytes, 8 bytes per tuple element (the
// pointer table), 0 for tokens.
int64_t XlaShapeSize(const Shape& shape);

// bf16 MXU passes of a dot/convolution on TPU: 1 for bf16/f16/8-bit inputs
// and for f32 at DEFAULT precision (XLA:TPU rounds to bf16), 3 for f32 at
// HIGH (bf16_3x), 6 at HIGHEST or an f32 algorithm (bf16_6x).
double MxuPasses(const HloInstruction& instr);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_COST_ANALYSIS_H_
