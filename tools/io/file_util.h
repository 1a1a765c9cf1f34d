// File helpers for the CLI: whole-file reads, atomic writes (never leave a
// partial file behind), "-" meaning stdin/stdout, and a staged output
// directory whose contents appear all at once.
#ifndef TPUOFF_TOOLS_IO_FILE_UTIL_H_
#define TPUOFF_TOOLS_IO_FILE_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tpuoff::tools {

// Reads a whole file; "-" reads stdin. NOT_FOUND / PERMISSION_DENIED /
// FAILED_PRECONDITION (a directory) name the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes `contents` to a temp file in the destination's directory, fsyncs it
// and renames it over `path`. On any failure the temp file is removed and
// `path` is untouched. "-" writes to stdout instead.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

// Writes all of `contents` to stdout and flushes it.
absl::Status WriteToStdout(absl::string_view contents);

bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);

// An output directory built in a hidden sibling temp directory and published
// by Commit(): if `final_dir` does not exist the temp directory is renamed to
// it (all files appear at once); if it exists, each file is renamed into it,
// in the order written (write the manifest last). If the object is destroyed
// without a successful Commit(), the temp directory and anything moved so far
// are removed.
class StagedDirectory {
 public:
  static absl::StatusOr<StagedDirectory> Create(const std::string& final_dir);
  StagedDirectory(StagedDirectory&& other) noexcept;
  StagedDirectory& operator=(StagedDirectory&&) = delete;
  StagedDirectory(const StagedDirectory&) = delete;
  ~StagedDirectory();

  // Writes `name` (a plain file name, no '/') into the temp directory.
  absl::Status WriteFile(const std::string& name, absl::string_view contents);
  absl::Status Commit();

  const std::string& final_dir() const { return final_dir_; }

 private:
  StagedDirectory(std::string final_dir, std::string temp_dir)
      : final_dir_(std::move(final_dir)), temp_dir_(std::move(temp_dir)) {}
  void Cleanup();

  std::string final_dir_;
  std::string temp_dir_;  // empty once committed or moved from
  std::vector<std::string> names_;
};

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_FILE_UTIL_H_
