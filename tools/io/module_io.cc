#include "tools/io/module_io.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hlo/proto/proto_io.h"
#include "hlo/analysis/async_lowering.h"
#include "hlo/analysis/call_inliner.h"
#include "hlo/spmd/global_program.h"
#include "hlo/ir/status_macros.h"
#include "hlo/text/text_parser.h"
#include "hlo/text/text_printer.h"
#include "hlo/ir/verifier.h"
#include "tools/io/file_util.h"

namespace tpuoff::tools {
namespace {

// Prefixes `filename` unless the message already names it (the text parser
// reports FILE:LINE:COL itself).
absl::Status WithFilename(const absl::Status& status,
                          absl::string_view filename) {
  if (status.ok() || absl::StartsWith(status.message(), filename)) {
    return status;
  }
  return absl::Status(status.code(),
                      absl::StrCat(filename, ": ", status.message()));
}

}  // namespace

absl::StatusOr<ModuleFormat> ModuleFormatFromName(absl::string_view name) {
  if (name == "auto") return ModuleFormat::kAuto;
  if (name == "text") return ModuleFormat::kText;
  if (name == "proto") return ModuleFormat::kProto;
  if (name == "json") return ModuleFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown module format '", name, "' (expected auto|text|proto|json)"));
}

absl::string_view ModuleFormatName(ModuleFormat format) {
  switch (format) {
    case ModuleFormat::kAuto:
      return "auto";
    case ModuleFormat::kText:
      return "text";
    case ModuleFormat::kProto:
      return "proto";
    case ModuleFormat::kJson:
      return "json";
  }
  return "?";
}

ModuleFormat DetectModuleFormat(absl::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size() && absl::ascii_isspace(bytes[i])) ++i;
  if (i < bytes.size() && bytes[i] == '{') return ModuleFormat::kJson;
  // A serialized HloModuleProto starts with a field tag (e.g. 0x0a for the
  // name) and soon holds length bytes below 0x20; HLO text never has control
  // characters other than whitespace.
  const size_t probe = std::min<size_t>(bytes.size(), 4096);
  for (size_t j = 0; j < probe; ++j) {
    const unsigned char c = static_cast<unsigned char>(bytes[j]);
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f') {
      return ModuleFormat::kProto;
    }
    if (c == 0x7f) return ModuleFormat::kProto;
  }
  return ModuleFormat::kText;
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> ParseModuleBytes(
    absl::string_view bytes, absl::string_view filename, ModuleFormat format) {
  if (format == ModuleFormat::kAuto) format = DetectModuleFormat(bytes);
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module;
  switch (format) {
    case ModuleFormat::kText:
      module = hlo::ParseHloText(bytes, filename);
      break;
    case ModuleFormat::kProto:
      module = hlo::ModuleFromProtoBytes(bytes);
      break;
    case ModuleFormat::kJson:
      module = hlo::ModuleFromProtoJson(bytes);
      break;
    case ModuleFormat::kAuto:
      break;
  }
  if (!module.ok()) {
    return WithFilename(
        absl::Status(module.status().code(),
                     format == ModuleFormat::kText
                         ? std::string(module.status().message())
                         : absl::StrCat("reading as ", ModuleFormatName(format),
                                        ": ", module.status().message())),
        filename);
  }
  if (absl::Status s = hlo::VerifyModule(**module); !s.ok()) {
    return WithFilename(
        absl::Status(s.code(), absl::StrCat("verification failed: ", s.message())),
        filename);
  }
  return module;
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> LoadModuleFile(
    const std::string& path, ModuleFormat format) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  if (bytes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": file is empty"));
  }
  return ParseModuleBytes(bytes, path == "-" ? "<stdin>" : path, format);
}

absl::StatusOr<std::string> SerializeModule(const hlo::HloModule& module,
                                            ModuleFormat format) {
  if (absl::Status s = hlo::VerifyReadable(module); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat(s.message(), " (the HLO readers' limit): not written, as it could not ",
                               "be read back; `tpuoff memory` and `tpuoff cost` analyse a kernel ",
                               "this large from its flags, without a file"));
  }
  switch (format) {
    case ModuleFormat::kText:
      return hlo::PrintModule(module);
    case ModuleFormat::kProto:
      return hlo::ModuleToProtoBytes(module);
    case ModuleFormat::kJson:
      return hlo::ModuleToProtoJson(module);
    case ModuleFormat::kAuto:
      break;
  }
  return absl::InvalidArgumentError("SerializeModule needs a concrete format");
}

absl::Status PrepareForExecution(hlo::HloModule* module, absl::string_view filename) {
  absl::Status s;
  bool changed = false;
  if (hlo::IsGlobalProgram(*module)) {
    s = hlo::LowerGlobalProgram(module);
    changed = true;
  }
  if (s.ok()) changed |= hlo::LowerAsyncPairs(module) > 0;
  if (s.ok()) changed |= hlo::InlineCalls(module) > 0;
  if (s.ok() && changed) s = hlo::VerifyModule(*module);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(filename, ": running the global program: ",
                                               s.message()));
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::tools
