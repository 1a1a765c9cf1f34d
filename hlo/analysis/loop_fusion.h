// The pure-IR half of elementwise loop fusion, shared by the buffer planner
// (hlo/analysis/buffer_plan.h) and the emulator's loop compiler
// (runtime/emulator/loop_program.h): which instructions a fused loop can
// absorb, which reduces stream, and what a fused group reads. Keeping this in
// hlo/analysis lets the static memory analysis see exactly the fusion groups
// the emulator runs.
#ifndef TPUOFF_HLO_ANALYSIS_LOOP_FUSION_H_
#define TPUOFF_HLO_ANALYSIS_LOOP_FUSION_H_

#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/instruction.h"

namespace tpuoff::hlo {

// Whether a fused loop can express `instr` as a group member: elementwise
// ops, convert, compare, select, clamp, is-finite, real, imag, complex, iota,
// constants and the index-mapping ops below.
bool IsLoopFusible(const HloInstruction& instr);

// broadcast, transpose, slice, reverse, dynamic-slice: ops a fused loop
// folds into the index map of a load instead of evaluating (dynamic-slice's
// start scalars are read when the loop starts; its operand 0 is the mapped
// array).
bool IsIndexMappingOp(HloOpcode op);

// Members a fused loop may recompute in several groups (each consumer group
// evaluates its own copy) instead of materialising them for consumers in
// different groups: converts, index-mapping ops, iota and constants, whose
// recomputation costs at most one load.
bool IsDuplicableInLoop(const HloInstruction& instr);

// A scalar reducer (p0, p1) -> op(p0, p1) with op in add, multiply, maximum,
// minimum, and, or, xor; nullopt otherwise.
std::optional<HloOpcode> MatchReducer(const HloComputation* reducer);

// A single-input reduce with a MatchReducer reducer over trailing dimensions
// {k..rank-1}: the fused loop streams it without materialising its input.
bool IsStreamingReduce(const HloInstruction& instr);

// What a fused group reads, in the order the loop compiler numbers its
// inputs (depth-first from the root, operands in order).
struct LoopGroupReads {
  // Arrays read from outside the group (constants folded into the group are
  // not reads). A streaming reduce's init value comes last.
  std::vector<const HloInstruction*> inputs;
  // Inputs with the output's element type and dimensions read only at the
  // output's own index: the output may be written over one of them.
  // Empty for streaming reduces.
  std::vector<const HloInstruction*> identity_inputs;
};

// `root` is the group's root (a streaming reduce when `reduce`), `members`
// the fused instructions (excluding a reduce root). Members must satisfy the
// planner's grouping rules (hlo/analysis/buffer_plan.cc).
LoopGroupReads AnalyzeLoopGroup(
    const HloInstruction* root,
    const absl::flat_hash_set<const HloInstruction*>& members, bool reduce);

// The general form. kReduce: `roots` are sibling streaming reduces over the
// same input dimensions, evaluated in one pass (multi-output); their inputs
// come first, then each root's init value. kUpdate: the single root is a
// dynamic-update-slice whose update (operand 1, a member) the loop computes
// and writes straight into the result; reads are the update's inputs, then
// operand 0 (the array updated) and the start scalars. `members` exclude the
// reduce / update roots.
enum class LoopGroupKind { kElementwise, kReduce, kUpdate };
LoopGroupReads AnalyzeLoopGroup(
    absl::Span<const HloInstruction* const> roots,
    const absl::flat_hash_set<const HloInstruction*>& members, LoopGroupKind kind);

// Whether `dus` (a dynamic-update-slice) can be fused as a kUpdate root:
// scalar starts, update of the result's element type and rank.
bool IsFusibleUpdate(const HloInstruction& dus);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_LOOP_FUSION_H_
