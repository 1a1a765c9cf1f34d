#include "tools/io/input_loader.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/instruction.h"
#include "tools/io/file_util.h"
#include "tools/io/npy.h"

namespace tpuoff::tools {

std::string ExpectedParametersText(const hlo::HloComputation& entry) {
  std::string out;
  for (const hlo::HloInstruction* p : entry.parameters()) {
    const hlo::Shape& s = p->shape();
    std::string accepted = s.IsArray() ? AcceptedNpyDtypes(s.element_type()) : "";
    absl::StrAppend(
        &out, "  ", p->name(), ".npy: ", s.ToString(),
        accepted.empty()
            ? " (cannot be read from .npy)"
            : absl::StrCat(" (.npy ", accepted, ", shape (",
                           absl::StrJoin(s.dimensions(), ", "),
                           s.rank() == 1 ? ",))" : "))"),
        "\n");
  }
  return out;
}

absl::StatusOr<std::vector<hlo::Literal>> LoadInputsFromDirectory(
    const hlo::HloComputation& entry, const std::string& dir) {
  if (!IsDirectory(dir)) {
    return absl::NotFoundError(absl::StrCat(
        "--inputs=", dir, ": not a directory; expected parameters:\n",
        ExpectedParametersText(entry)));
  }
  std::vector<hlo::Literal> args;
  std::vector<std::string> problems;
  for (const hlo::HloInstruction* p : entry.parameters()) {
    const std::string path = absl::StrCat(dir, "/", p->name(), ".npy");
    absl::StatusOr<hlo::Literal> lit = [&]() -> absl::StatusOr<hlo::Literal> {
      if (!PathExists(path)) {
        return absl::NotFoundError(absl::StrCat(path, ": missing"));
      }
      absl::StatusOr<NpyArray> array = ReadNpyFile(path);
      if (!array.ok()) return array.status();
      return NpyToLiteral(*array, p->shape(), path);
    }();
    if (!lit.ok()) {
      problems.push_back(std::string(lit.status().message()));
      continue;
    }
    args.push_back(*std::move(lit));
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        absl::StrJoin(problems, "\n"), "\nexpected parameters in ", dir,
        ":\n", ExpectedParametersText(entry)));
  }
  return args;
}

}  // namespace tpuoff::tools
