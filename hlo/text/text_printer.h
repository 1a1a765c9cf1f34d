// Prints modules in XLA's HLO text syntax (what XLA's parser accepts).
// Constants are always printed in full (never `{...}`); floating-point values
// use the fewest digits that parse back to the same bits (inf, -inf, nan,
// nan(0x...) for NaN payloads, -0.0). For a verified module,
// ParseHloText(PrintModule(m)) rebuilds it (up to values XLA treats as
// defaults and does not print) and printing that gives the same text.
#ifndef TPUOFF_HLO_TEXT_TEXT_PRINTER_H_
#define TPUOFF_HLO_TEXT_TEXT_PRINTER_H_

#include <string>

#include "hlo/ir/module.h"

namespace tpuoff::hlo {

struct PrintOptions {
  // Print layouts on every shape ({1,0}), as XLA does by default.
  bool print_layouts = true;
  // Print operand shapes inside operand lists: add(f32[2]{0} %a, ...).
  bool print_operand_shapes = true;
  // Prefix names with '%'.
  bool print_percent = true;
  // Print metadata={...} and frontend_attributes on instructions.
  bool print_metadata = true;
};

std::string PrintModule(const HloModule& module, const PrintOptions& options = {});
std::string PrintComputation(const HloComputation& computation,
                             const PrintOptions& options = {});
std::string PrintInstruction(const HloInstruction& instruction,
                             const PrintOptions& options = {});

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_TEXT_TEXT_PRINTER_H_
