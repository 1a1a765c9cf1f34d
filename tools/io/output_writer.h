// Naming, checksumming (tools/io/checksum.h) and writing a run's outputs: one .npy per result leaf
// plus manifest.json, published atomically through a StagedDirectory.
#ifndef TPUOFF_TOOLS_IO_OUTPUT_WRITER_H_
#define TPUOFF_TOOLS_IO_OUTPUT_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "hlo/ir/literal.h"
#include "tools/io/npy.h"
#include "hlo/ir/module.h"
#include "tools/io/checksum.h"
#include "tools/io/staged_output.h"

namespace tpuoff::tools {

// Names for `num_outputs` result leaves: the module's output_names frontend
// attribute when it has exactly that many entries, else output_<i>. Names
// are made file-safe and unique (tools/io/file_names.h).
std::vector<std::string> OutputNames(const hlo::HloModule& module,
                                     int64_t num_outputs);


struct NamedOutput {
  std::string name;  // file stem
  const hlo::Literal* literal;
  int64_t device = -1;  // >= 0 for SPMD runs (recorded in the manifest)
};

// Writes <dir>/<name>.npy for every output and <dir>/manifest.json last
// ({"outputs": [{"name", "file", "shape", "dtype", "hlo_type", "device"?}]}).
// Either everything is published or nothing is, and nothing the user had
// is lost (tools/io/staged_output.h: `dir` must be new, empty, or with
// options.overwrite a previous output).
// `npy` chooses how the arrays are written (tools/io/npy.h).
absl::Status WriteOutputs(const std::string& dir, absl::Span<const NamedOutput> outputs,
                          const NpyWriteOptions& npy = {},
                          const StagedDirectoryOptions& options = {});
// The same, staged but not yet published: Commit() the result.
absl::StatusOr<StagedDirectory> StageOutputs(const std::string& dir,
                                             absl::Span<const NamedOutput> outputs,
                                             const NpyWriteOptions& npy = {},
                                             const StagedDirectoryOptions& options = {});

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_OUTPUT_WRITER_H_
