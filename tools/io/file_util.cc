#include "tools/io/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "runtime/device/device.h"

namespace tpuoff::tools {
namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  std::string msg = absl::StrCat(path, ": ", what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case ENOMEM:
      return absl::ResourceExhaustedError(msg);
    case EISDIR:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<RegularFile> RegularFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status s = ErrnoStatus(errno, "cannot examine", path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": is ", KindOf(st.st_mode), ", expected a regular file"));
  }
  return RegularFile(path, fd, static_cast<int64_t>(st.st_size));
}

RegularFile::RegularFile(RegularFile&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), size_(o.size_) {}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status RegularFile::ReadAt(int64_t offset, void* out, int64_t n) const {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, p, static_cast<size_t>(std::min<int64_t>(n, 1 << 30)),
                                static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoStatus(errno, "read failed", path_);
    }
    if (got == 0) {
      return absl::DataLossError(absl::StrCat(path_, ": the file became shorter while reading"));
    }
    p += got;
    offset += got;
    n -= got;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes) {
  auto too_large = [&](absl::string_view what) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path == "-" ? "<stdin>" : path, ": ", what, " more than the limit of ",
        runtime::HumanBytes(max_bytes), " for this input"));
  };
  if (path != "-") {
    ASSIGN_OR_RETURN(RegularFile f, RegularFile::Open(path));
    if (f.size() > max_bytes) return too_large("holds");
    std::string out(static_cast<size_t>(f.size()), '\0');
    RETURN_IF_ERROR(f.ReadAt(0, out.data(), f.size()));
    return out;
  }
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read failed", "<stdin>");
    }
    if (n == 0) break;
    if (static_cast<int64_t>(out.size()) + n > max_bytes) return too_large("sends");
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

absl::Status WriteToStdout(absl::string_view contents) {
  if (std::fwrite(contents.data(), 1, contents.size(), stdout) != contents.size() ||
      std::fflush(stdout) != 0) {
    return ErrnoStatus(errno, "write failed", "<stdout>");
  }
  return absl::OkStatus();
}

absl::Status CheckNotAnInput(absl::string_view flag, const std::string& out,
                             const std::vector<std::string>& inputs) {
  struct stat o;
  if (out == "-" || ::stat(out.c_str(), &o) != 0) return absl::OkStatus();
  for (const std::string& in : inputs) {
    struct stat i;
    if (in == "-" || ::stat(in.c_str(), &i) != 0) continue;
    if (i.st_dev == o.st_dev && i.st_ino == o.st_ino) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "=", out, ": is the input ", in,
                       " (the same file; an output never replaces an input): write it elsewhere"));
    }
  }
  return absl::OkStatus();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace tpuoff::tools
