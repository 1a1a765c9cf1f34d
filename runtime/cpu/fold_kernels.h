// Folding blocks of values into a few accumulator lanes, for the streaming
// reductions of fused loops (runtime/emulator/loop_program.h): lane l accumulates
// elements l, l + kFoldLanes, l + 2 kFoldLanes, ... of each block, in order,
// starting from the reducer's identity. One read per element and the lanes
// stay in registers, where folding into a block-wide accumulator would read
// and write it for every element. The order is fixed, so results do not
// depend on how blocks are split across threads.
#ifndef TPUOFF_RUNTIME_CPU_FOLD_KERNELS_H_
#define TPUOFF_RUNTIME_CPU_FOLD_KERNELS_H_

#include <cstdint>

#include "hlo/ir/opcode.h"
#include "hlo/ir/primitive_type.h"

namespace tpuoff::runtime {

inline constexpr int kFoldLanes = 64;

// acc: kFoldLanes values in compute representation (8-byte slots are
// enough for every type); vals: n values.
using FoldKernel = void (*)(void* acc, const void* vals, int64_t n);

// The fold of reducer op (add, multiply, maximum, minimum, and, or, xor)
// over `type`, or nullptr when there is none.
FoldKernel GetFoldKernel(hlo::HloOpcode op, hlo::PrimitiveType type);

// Folds that also evaluate the reduced value, so it is never stored (bit for
// bit what storing it and folding would give):
//  - select: value i = pred[i] ? a[i] : b[0] (pred 0/1 bytes, b one element);
//  - product (f32 add only): value i = a[i] * b[i], rounded before the add
//    (never contracted into a fused multiply-add).
using FoldSelectKernel = void (*)(void* acc, const void* pred, const void* a, const void* b,
                                  int64_t n);
using FoldProductKernel = void (*)(void* acc, const void* a, const void* b, int64_t n);
FoldSelectKernel GetFoldSelectKernel(hlo::HloOpcode op, hlo::PrimitiveType type);
FoldProductKernel GetFoldProductKernel(hlo::HloOpcode op, hlo::PrimitiveType type);

// Writes op's identity over `type` (compute representation) to `out`:
// -0 for float add (x + -0 == x for every x, +0 included), 0 for integer
// add, or and xor, 1 for multiply, -inf / lowest for maximum, +inf /
// highest for minimum, all ones for and. False when op has none.
bool ReducerIdentity(hlo::HloOpcode op, hlo::PrimitiveType type, void* out);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_CPU_FOLD_KERNELS_H_
