// Writing what the user asked for without ever losing what they had: files
// (--out, --trace, --json) and output directories (--outputs) are prepared
// in hidden staging places and published all at once, only when everything
// is ready; a failure or a kill leaves the user's files as they were.
//
// Files. A path naming a device node or FIFO (/dev/null, /dev/stdout, a
// pipe) is written through, never replaced; a symlink is kept and its
// target written; anything else is replaced by a rename from a temp file
// beside the target (keeping an existing file's permission bits), or, when
// only the file itself is writable, rewritten in place.
//
// Directories. DIR must not exist, be empty, or (with `overwrite`) hold a
// previous tpuoff output and nothing else: manifest.json and the files it
// lists. The new contents are staged in a sibling .DIR.tpuoff-staging-*
// directory and published with one rename (an existing DIR is swapped for
// it atomically, then the old output is removed). When only DIR itself is
// writable, staging happens inside DIR and the files are moved in one by
// one, manifest.json last (DIR must be empty then).
//
// Staging places are locked (flock) while in use. One a killed run left
// behind is removed by the next write to the same place: only the hidden
// entries named for it, owned by this user, and not locked.
//
// Error messages name the user's path, never the staging path.
//
// Testing hook: TPUOFF_TEST_KILL_IN_COMMIT=k kills the process (SIGKILL)
// before the k-th rename of a directory commit, so tests can check that a
// kill at any point leaves the old output or the new one and that the next
// run cleans up.
#ifndef TPUOFF_TOOLS_IO_STAGED_OUTPUT_H_
#define TPUOFF_TOOLS_IO_STAGED_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tpuoff::tools {

// A file prepared for `path` and published by Commit(). Destroyed without
// Commit, it leaves nothing behind. "-" means stdout (written at Commit).
class StagedFile {
 public:
  static absl::StatusOr<StagedFile> Create(const std::string& path, absl::string_view contents);
  StagedFile(StagedFile&& other) noexcept;
  StagedFile& operator=(StagedFile&&) = delete;
  StagedFile(const StagedFile&) = delete;
  ~StagedFile();

  absl::Status Commit();

 private:
  enum class Mode { kStdout, kRename, kWriteThrough, kInPlace };
  StagedFile() = default;
  void Discard();

  Mode mode_ = Mode::kRename;
  std::string path_;    // what the user gave (for messages)
  std::string target_;  // the file written (a symlink's target)
  std::string temp_;    // kRename: the staged file
  int lock_fd_ = -1;    // kRename: open on temp_, flock'ed
  std::string contents_;  // kStdout, kWriteThrough, kInPlace: written at Commit
  bool committed_ = false;
};

// StagedFile::Create + Commit.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

struct StagedDirectoryOptions {
  // Replace a directory holding a previous tpuoff output (manifest.json and
  // the files it lists, nothing else).
  bool overwrite = false;
};

// Checks that `dir` can take a new output (see the file comment) without
// writing anything: run before a long computation, so it fails early.
absl::Status CheckOutputDirectory(const std::string& dir, const StagedDirectoryOptions& options);

class StagedDirectory {
 public:
  static absl::StatusOr<StagedDirectory> Create(const std::string& final_dir,
                                                const StagedDirectoryOptions& options = {});
  StagedDirectory(StagedDirectory&& other) noexcept;
  StagedDirectory& operator=(StagedDirectory&&) = delete;
  StagedDirectory(const StagedDirectory&) = delete;
  ~StagedDirectory();

  // Writes `name` (a plain file name, no '/') into the staging directory.
  absl::Status WriteFile(const std::string& name, absl::string_view contents);
  // Publishes everything written (manifest.json, if written, last).
  absl::Status Commit();

  const std::string& final_dir() const { return final_dir_; }

 private:
  StagedDirectory() = default;
  void Discard();

  std::string final_dir_;   // as given (messages)
  std::string target_dir_;  // the directory published (a symlink's target)
  std::string staging_;     // empty once committed or moved from
  bool inside_ = false;     // staging_ is inside target_dir_
  bool replace_ = false;    // target_dir_ holds a previous output
  int lock_fd_ = -1;        // open on staging_, flock'ed
  std::vector<std::string> names_;
};

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_STAGED_OUTPUT_H_
