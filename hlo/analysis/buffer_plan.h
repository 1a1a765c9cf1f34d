// Planning a computation once before running it: the schedule (the
// computation's instruction order, dead code dropped), fusion groups of
// elementwise chains (hlo/analysis/loop_fusion.h), and buffer assignment: which
// instructions get their own buffer and which alias an operand's
// (get-tuple-element, tuple, bitcast/reshape, copy of a dying operand,
// in-place dynamic-update-slice and elementwise when the operand dies, while
// state passing through the body), and the step after which each buffer is
// freed (its last use, as ggml-alloc counts consumers).
//
// This is pure IR: the emulator (runtime/emulator/plan.h) compiles the fused steps
// and allocates and frees exactly as planned here, and the static HBM
// analysis (hlo/analysis/memory_analysis.h) replays the same plan without running,
// so both see the same schedule and the same lifetimes.
#ifndef TPUOFF_HLO_ANALYSIS_BUFFER_PLAN_H_
#define TPUOFF_HLO_ANALYSIS_BUFFER_PLAN_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "hlo/ir/module.h"

namespace tpuoff::hlo {

enum class BufferKind { kArgument, kOutput, kTemp };
const char* BufferKindName(BufferKind kind);

// How a computation receives its parameters.
enum class ParamMode {
  kBorrowed,  // entry, call, conditional branch, fusion, while condition
  kDonated,   // while body: the state is handed over and may be freed or
              // updated in place, except leaves passing through unchanged
};

inline constexpr int kNoBuffer = -1;  // token leaves

struct PlannedBuffer {
  int id = 0;
  int64_t bytes = 0;
  Shape shape;  // array shape as defined
  BufferKind kind = BufferKind::kTemp;
  const HloInstruction* defined_by = nullptr;
  // Step that allocates it (-1: live on entry, i.e. an argument).
  int first_use_step = -1;
  // Last step reading it; -1 if never read; num_steps for outputs.
  int last_use_step = -1;
  // Freed by this computation after last_use_step (or handed to a while
  // loop there, see Step::moves). False for borrowed arguments and outputs.
  bool owned = true;
  // Allocated inside a callee (while/call/conditional/fusion results).
  bool from_callee = false;
};

enum class StepKind {
  kOp,          // one instruction with its own kernel (or a callee)
  kLoop,        // fused elementwise group
  kLoopReduce,  // fused group streamed into a reduce over trailing dims
  kRootCopy,    // copies root leaves that are borrowed or repeated
};

struct Step {
  StepKind kind = StepKind::kOp;
  const HloInstruction* instr = nullptr;  // the op / group root / reduce
  std::vector<const HloInstruction*> fused;  // group members, roots last
  // kLoop, kLoopReduce: the values the step defines, in schedule order,
  // instr last. Several for a multi-output reduce (sibling reduces over the
  // same input dimensions streamed in one pass), else {instr}.
  std::vector<const HloInstruction*> roots;
  // kLoop: instr is a dynamic-update-slice whose update the loop computes
  // and writes straight into the result (in place of operand 0 when
  // in_place_of is set, else over a copy of it).
  bool update = false;
  // kLoop, kLoopReduce: the arrays the group reads (LoopGroupReads::inputs).
  std::vector<const HloInstruction*> reads;
  std::string name;                          // trace / log name
  std::vector<int> allocs;  // buffers allocated right before the step
  std::vector<int> frees;   // owned buffers freed right after it
  // while: state leaves whose buffer is handed to the loop (the loop frees
  // or returns it), and leaves copied once before the loop because their
  // buffer is still needed afterwards, borrowed, or repeated.
  std::vector<int> moves;        // buffer ids
  std::vector<int> copy_leaves;  // leaf indices of the state
  // kRootCopy: (root leaf index, new buffer) pairs.
  std::vector<std::pair<int, int>> root_copies;
  int in_place_of = kNoBuffer;  // output written over this operand buffer
};

struct ComputationPlan {
  const HloComputation* computation = nullptr;
  ParamMode mode = ParamMode::kBorrowed;
  std::vector<Step> steps;
  std::vector<PlannedBuffer> buffers;
  // Buffer of each array leaf (depth-first) of every scheduled value.
  absl::flat_hash_map<const HloInstruction*, std::vector<int>> leaves;
  std::vector<std::vector<int>> param_leaves;  // per parameter number
  std::vector<int> output_leaves;  // the result after the last step
  std::vector<int> frees_on_entry;  // donated arguments never read
  // kDonated: whether state leaf i passes through the body unchanged.
  std::vector<bool> passthrough;

  int num_steps() const { return static_cast<int>(steps.size()); }
  std::string ToString() const;  // human-readable dump for debugging
};

struct PlanOptions {
  bool enable_fusion = true;
};

// Plans of every computation run as a program (entry, loop bodies and
// conditions, call and conditional branches, fusion computations), one per
// (computation, mode). Scalar reducers (to_apply of reduce/scatter/
// all-reduce) are evaluated elementwise and get no plan.
class BufferPlan {
 public:
  static absl::StatusOr<std::unique_ptr<BufferPlan>> Build(
      const HloModule& module, const PlanOptions& options = {});

  const ComputationPlan& entry() const { return *entry_; }
  // CHECK-fails if the computation was not planned in this mode.
  const ComputationPlan& Get(const HloComputation* computation,
                             ParamMode mode) const;
  std::vector<const ComputationPlan*> all() const;

 private:
  absl::StatusOr<const ComputationPlan*> Plan(const HloComputation* c,
                                              ParamMode mode);
  PlanOptions options_;
  std::map<std::pair<const HloComputation*, ParamMode>,
           std::unique_ptr<ComputationPlan>>
      plans_;
  const ComputationPlan* entry_ = nullptr;
};

// Number of leaves (arrays and tokens) of a shape, depth-first.
int64_t LeafCount(const Shape& shape);
// Array shapes of the leaves, depth-first (tokens give an invalid Shape).
std::vector<Shape> LeafShapes(const Shape& shape);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_BUFFER_PLAN_H_
