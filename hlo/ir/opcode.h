// Every opcode once: enum name, HLO text name, operand count (-1 = variadic),
// the fewest operands it takes (its count when fixed; for a variadic opcode
// the minimum its shape rule and every later reader may rely on) and kind.
// This table drives names, operand-count checks, printing and parsing.
#ifndef TPUOFF_HLO_IR_OPCODE_H_
#define TPUOFF_HLO_IR_OPCODE_H_

#include <optional>

#include "absl/strings/string_view.h"

namespace tpuoff::hlo {

// This is XLA's whole opcode list (xla/hlo/ir/hlo_opcode.h). Kinds:
// kUnary/kBinary are elementwise with same-typed operands; kOther is
// everything with its own shape rule. Which opcodes the emulator runs is
// decided by the executor; the others parse, verify, print and convert, and
// running them fails with an error naming the opcode.
#define TPUOFF_HLO_OPCODE_LIST(V)                                      \
  V(kParameter, "parameter", 0, 0, kOther)                             \
  V(kConstant, "constant", 0, 0, kOther)                               \
  V(kIota, "iota", 0, 0, kOther)                                       \
  V(kBroadcast, "broadcast", 1, 1, kOther)                             \
  V(kReshape, "reshape", 1, 1, kOther)                                 \
  V(kBitcast, "bitcast", 1, 1, kOther)                                 \
  V(kTranspose, "transpose", 1, 1, kOther)                             \
  V(kConvert, "convert", 1, 1, kOther)                                 \
  V(kBitcastConvert, "bitcast-convert", 1, 1, kOther)                  \
  V(kCopy, "copy", 1, 1, kOther)                                       \
  V(kReverse, "reverse", 1, 1, kOther)                                 \
  V(kSlice, "slice", 1, 1, kOther)                                     \
  V(kDynamicSlice, "dynamic-slice", -1, 1, kOther)                     \
  V(kDynamicUpdateSlice, "dynamic-update-slice", -1, 2, kOther)        \
  V(kConcatenate, "concatenate", -1, 1, kOther)                        \
  V(kPad, "pad", 2, 2, kOther)                                         \
  V(kNegate, "negate", 1, 1, kUnary)                                   \
  V(kAbs, "abs", 1, 1, kUnary)                                         \
  V(kExp, "exponential", 1, 1, kUnary)                                 \
  V(kExpm1, "exponential-minus-one", 1, 1, kUnary)                     \
  V(kLog, "log", 1, 1, kUnary)                                         \
  V(kLog1p, "log-plus-one", 1, 1, kUnary)                              \
  V(kSqrt, "sqrt", 1, 1, kUnary)                                       \
  V(kRsqrt, "rsqrt", 1, 1, kUnary)                                     \
  V(kCbrt, "cbrt", 1, 1, kUnary)                                       \
  V(kTanh, "tanh", 1, 1, kUnary)                                       \
  V(kLogistic, "logistic", 1, 1, kUnary)                               \
  V(kSine, "sine", 1, 1, kUnary)                                       \
  V(kCosine, "cosine", 1, 1, kUnary)                                   \
  V(kTan, "tan", 1, 1, kUnary)                                         \
  V(kAcos, "acos", 1, 1, kUnary)                                       \
  V(kAcosh, "acosh", 1, 1, kUnary)                                     \
  V(kAsin, "asin", 1, 1, kUnary)                                       \
  V(kAsinh, "asinh", 1, 1, kUnary)                                     \
  V(kAtan, "atan", 1, 1, kUnary)                                       \
  V(kAtanh, "atanh", 1, 1, kUnary)                                     \
  V(kCosh, "cosh", 1, 1, kUnary)                                       \
  V(kSinh, "sinh", 1, 1, kUnary)                                       \
  V(kErf, "erf", 1, 1, kUnary)                                         \
  V(kFloor, "floor", 1, 1, kUnary)                                     \
  V(kCeil, "ceil", 1, 1, kUnary)                                       \
  V(kRoundNearestAfz, "round-nearest-afz", 1, 1, kUnary)               \
  V(kRoundNearestEven, "round-nearest-even", 1, 1, kUnary)             \
  V(kSign, "sign", 1, 1, kUnary)                                       \
  V(kNot, "not", 1, 1, kUnary)                                         \
  V(kPopulationCount, "popcnt", 1, 1, kUnary)                          \
  V(kClz, "count-leading-zeros", 1, 1, kUnary)                         \
  V(kIsFinite, "is-finite", 1, 1, kOther)                              \
  V(kReal, "real", 1, 1, kOther)                                       \
  V(kImag, "imag", 1, 1, kOther)                                       \
  V(kReducePrecision, "reduce-precision", 1, 1, kOther)                \
  V(kAdd, "add", 2, 2, kBinary)                                        \
  V(kSubtract, "subtract", 2, 2, kBinary)                              \
  V(kMultiply, "multiply", 2, 2, kBinary)                              \
  V(kDivide, "divide", 2, 2, kBinary)                                  \
  V(kMaximum, "maximum", 2, 2, kBinary)                                \
  V(kMinimum, "minimum", 2, 2, kBinary)                                \
  V(kPower, "power", 2, 2, kBinary)                                    \
  V(kRemainder, "remainder", 2, 2, kBinary)                            \
  V(kAtan2, "atan2", 2, 2, kBinary)                                    \
  V(kAnd, "and", 2, 2, kBinary)                                        \
  V(kOr, "or", 2, 2, kBinary)                                          \
  V(kXor, "xor", 2, 2, kBinary)                                        \
  V(kShiftLeft, "shift-left", 2, 2, kBinary)                           \
  V(kShiftRightLogical, "shift-right-logical", 2, 2, kBinary)          \
  V(kShiftRightArithmetic, "shift-right-arithmetic", 2, 2, kBinary)    \
  V(kMulhi, "mulhi", 2, 2, kBinary)                                    \
  V(kComplex, "complex", 2, 2, kOther)                                 \
  V(kCompare, "compare", 2, 2, kOther)                                 \
  V(kSelect, "select", 3, 3, kOther)                                   \
  V(kClamp, "clamp", 3, 3, kOther)                                     \
  V(kReduce, "reduce", -1, 2, kOther)                                  \
  V(kReduceWindow, "reduce-window", -1, 2, kOther)                     \
  V(kSelectAndScatter, "select-and-scatter", 3, 3, kOther)             \
  V(kDot, "dot", 2, 2, kOther)                                         \
  V(kConvolution, "convolution", -1, 2, kOther)                        \
  V(kGather, "gather", 2, 2, kOther)                                   \
  V(kScatter, "scatter", -1, 3, kOther)                                \
  V(kSort, "sort", -1, 1, kOther)                                      \
  V(kTopK, "topk", 1, 1, kOther)                                       \
  V(kTuple, "tuple", -1, 0, kOther)                                    \
  V(kGetTupleElement, "get-tuple-element", 1, 1, kOther)               \
  V(kWhile, "while", 1, 1, kOther)                                     \
  V(kCall, "call", -1, 0, kOther)                                      \
  V(kConditional, "conditional", -1, 1, kOther)                        \
  V(kFusion, "fusion", -1, 0, kOther)                                  \
  V(kMap, "map", -1, 0, kOther)                                        \
  V(kOptimizationBarrier, "opt-barrier", 1, 1, kOther)                 \
  V(kAddDependency, "add-dependency", 2, 2, kOther)                    \
  V(kDomain, "domain", 1, 1, kOther)                                   \
  V(kPartitionId, "partition-id", 0, 0, kOther)                        \
  V(kReplicaId, "replica-id", 0, 0, kOther)                            \
  V(kAllReduce, "all-reduce", -1, 1, kOther)                           \
  V(kAllGather, "all-gather", -1, 1, kOther)                           \
  V(kReduceScatter, "reduce-scatter", -1, 1, kOther)                   \
  V(kCollectivePermute, "collective-permute", -1, 1, kOther)           \
  V(kAllToAll, "all-to-all", -1, 1, kOther)                            \
  V(kCollectiveBroadcast, "collective-broadcast", -1, 0, kOther)       \
  V(kRaggedAllToAll, "ragged-all-to-all", 6, 6, kOther)                \
  V(kCollectiveReduce, "collective-reduce", -1, 0, kOther)             \
  V(kAllGatherStart, "all-gather-start", -1, 0, kOther)                \
  V(kAllGatherDone, "all-gather-done", 1, 1, kOther)                   \
  V(kAllReduceStart, "all-reduce-start", -1, 0, kOther)                \
  V(kAllReduceDone, "all-reduce-done", 1, 1, kOther)                   \
  V(kCollectivePermuteStart, "collective-permute-start", -1, 0, kOther) \
  V(kCollectivePermuteDone, "collective-permute-done", 1, 1, kOther)   \
  V(kAsyncStart, "async-start", -1, 0, kOther)                         \
  V(kAsyncUpdate, "async-update", -1, 0, kOther)                       \
  V(kAsyncDone, "async-done", 1, 1, kOther)                            \
  V(kCopyStart, "copy-start", 1, 1, kOther)                            \
  V(kCopyDone, "copy-done", 1, 1, kOther)                              \
  V(kSend, "send", 2, 2, kOther)                                       \
  V(kSendDone, "send-done", 1, 1, kOther)                              \
  V(kRecv, "recv", 1, 1, kOther)                                       \
  V(kRecvDone, "recv-done", 1, 1, kOther)                              \
  V(kInfeed, "infeed", 1, 1, kOther)                                   \
  V(kOutfeed, "outfeed", 2, 2, kOther)                                 \
  V(kAfterAll, "after-all", -1, 0, kOther)                             \
  V(kCustomCall, "custom-call", -1, 0, kOther)                         \
  V(kFft, "fft", 1, 1, kOther)                                         \
  V(kCholesky, "cholesky", 1, 1, kOther)                               \
  V(kTriangularSolve, "triangular-solve", 2, 2, kOther)                \
  V(kBatchNormTraining, "batch-norm-training", 3, 3, kOther)           \
  V(kBatchNormInference, "batch-norm-inference", 5, 5, kOther)         \
  V(kBatchNormGrad, "batch-norm-grad", 5, 5, kOther)                   \
  V(kRng, "rng", -1, 2, kOther)                                        \
  V(kRngBitGenerator, "rng-bit-generator", 1, 1, kOther)               \
  V(kRngGetAndUpdateState, "rng-get-and-update-state", 0, 0, kOther)   \
  V(kStochasticConvert, "stochastic-convert", 2, 2, kOther)            \
  V(kGetDimensionSize, "get-dimension-size", 1, 1, kOther)             \
  V(kSetDimensionSize, "set-dimension-size", 2, 2, kOther)             \
  V(kDynamicReshape, "dynamic-reshape", -1, 0, kOther)                 \
  V(kRaggedDot, "ragged-dot", 3, 3, kOther)                            \
  V(kScaledDot, "scaled-dot", 4, 4, kOther)                            \
  V(kScan, "scan", -1, 0, kOther)                                      \
  V(kShuffle, "shuffle", 1, 1, kOther)

enum class HloOpcode : int {
#define TPUOFF_DECLARE_OPCODE(enum_name, text, arity, min_operands, kind) enum_name,
  TPUOFF_HLO_OPCODE_LIST(TPUOFF_DECLARE_OPCODE)
#undef TPUOFF_DECLARE_OPCODE
};

enum class OpcodeKind { kUnary, kBinary, kOther };

inline constexpr int kVariadic = -1;

absl::string_view HloOpcodeString(HloOpcode opcode);
std::optional<HloOpcode> StringToHloOpcode(absl::string_view name);
int OpcodeArity(HloOpcode opcode);  // kVariadic when variadic
int OpcodeMinOperands(HloOpcode opcode);  // the arity when fixed
OpcodeKind GetOpcodeKind(HloOpcode opcode);
inline bool IsElementwiseUnary(HloOpcode op) {
  return GetOpcodeKind(op) == OpcodeKind::kUnary;
}
inline bool IsElementwiseBinary(HloOpcode op) {
  return GetOpcodeKind(op) == OpcodeKind::kBinary;
}
bool IsCollective(HloOpcode opcode);
// async-start, async-update, async-done.
inline bool IsAsyncOpcode(HloOpcode op) {
  return op == HloOpcode::kAsyncStart || op == HloOpcode::kAsyncUpdate ||
         op == HloOpcode::kAsyncDone;
}
int NumOpcodes();

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_OPCODE_H_
