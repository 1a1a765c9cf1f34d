// A fused elementwise loop: a small DAG of elementwise nodes evaluated block
// by block over an iteration shape, so intermediates live in per-thread
// blocks of kLoopBlock elements (kept in L1: scratch slots are reused once a
// node's value is dead) instead of whole arrays. Leaves load external arrays
// through an affine index map (identity, broadcast, transpose, slice,
// reverse, dynamic-slice with starts read when the loop starts), read
// constants, or generate iota. Values constant along the minor dimension
// (broadcast rows, scalars) are computed once per block and fed to the
// kernels as scalars. Three forms (hlo/analysis/loop_fusion.h):
//  - elementwise: the root's block is stored to the output;
//  - reduce: one or more sibling reductions over the trailing dimensions
//    stream as the blocks are evaluated (reduce(exp(x - max)) never
//    materialises exp(x - max); sum e, sum e*d and the chosen logit share
//    one pass);
//  - update: the root's block is stored into a larger array at the
//    dynamic-update-slice's (clamped) offset.
#ifndef TPUOFF_RUNTIME_EMULATOR_LOOP_PROGRAM_H_
#define TPUOFF_RUNTIME_EMULATOR_LOOP_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/instruction.h"
#include "hlo/analysis/loop_fusion.h"
#include "runtime/cpu/elementwise_kernels.h"
#include "runtime/emulator/loop_jit.h"
#include "runtime/cpu/fold_kernels.h"

namespace tpuoff::runtime {

inline constexpr int64_t kLoopBlock = 2048;  // elements per block
// Row-blocks per reduction chunk. Fixed, so the combine order (and the
// result) does not depend on the thread count.
inline constexpr int64_t kReduceChunkBlocks = 8;

// A start index read once per run: adds clamp(start, 0, max_start) * stride
// to an offset (XLA clamps dynamic-slice / dynamic-update-slice starts).
struct DynamicStart {
  int input = -1;  // program input holding the scalar
  hlo::PrimitiveType type = hlo::PrimitiveType::kS32;
  int64_t stride = 0;
  int64_t max_start = 0;
};

struct LoopNode {
  enum class Kind {
    kLoad, kIota, kUnary, kBinary, kCompare, kConvert, kIsFinite, kSelect,
    kClamp,
    // pred: minor index == args[0] (an invariant integer of type
    // `iota_type`), or != when `negate`: compare(iota(minor), broadcast(v)),
    // a one-hot mask written without materialising the iota.
    kIotaEq,
    // f32: exp(args[0] - args[1]) (args[1] invariant; + when `negate`),
    // exponential(subtract(x, broadcast(s))) in one pass.
    kExpShift
  };
  Kind kind = Kind::kLoad;
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;  // result type
  hlo::HloOpcode opcode = hlo::HloOpcode::kParameter;  // kUnary, kBinary
  int args[3] = {-1, -1, -1};
  // kLoad: element (i_0..i_{r-1}) of the iteration space reads
  // input[offset + dynamic + sum_d i_d * strides[d]].
  int input = -1;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  std::vector<DynamicStart> dynamic;
  // Contiguous loads of this type are read in place (no copy into scratch).
  bool direct = false;
  // kIota, kIotaEq
  int64_t iota_dim = 0;
  hlo::PrimitiveType iota_type = hlo::PrimitiveType::kS32;
  bool negate = false;
  // kCompare: what `binary` compares (for the loop JIT).
  hlo::ComparisonDirection direction = hlo::ComparisonDirection::kEq;
  bool total_order = false;
  LoadKernel load = nullptr;
  UnaryKernel unary = nullptr;
  BinaryKernel binary = nullptr;
  TernaryKernel ternary = nullptr;
  // Filled by the builder: the node's value does not vary along the minor
  // dimension (evaluated for one element per block), and the kernels with
  // scalar operands used when some arguments are invariant and this node is
  // not (nullptr: no such variant; the invariant arguments are splatted).
  bool invariant = false;
  BinaryKernel binary_vs = nullptr;  // args[1] invariant
  BinaryKernel binary_sv = nullptr;  // args[0] invariant
  TernaryKernel ternary_vvs = nullptr;  // select: args[2] invariant
  TernaryKernel ternary_vsv = nullptr;  // select: args[1] invariant
  // An invariant value some kernel needs as a whole block (no scalar
  // variant): splatted after it is computed.
  bool splat = false;
  // Byte offset of the node's values in the per-thread scratch: a block of
  // kLoopBlock elements, or one element for invariant, unsplatted nodes.
  // Blocks are reused once the value is dead.
  int64_t scratch_offset = 0;
};

// One reduction of a reduce program.
struct LoopReduceOutput {
  int node = -1;  // the reduced values (-1 when a fused fold computes them)
  hlo::HloOpcode op = hlo::HloOpcode::kAdd;  // the reducer
  BinaryKernel combine = nullptr;
  int init_input = -1;  // program input holding the scalar init value
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;
  StoreKernel store = nullptr;
  // Blocks fold into kFoldLanes lanes started at the reducer's identity
  // (runtime/cpu/fold_kernels.h); nullptr: into a block-wide accumulator.
  FoldKernel fold = nullptr;
  // kFoldLanes copies of the identity (compute representation): the lanes'
  // starting value, copied with one memcpy per chunk.
  std::vector<uint8_t> identity_lanes;
  // The reduced value is a select or f32 product used only here: folded
  // from its operands `args` (nodes) without storing it.
  FoldSelectKernel fold_select = nullptr;
  FoldProductKernel fold_product = nullptr;
  int args[3] = {-1, -1, -1};
};

struct LoopProgram {
  hlo::Shape shape;  // iteration space
  std::vector<LoopNode> nodes;  // topological
  // External arrays read by kLoad nodes and dynamic starts: an instruction
  // whose value the executor supplies, or constant data (instruction ==
  // nullptr).
  std::vector<const hlo::HloInstruction*> inputs;
  std::vector<const hlo::Literal*> literals;  // parallel to inputs
  int64_t scratch_bytes = 0;  // per thread

