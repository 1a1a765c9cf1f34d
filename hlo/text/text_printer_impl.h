// Internals of the HLO text printer shared by text_printer*.cc.
#ifndef TPUOFF_HLO_TEXT_TEXT_PRINTER_IMPL_H_
#define TPUOFF_HLO_TEXT_TEXT_PRINTER_IMPL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "hlo/ir/instruction.h"

namespace tpuoff::hlo::text_internal {

// text_printer.cc: `"escaped"`, `{1,2,3}`, `{devices=[2]0,1}`.
std::string QuotedText(absl::string_view s);
std::string BracedList(const std::vector<int64_t>& v);
std::string ShardingText(const HloSharding& s);

// text_printer_ops.cc: the attributes of fft, cholesky, triangular-solve,
// the batch-norm ops, rng*, get/set-dimension-size and domain (nothing for
// other opcodes), custom-call / fusion aliasing and origin=.
void AppendNumericOpAttributes(const HloInstruction& instr, std::vector<std::string>* out);
std::string OutputOperandAliasingString(const std::vector<OutputOperandAlias>& aliases);
std::string OriginalValueString(const OriginalValue& value, const Shape& shape);

}  // namespace tpuoff::hlo::text_internal

#endif  // TPUOFF_HLO_TEXT_TEXT_PRINTER_IMPL_H_
