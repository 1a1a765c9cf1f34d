// Shape rules of the opcodes added for XLA's full opcode list (convolution,
// sort, topk, select-and-scatter, reduce-precision, add-dependency) and of
// those whose result shape is taken as declared. InferShape delegates here.
#ifndef TPUOFF_HLO_IR_SHAPE_INFERENCE_EXTRA_H_
#define TPUOFF_HLO_IR_SHAPE_INFERENCE_EXTRA_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/attributes.h"
#include "hlo/ir/opcode.h"
#include "hlo/ir/shape.h"

namespace tpuoff::hlo {

class HloComputation;

// Opcodes whose result shape is the declared one (not inferred).
bool TakesDeclaredShape(HloOpcode op);

// fft, cholesky, triangular-solve, batch-norm-*, rng*, get-dimension-size,
// domain (shape_inference_numeric.cc).
bool HasNumericShapeRule(HloOpcode op);
absl::StatusOr<Shape> InferShapeNumeric(HloOpcode op, absl::Span<const Shape* const> operands,
                                        const HloAttributes& attrs, const Shape* declared);

absl::StatusOr<Shape> InferShapeExtra(HloOpcode op, absl::Span<const Shape* const> operands,
                                      const HloAttributes& attrs,
                                      absl::Span<HloComputation* const> called,
                                      const Shape* declared);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_SHAPE_INFERENCE_EXTRA_H_