  // Elementwise and update programs: the root node and how it is stored.
  int root = -1;
  hlo::PrimitiveType out_type = hlo::PrimitiveType::kF32;
  StoreKernel store = nullptr;
  StoreKernel stream_store = nullptr;  // for outputs far larger than caches
  int64_t output_bytes = 0;  // the whole output array (an update's result)
  // Inputs read with the identity map (same shape and type as the output):
  // candidates for writing the output in place.
  std::vector<int> identity_inputs;

  // Reduce programs: dims [num_kept_dims, rank) are reduced; one output per
  // root, in Step::roots order.
  bool reduce = false;
  int64_t num_kept_dims = 0;
  std::vector<LoopReduceOutput> reduce_outputs;

  // Update programs: the output is the dynamic-update-slice's whole array
  // (out_strides are its strides); the iteration space is the update.
  bool update = false;
  std::vector<int64_t> out_strides;
  std::vector<DynamicStart> out_starts;
  // The array the update writes into (operand 0): program input index, or
  // -1 when no node reads it.
  int update_base_input = -1;

  // The program compiled to machine code (runtime/emulator/loop_jit.h), or
  // nullptr: LoopExecution then interprets it.
  LoopItemFn jit = nullptr;
};

// Whether LoopExecution stores this program's output with non-temporal
// stores (an update of an array far larger than the caches).
bool UsesStreamingStores(const LoopProgram& program);

// One line per node ("n3 = binary(n1, n2*) [block]", * = scalar operand),
// for debugging and tests.
std::string LoopProgramToString(const LoopProgram& program);

// Which instructions a group may hold, and scalar reducers, are decided in
// hlo/analysis/loop_fusion.h (shared with the buffer planner); the builder
// must express them all.
using hlo::IsLoopFusible;
using hlo::MatchReducer;

// Builds the program computing `root` from `members` (which include root);
// operands outside `members` become loads. Instructions in `members` must be
// loop-fusible and, except mapping ops (broadcast, transpose, slice,
// reverse, dynamic-slice) and constants, have the root's dimensions.
absl::StatusOr<LoopProgram> BuildLoopProgram(
    const hlo::HloInstruction* root,
    const absl::flat_hash_set<const hlo::HloInstruction*>& members);

// Builds the program of reduce(root_program) over the trailing dims; the
// reduce must have one input, a reducer recognised by MatchReducer and
// dimensions forming a suffix {k..rank-1}.
absl::StatusOr<LoopProgram> BuildLoopReduceProgram(
    const hlo::HloInstruction* reduce,
    const absl::flat_hash_set<const hlo::HloInstruction*>& members);

// Several such reduces over the same input dimensions and reduce dimensions
// in one pass (outputs in `reduces` order).
absl::StatusOr<LoopProgram> BuildLoopMultiReduceProgram(
    absl::Span<const hlo::HloInstruction* const> reduces,
    const absl::flat_hash_set<const hlo::HloInstruction*>& members);

// A dynamic-update-slice whose update (a member) is computed by the loop and
// stored into the result (hlo::IsFusibleUpdate).
absl::StatusOr<LoopProgram> BuildLoopUpdateProgram(
    const hlo::HloInstruction* dus,
    const absl::flat_hash_set<const hlo::HloInstruction*>& members);

// Runs the program. `inputs[i]` is the data of program input i. `outputs`
// are the output arrays in storage representation: one for elementwise and
// update programs (an update writes only its slice: the rest of the array
// must already hold operand 0), one per reduce output. Work is split over
// `num_threads`; results do not depend on it.
void RunLoopProgram(const LoopProgram& program,
                    absl::Span<const void* const> inputs,
                    absl::Span<void* const> outputs, int num_threads);

struct Evaluator;

// One run of a program on given arrays (what RunLoopProgram does), which can
// also be done piecewise: in units of one element of the iteration space
// (elementwise programs) or one reduce output element, i.e. one segment of
// the kept dimensions (reduce programs). Any split into unit ranges gives
// bit-identical results: a segment is always reduced whole, in the same
// order. Used by row chains (runtime/emulator/row_chain.h).
// Whether an access with `strides` (per iteration dimension of `space`)
// from element `offset` of an array of rows * row_length elements touches,
// at row r of the first `row_dims` dimensions, only elements
// [r*row_length, (r+1)*row_length).
bool AccessesOwnRow(const hlo::Shape& space, int64_t row_dims, absl::Span<const int64_t> strides,
                    int64_t offset, int64_t row_length);

class LoopExecution {
 public:
  LoopExecution(const LoopProgram& program, absl::Span<const void* const> inputs,
                absl::Span<void* const> outputs);
  ~LoopExecution();
  LoopExecution(LoopExecution&&);

