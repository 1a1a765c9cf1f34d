#include "tools/io/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tpuoff::tools {
namespace {

absl::Status ErrnoStatus(int err, absl::string_view what,
                         absl::string_view path) {
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
      return absl::ResourceExhaustedError(msg);
    case EISDIR:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The umask, read without changing it for the rest of the process.
mode_t CurrentUmask() {
  mode_t mask = umask(0);
  umask(mask);
  return mask;
}

absl::Status WriteAll(int fd, absl::string_view contents,
                      absl::string_view path) {
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write failed", path);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Removes a directory and the plain files in it (our temp dirs hold no
// subdirectories).
void RemoveFlatDirectory(const std::string& dir,
                         const std::vector<std::string>& names) {
  for (const std::string& n : names) ::unlink((dir + "/" + n).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = path == "-" ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    if (fd != STDIN_FILENO) ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": is a directory, expected a file"));
  }
  std::string out;
  if (S_ISREG(st.st_mode) && st.st_size > 0) out.reserve(st.st_size);
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = ErrnoStatus(errno, "read failed", path);
      if (fd != STDIN_FILENO) ::close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  if (fd != STDIN_FILENO) ::close(fd);
  return out;
}

absl::Status WriteToStdout(absl::string_view contents) {
  if (std::fwrite(contents.data(), 1, contents.size(), stdout) !=
          contents.size() ||
      std::fflush(stdout) != 0) {
    return ErrnoStatus(errno, "write failed", "<stdout>");
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents) {
  if (path == "-") return WriteToStdout(contents);
  if (path.empty() || path.back() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': output path must name a file"));
  }
  if (IsDirectory(path)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": is a directory, expected a file"));
  }
  std::string tmpl =
      absl::StrCat(DirName(path), "/.", BaseName(path), ".tmp-XXXXXX");
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return ErrnoStatus(errno, "cannot create a temp file beside it", path);
  absl::Status status = WriteAll(fd, contents, path);
  if (status.ok() && ::fchmod(fd, 0666 & ~CurrentUmask()) != 0) {
    status = ErrnoStatus(errno, "chmod failed", tmpl);
  }
  if (status.ok() && ::fsync(fd) != 0) {
    status = ErrnoStatus(errno, "fsync failed", path);
  }
  if (::close(fd) != 0 && status.ok()) {
    status = ErrnoStatus(errno, "close failed", path);
  }
  if (status.ok() && ::rename(tmpl.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, "rename failed", path);
  }
  if (!status.ok()) ::unlink(tmpl.c_str());
  return status;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<StagedDirectory> StagedDirectory::Create(
    const std::string& final_dir) {
  std::string dir = final_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) {
    return absl::InvalidArgumentError("output directory name is empty");
  }
  if (PathExists(dir) && !IsDirectory(dir)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": exists and is not a directory"));
  }
  std::string parent = DirName(dir);
  if (!IsDirectory(parent)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": parent directory ", parent, " does not exist"));
  }
  std::string tmpl = absl::StrCat(parent, "/.", BaseName(dir), ".tmp-XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return ErrnoStatus(errno, "cannot create temp directory", tmpl);
  }
  if (::chmod(tmpl.c_str(), 0777 & ~CurrentUmask()) != 0) {
    absl::Status s = ErrnoStatus(errno, "chmod failed", tmpl);
    ::rmdir(tmpl.c_str());
    return s;
  }
  return StagedDirectory(dir, tmpl);
}

StagedDirectory::StagedDirectory(StagedDirectory&& other) noexcept
    : final_dir_(std::move(other.final_dir_)),
      temp_dir_(std::exchange(other.temp_dir_, "")),
      names_(std::move(other.names_)) {}

StagedDirectory::~StagedDirectory() { Cleanup(); }

void StagedDirectory::Cleanup() {
  if (temp_dir_.empty()) return;
  RemoveFlatDirectory(temp_dir_, names_);
  temp_dir_.clear();
}

absl::Status StagedDirectory::WriteFile(const std::string& name,
                                        absl::string_view contents) {
  if (temp_dir_.empty()) {
    return absl::FailedPreconditionError("staged directory already committed");
  }
  if (name.empty() || name.find('/') != std::string::npos || name == "." ||
      name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a plain file name"));
  }
  for (const std::string& n : names_) {
    if (n == name) {
      return absl::AlreadyExistsError(
          absl::StrCat(final_dir_, "/", name, ": written twice"));
    }
  }
  std::string path = absl::StrCat(temp_dir_, "/", name);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", path);
  names_.push_back(name);  // registered first so cleanup removes it
  absl::Status status = WriteAll(fd, contents, path);
  if (status.ok() && ::fsync(fd) != 0) {
    status = ErrnoStatus(errno, "fsync failed", path);
  }
  if (::close(fd) != 0 && status.ok()) {
    status = ErrnoStatus(errno, "close failed", path);
  }
  return status;
}

absl::Status StagedDirectory::Commit() {
  if (temp_dir_.empty()) {
    return absl::FailedPreconditionError("staged directory already committed");
  }
  if (!PathExists(final_dir_)) {
    if (::rename(temp_dir_.c_str(), final_dir_.c_str()) != 0) {
      absl::Status s = ErrnoStatus(errno, "rename failed", final_dir_);
      Cleanup();
      return s;
    }
    temp_dir_.clear();
    return absl::OkStatus();
  }
  // The directory exists (maybe created by the user): move files in one by
  // one; on failure take back the ones already moved.
  for (size_t i = 0; i < names_.size(); ++i) {
    std::string from = absl::StrCat(temp_dir_, "/", names_[i]);
    std::string to = absl::StrCat(final_dir_, "/", names_[i]);
    if (::rename(from.c_str(), to.c_str()) != 0) {
      absl::Status s = ErrnoStatus(errno, "rename failed", to);
      for (size_t j = 0; j < i; ++j) {
        ::unlink(absl::StrCat(final_dir_, "/", names_[j]).c_str());
      }
      Cleanup();
      return s;
    }
  }
  ::rmdir(temp_dir_.c_str());
  temp_dir_.clear();
  return absl::OkStatus();
}

}  // namespace tpuoff::tools
