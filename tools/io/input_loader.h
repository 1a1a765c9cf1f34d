// Reads a module's arguments from a directory of .npy files, one per entry
// parameter, named after the parameter the way tools/io/file_names.h maps
// names to files (a parameter named "../secret" reads DIR/_.._secret.npy,
// never a path outside DIR). Only regular files are read, each checked
// against its header and the parameter's shape before its data is.
#ifndef TPUOFF_TOOLS_IO_INPUT_LOADER_H_
#define TPUOFF_TOOLS_IO_INPUT_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/literal.h"

namespace tpuoff::tools {

// The file each parameter of `entry` is read from ("<stem>.npy").
std::vector<std::string> InputFileNames(const hlo::HloComputation& entry);

// "  logits.npy: f32[2,16,8] (.npy float32 or float64, shape (2, 16, 8))"
// lines, one per parameter of `entry` (naming the parameter too when its
// file name differs), each ending in '\n'.
std::string ExpectedParametersText(const hlo::HloComputation& entry);

// Loads DIR/<name>.npy for every parameter. On failure the error message
// lists every problem found (missing file, wrong shape, unsupported dtype),
// then "expected parameters:" and ExpectedParametersText(), over several
// lines.
absl::StatusOr<std::vector<hlo::Literal>> LoadInputsFromDirectory(
    const hlo::HloComputation& entry, const std::string& dir);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_INPUT_LOADER_H_
