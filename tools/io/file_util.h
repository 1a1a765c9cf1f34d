// File helpers for the CLI: bounded whole-file reads of regular files ("-"
// meaning stdin), errno-to-status mapping, and stdout. Writing outputs:
// tools/io/staged_output.h.
#ifndef TPUOFF_TOOLS_IO_FILE_UTIL_H_
#define TPUOFF_TOOLS_IO_FILE_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tpuoff::tools {

// "<path>: <what>: <strerror>" with the closest status code (NOT_FOUND,
// PERMISSION_DENIED, RESOURCE_EXHAUSTED for a full disk, ...).
absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path);

// Largest file ReadFile reads (a module, a .npy header): protobuf cannot
// parse more than 2 GiB anyway.
inline constexpr int64_t kMaxReadBytes = int64_t{2} << 30;

// An open regular file. Opening never blocks (a FIFO is rejected, not
// waited on) and never follows into anything but a regular file: FIFOs,
// devices (/dev/zero), sockets and directories are FAILED_PRECONDITION
// naming what the path is.
class RegularFile {
 public:
  static absl::StatusOr<RegularFile> Open(const std::string& path);
  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&&) = delete;
  RegularFile(const RegularFile&) = delete;
  ~RegularFile();

  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Reads exactly `n` bytes at `offset` (DATA_LOSS if the file is shorter
  // now than it was).
  absl::Status ReadAt(int64_t offset, void* out, int64_t n) const;

 private:
  RegularFile(std::string path, int fd, int64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// Reads a whole regular file (at most `max_bytes`, else RESOURCE_EXHAUSTED
// before reading); "-" reads stdin up to the same bound. NOT_FOUND /
// PERMISSION_DENIED / FAILED_PRECONDITION (not a regular file) name the path.
absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes = kMaxReadBytes);

// Writes all of `contents` to stdout and flushes it.
absl::Status WriteToStdout(absl::string_view contents);

// INVALID_ARGUMENT "<flag>=<out>: is the input <input> (the same file; an
// output never replaces an input)" when `out` and one of `inputs` name the
// same existing file (same device and inode: through symlinks and hard
// links too). Paths that do not exist (or "-") never match.
absl::Status CheckNotAnInput(absl::string_view flag, const std::string& out,
                             const std::vector<std::string>& inputs);

bool PathExists(const std::string& path);
bool IsDirectory(const std::string& path);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_FILE_UTIL_H_
