#include "tools/io/input_loader.h"

#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/instruction.h"
#include "tools/io/file_names.h"
#include "tools/io/file_util.h"
#include "tools/io/npy.h"

namespace tpuoff::tools {

std::vector<std::string> InputFileNames(const hlo::HloComputation& entry) {
  std::vector<std::string> names;
  for (const hlo::HloInstruction* p : entry.parameters()) {
    names.push_back(p != nullptr ? p->name() : "");
  }
  std::vector<std::string> files = UniqueFileStems(names);
  for (std::string& f : files) f += ".npy";
  return files;
}

std::string ExpectedParametersText(const hlo::HloComputation& entry) {
  std::string out;
  const std::vector<std::string> files = InputFileNames(entry);
  for (size_t i = 0; i < entry.parameters().size(); ++i) {
    const hlo::HloInstruction* p = entry.parameters()[i];
    if (p == nullptr) continue;
    const hlo::Shape& s = p->shape();
    if (s.IsToken()) {
      absl::StrAppend(&out, "  ", p->name(), ": token[] (no file: a token carries no data)\n");
      continue;
    }
    std::string accepted = s.IsArray() ? AcceptedNpyDtypes(s.element_type()) : "";
    absl::StrAppend(
        &out, "  ", files[i],
        files[i] == p->name() + ".npy" ? "" : absl::StrCat(" (parameter ", p->name(), ")"),
        ": ", s.ToString(),
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
  const std::vector<std::string> files = InputFileNames(entry);
  std::vector<hlo::Literal> args;
  std::vector<std::string> problems;
  for (size_t i = 0; i < entry.parameters().size(); ++i) {
    const hlo::HloInstruction* p = entry.parameters()[i];
    if (p->shape().IsToken()) {  // ordering only (jax's ordered effects): no file
      args.emplace_back(p->shape());
      continue;
    }
    // A plain file name inside `dir`: a parameter name never becomes a path.
    const std::string path = absl::StrCat(dir, "/", files[i]);
    absl::StatusOr<hlo::Literal> lit = [&]() -> absl::StatusOr<hlo::Literal> {
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) {
        // Missing, or there but unreachable (a symlink loop, no permission).
        if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": missing"));
        return ErrnoStatus(errno, "cannot open", path);
      }
      return ReadNpyAsLiteral(path, p->shape());
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
