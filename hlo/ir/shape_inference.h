// Shape rules for every opcode. Used by the builder (to compute result
// shapes) and by the verifier (to check declared shapes).
#ifndef TPUOFF_HLO_IR_SHAPE_INFERENCE_H_
#define TPUOFF_HLO_IR_SHAPE_INFERENCE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/attributes.h"
#include "hlo/ir/opcode.h"
#include "hlo/ir/shape.h"

namespace tpuoff::hlo {

class HloComputation;

// Infers the result shape of `opcode` applied to `operands`. Some opcodes
// cannot be inferred from their operands alone (parameter, constant, iota,
// broadcast, reshape, convert, custom-call, all-gather without groups, ...):
// for those `declared` supplies the missing facts and is checked for
// consistency. Layouts are ignored; the result has the row-major layout.
absl::StatusOr<Shape> InferShape(HloOpcode opcode,
                                 absl::Span<const Shape* const> operands,
                                 const HloAttributes& attrs,
                                 absl::Span<HloComputation* const> called,
                                 const Shape* declared);

// Number of devices per replica group, or 0 when `groups` is empty.
int64_t ReplicaGroupSize(const ReplicaGroups& groups);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_SHAPE_INFERENCE_H_