  // All units, over `num_threads`.
  void Run(int num_threads) const;
  // Units [begin, end) on the calling thread. An update program must be
  // in place (its output already holds the array it updates).
  void RunUnits(int64_t begin, int64_t end) const;

  // How this execution splits into `rows` independent rows, each run as
  // RunUnits(r * units, (r + 1) * units): returns the units per row, or 0
  // when the iteration space does not split so or some row would write
  // outside its own row of the output (row r of an output of rows * L
  // elements is [r*L, (r+1)*L); reduce outputs hold one element per row).
  // Sets own_row[i] for every input i: whether each of its loads reads, at
  // row r, only row r of its `input_elements[i]`-element array (dynamic
  // starts as this execution resolved them).
  int64_t SplitRows(int64_t rows, absl::Span<const int64_t> input_elements,
                    std::vector<bool>* own_row) const;
  // Iteration-space elements.
  int64_t elements() const { return p_.shape.num_elements(); }
  // An update that splits into `rows` rows (SplitRows) and writes, in each
  // row of its output, the columns [*begin, *end) (one contiguous run):
  // true and the run; false for other programs.
  bool UpdateRowSpan(int64_t rows, int64_t* begin, int64_t* end) const;
  bool is_elementwise() const { return !p_.reduce && !p_.update; }
  // Rows-outer tile loops (row_while.h): a compiled item's contiguous loads
  // of the inputs i with inputs[i] prefetch the bytes right after the
  // item's run in the same row, which the loop's next iteration reads for
  // this chunk of rows, while this iteration's later passes compute from
  // cache; loads of other inputs prefetch nothing new. The default, the run
  // kPrefetchRows rows ahead, serves loops that walk a tile's rows in turn.
  // Prefetching only changes timing, never values. Measured at the seed
  // shape (AMD EPYC with AVX-512, 2026-11-29, `tpuoff bench` medians of 7,
  // this build against the one before, three alternations): entropy_tiled
  // f32 0.142 / 0.155 / 0.159 s against 0.165 / 0.172 / 0.179 s, grpo_tiled
  // fwd_bwd f32 0.300 / 0.295 / 0.315 against 0.330 / 0.304 / 0.346 s; bf16
  // within noise (entropy 0.125 / 0.129 / 0.148 against 0.136 / 0.129 /
  // 0.132, grpo 0.289 / 0.298 / 0.302 against 0.308 / 0.294 / 0.306).
  void PrefetchNextRun(const std::vector<bool>& inputs);
  // Nodes of the loop body: the work per element, roughly.
  int64_t body_nodes() const { return static_cast<int64_t>(p_.nodes.size()); }

 private:
  void EvalStore(int64_t row, int64_t c0, int64_t n, uint8_t* scratch, int64_t* idx,
                 uint8_t** vals) const;
  void ReduceChunk(int64_t s, int64_t c, uint8_t* scratch, int64_t* idx, uint8_t** vals,
                   uint64_t* partial) const;
  void FinishSegment(int64_t s, const uint64_t* partials) const;
  // Where element (row, c0) of the output is stored.
  uint8_t* OutAt(int64_t row, int64_t c0, const int64_t* idx) const;
  // Compiled programs whose rows are one item each (batch_rows_), rows
  // [first, end) in one call: stored (elementwise / update programs) or
  // reduced, one segment per row.
  void StoreRows(int64_t first, int64_t end, int64_t* idx) const;
  void ReduceRows(int64_t first, int64_t end, uint8_t* scratch, int64_t* idx) const;
  // Each reduce output's slot for `segment` (this thread's array; a
  // compiled program stores consecutive segments' results after it).
  uint8_t** ResultSlots(int64_t segment) const;
  size_t ScratchBytes() const;

  const LoopProgram& p_;
  std::vector<void*> outputs_;
  std::unique_ptr<Evaluator> eval_;
  int64_t rows_ = 1, cols_ = 1, bpr_ = 1;  // iteration space as rows x minor dim
  // Elementwise / update programs.
  StoreKernel store_ = nullptr;
  bool uniform_ = false;  // every output element the same: a fill
  bool batch_rows_ = false;  // see StoreRows / ReduceRows
  int64_t out_row_step_ = 0;  // bytes from one output row to the next
  std::vector<int64_t> out_row_strides_;
  int64_t out_base_ = 0;
  // Reduce programs.
  int64_t segments_ = 1, seg_rows_ = 1, seg_items_ = 0, chunks_ = 0;
};

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_LOOP_PROGRAM_H_
