// Loading and saving whole HLO modules in the three formats the CLI speaks:
// HLO text, binary HloModuleProto and its protobuf JSON mapping.
#ifndef TPUOFF_TOOLS_IO_MODULE_IO_H_
#define TPUOFF_TOOLS_IO_MODULE_IO_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/module.h"

namespace tpuoff::tools {

enum class ModuleFormat { kAuto, kText, kProto, kJson };

// "auto", "text", "proto", "json" <-> enum.
absl::StatusOr<ModuleFormat> ModuleFormatFromName(absl::string_view name);
absl::string_view ModuleFormatName(ModuleFormat format);

// Guesses the format of `bytes`: JSON when the first non-blank byte is '{';
// text when the leading bytes are printable text (the text parser then
// reports a precise error if it is not HLO); binary proto otherwise.
ModuleFormat DetectModuleFormat(absl::string_view bytes);

// Parses `bytes` in `format` (kAuto: detected) and verifies the module.
// `filename` appears in error messages ("FILE:LINE:COL: ..." for text).
absl::StatusOr<std::unique_ptr<hlo::HloModule>> ParseModuleBytes(
    absl::string_view bytes, absl::string_view filename,
    ModuleFormat format = ModuleFormat::kAuto);

// ReadFile ("-" = stdin) + ParseModuleBytes.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> LoadModuleFile(
    const std::string& path, ModuleFormat format = ModuleFormat::kAuto);

// For `run` and `memory`: a global SPMD program (hlo::IsGlobalProgram) is
// rewritten by hlo::LowerGlobalProgram, async start/done pairs become their
// synchronous ops (hlo::LowerAsyncPairs), calls are inlined
// (hlo::InlineCalls), and the module is re-verified. Errors name the file.
absl::Status PrepareForExecution(hlo::HloModule* module, absl::string_view filename);

// The module in `format` (kText, kProto or kJson).
absl::StatusOr<std::string> SerializeModule(const hlo::HloModule& module,
                                            ModuleFormat format);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_MODULE_IO_H_
