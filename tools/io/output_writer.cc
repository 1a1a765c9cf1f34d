#include "tools/io/output_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hlo/ir/float16.h"
#include "hlo/ir/status_macros.h"
#include "tools/io/file_names.h"
#include "tools/io/json_text.h"
#include "tools/io/staged_output.h"
#include "tools/io/npy.h"

namespace tpuoff::tools {
namespace {

// numpy's name for the dtype a literal is written as.
std::string NpyDtypeNameFor(hlo::PrimitiveType t, const NpyWriteOptions& o) {
  switch (t) {
    case hlo::PrimitiveType::kPred:
      return "bool";
    case hlo::PrimitiveType::kBF16:
      return o.bf16_as_float32 ? "float32" : "bfloat16";
    case hlo::PrimitiveType::kF16:
      return "float16";
    case hlo::PrimitiveType::kF32:
      return "float32";
    case hlo::PrimitiveType::kF64:
      return "float64";
    default:
      return absl::StrCat(hlo::IsSignedInteger(t) ? "int" : "uint",
                          8 * hlo::ByteWidth(t));
  }
}

}  // namespace

std::vector<std::string> OutputNames(const hlo::HloModule& module,
                                     int64_t num_outputs) {
  std::vector<std::string> names = module.OutputNames();
  if (static_cast<int64_t>(names.size()) != num_outputs) {
    names.clear();
    for (int64_t i = 0; i < num_outputs; ++i) {
      names.push_back(absl::StrCat("output_", i));
    }
  }
  return UniqueFileStems(names, {"manifest"});
}

absl::Status WriteOutputs(const std::string& dir, absl::Span<const NamedOutput> outputs,
                          const NpyWriteOptions& npy, const StagedDirectoryOptions& options) {
  ASSIGN_OR_RETURN(StagedDirectory staged, StageOutputs(dir, outputs, npy, options));
  return staged.Commit();
}

absl::StatusOr<StagedDirectory> StageOutputs(const std::string& dir,
                                             absl::Span<const NamedOutput> outputs,
                                             const NpyWriteOptions& npy,
                                             const StagedDirectoryOptions& options) {
  ASSIGN_OR_RETURN(StagedDirectory staged, StagedDirectory::Create(dir, options));
  std::vector<nlohmann::ordered_json> entries;
  for (const NamedOutput& out : outputs) {
    const hlo::Shape& shape = out.literal->shape();
    ASSIGN_OR_RETURN(std::string bytes, LiteralToNpy(*out.literal, npy));
    const std::string file = absl::StrCat(out.name, ".npy");
    RETURN_IF_ERROR(staged.WriteFile(file, bytes));
    nlohmann::ordered_json entry = {
        {"name", out.name},
        {"file", file},
        {"shape", shape.dimensions()},
        {"dtype", NpyDtypeNameFor(shape.element_type(), npy)},
        {"hlo_type", hlo::PrimitiveTypeName(shape.element_type())}};
    if (out.device >= 0) entry["device"] = out.device;
    entries.push_back(std::move(entry));
  }
  // One output per line.
  const std::string manifest =
      JsonRecords(nlohmann::ordered_json::object(), "outputs", entries);
  RETURN_IF_ERROR(staged.WriteFile("manifest.json", manifest));
  return staged;
}

}  // namespace tpuoff::tools
