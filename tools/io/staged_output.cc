#include "tools/io/staged_output.h"

#include <dirent.h>
#include <signal.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <functional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hlo/ir/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/io/file_util.h"

namespace tpuoff::tools {
namespace {

constexpr char kFileTag[] = ".tpuoff-tmp-";
constexpr char kStagingTag[] = ".tpuoff-staging-";
constexpr char kOldTag[] = ".tpuoff-old-";
constexpr char kJournal[] = ".journal";
constexpr char kManifest[] = "manifest.json";

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

std::string Join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

mode_t CurrentUmask() {
  mode_t mask = umask(0);
  umask(mask);
  return mask;
}

absl::Status WriteAll(int fd, absl::string_view contents, absl::string_view path) {
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

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "a regular file";
}

bool NoPermission(int err) { return err == EACCES || err == EPERM || err == EROFS; }

// Locks `fd` exclusively for as long as it stays open; false if another
// process holds it.
bool TryLock(int fd) { return ::flock(fd, LOCK_EX | LOCK_NB) == 0; }

// Whether a file of a staging or old-output directory is one tpuoff writes
// there: an output array, the manifest, the staging journal.
bool WrittenByTpuoff(const std::string& n) {
  return absl::EndsWith(n, ".npy") || n == "manifest.json" || n == kJournal;
}

// Removes the regular files in the directory open as `fd`, then the
// directory `name` in `parent_fd`. Leaves it whole (and reports false) when
// it holds anything else, a file tpuoff does not write included (a user's
// directory that merely has a staging name): this only ever removes what
// tpuoff put there.
bool RemoveFlatDirectory(int parent_fd, const std::string& name, int fd) {
  int dup_fd = ::dup(fd);
  if (dup_fd < 0) return false;
  DIR* d = ::fdopendir(dup_fd);
  if (d == nullptr) {
    ::close(dup_fd);
    return false;
  }
  bool only_files = true;
  std::vector<std::string> files;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    struct stat st;
    if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        WrittenByTpuoff(n)) {
      files.push_back(n);
    } else {
      only_files = false;
    }
  }
  ::closedir(d);
  if (!only_files) return false;
  for (const std::string& n : files) ::unlinkat(fd, n.c_str(), 0);
  return only_files && ::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) == 0;
}

// Calls `stale(parent_fd, name, fd)` for every entry of `dir` named
// `prefix`*, owned by this user, of the wanted kind (directory or regular
// file, never a symlink), that nobody holds locked: staging places a
// killed run left behind.
void ForEachStale(const std::string& dir, const std::string& prefix, bool directories,
                  const std::function<void(int, const std::string&, int)>& stale) {
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return;
  const int list_fd = ::dup(dir_fd);
  DIR* d = list_fd >= 0 ? ::fdopendir(list_fd) : nullptr;
  if (d == nullptr) {
    if (list_fd >= 0) ::close(list_fd);
    ::close(dir_fd);
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (absl::StartsWith(e->d_name, prefix)) names.push_back(e->d_name);
  }
  ::closedir(d);
  for (const std::string& n : names) {
    struct stat st;
    if (::fstatat(dir_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != ::getuid() ||
        (directories ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) {
      continue;
    }
    const int fd = ::openat(dir_fd, n.c_str(),
                            O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (directories ? O_DIRECTORY : 0));
    if (fd < 0) continue;
    if (TryLock(fd)) stale(dir_fd, n, fd);
    ::close(fd);
  }
  ::close(dir_fd);
}

void RemoveStaleFiles(const std::string& dir, const std::string& prefix) {
  ForEachStale(dir, prefix, false,
               [](int parent_fd, const std::string& name, int) {
                 ::unlinkat(parent_fd, name.c_str(), 0);
               });
}

// Largest manifest or journal read back (a manifest takes ~100 bytes per
// output: 64 MiB is over half a million outputs).
constexpr size_t kMaxSmallFile = size_t{64} << 20;

// Reads a small file relative to `dir_fd`; empty on failure. `too_big`
// (when given) says it was larger than kMaxSmallFile (and is not returned).
std::string ReadSmallAt(int dir_fd, const char* name, bool* too_big = nullptr) {
  if (too_big != nullptr) *too_big = false;
  const int fd = ::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) {
    out.append(buf, n);
    if (out.size() > kMaxSmallFile) {
      if (too_big != nullptr) *too_big = true;
      out.clear();
      break;
    }
  }
  ::close(fd);
  return out;
}

// Where a path leads: the file to replace, or a node to write through.
struct Target {
  std::string path;  // the file itself (symlinks resolved)
  bool exists = false;
  bool write_through = false;  // a device, FIFO or /proc magic link
  mode_t mode = 0;
};

absl::StatusOr<Target> ResolveTarget(const std::string& user_path) {
  Target t;
  std::string cur = user_path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(cur.c_str(), &st) != 0) {
      if (errno != ENOENT) return ErrnoStatus(errno, "cannot examine", user_path);
      t.path = cur;
      return t;
    }
    if (S_ISLNK(st.st_mode)) {
      // /dev/stdout, /dev/fd/N and /proc/self/fd/N lead to whatever the
      // descriptor is (a terminal, a pipe, a file the shell opened): write
      // to it as it is.
      if (absl::StartsWith(cur, "/proc/") || absl::StartsWith(cur, "/dev/fd/")) {
        t.write_through = true;
        return t;
      }
      char buf[PATH_MAX];
      const ssize_t n = ::readlink(cur.c_str(), buf, sizeof(buf) - 1);
      if (n < 0) return ErrnoStatus(errno, "cannot read the symlink", user_path);
      const std::string link(buf, static_cast<size_t>(n));
      cur = !link.empty() && link[0] == '/' ? link : Join(DirName(cur), link);
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(user_path, ": is a directory, expected a file"));
    }
    t.path = cur;
    t.exists = true;
    t.mode = st.st_mode;
    t.write_through = !S_ISREG(st.st_mode);
    return t;
  }
  return absl::FailedPreconditionError(absl::StrCat(user_path, ": too many levels of symlinks"));
}

}  // namespace

// ---- StagedFile ------------------------------------------------------------

absl::StatusOr<StagedFile> StagedFile::Create(const std::string& path,
                                              absl::string_view contents) {
  StagedFile f;
  f.path_ = path;
  if (path == "-") {
    f.mode_ = Mode::kStdout;
    f.contents_ = std::string(contents);
    return f;
  }
  if (path.empty() || path.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': output path must name a file"));
  }
  ASSIGN_OR_RETURN(Target t, ResolveTarget(path));
  if (t.write_through) {
    f.mode_ = Mode::kWriteThrough;
    f.contents_ = std::string(contents);
    return f;
  }
  f.target_ = t.path;
  const std::string dir = DirName(t.path);
  const std::string base = BaseName(t.path);
  struct stat dst;
  if (::stat(dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat(path, ": the directory ", dir, " does not exist"));
  }
  const std::string prefix = absl::StrCat(".", base, kFileTag);
  RemoveStaleFiles(dir, prefix);
  std::string tmpl = Join(dir, prefix + "XXXXXX");
  const int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (NoPermission(err) && t.exists && ::access(t.path.c_str(), W_OK) == 0) {
      // Only the file itself is writable: rewrite it in place at Commit.
      f.mode_ = Mode::kInPlace;
      f.contents_ = std::string(contents);
      return f;
    }
    return ErrnoStatus(err, absl::StrCat("cannot write a file in ", dir), path);
  }
  TryLock(fd);  // ours: a concurrent cleaner leaves it alone
  f.temp_ = tmpl;
  f.lock_fd_ = fd;
  absl::Status status = WriteAll(fd, contents, path);
  const mode_t mode = t.exists ? (t.mode & 07777) : (0666 & ~CurrentUmask());
  if (status.ok() && ::fchmod(fd, mode) != 0) status = ErrnoStatus(errno, "chmod failed", path);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoStatus(errno, "fsync failed", path);
  if (!status.ok()) return status;  // the destructor removes the temp file
  return f;
}

StagedFile::StagedFile(StagedFile&& o) noexcept
    : mode_(o.mode_), path_(std::move(o.path_)), target_(std::move(o.target_)),
      temp_(std::exchange(o.temp_, "")), lock_fd_(std::exchange(o.lock_fd_, -1)),
      contents_(std::move(o.contents_)), committed_(std::exchange(o.committed_, true)) {}

StagedFile::~StagedFile() { Discard(); }

void StagedFile::Discard() {
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

absl::Status StagedFile::Commit() {
  if (committed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": already written"));
  committed_ = true;
  switch (mode_) {
    case Mode::kStdout:
      return WriteToStdout(contents_);
    case Mode::kWriteThrough:
    case Mode::kInPlace: {
      // Devices and pipes are written as they are (no O_TRUNC: a FIFO or
      // terminal has nothing to truncate, and a shell's `>>` must append).
      const int flags = mode_ == Mode::kInPlace ? O_WRONLY | O_TRUNC | O_CLOEXEC
                                                : O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY;
      const int fd = ::open(mode_ == Mode::kInPlace ? target_.c_str() : path_.c_str(), flags);
      if (fd < 0) return ErrnoStatus(errno, "cannot open for writing", path_);
      absl::Status s = WriteAll(fd, contents_, path_);
      if (::close(fd) != 0 && s.ok() && errno != EINVAL) s = ErrnoStatus(errno, "close failed", path_);
      return s;
    }
    case Mode::kRename:
      break;
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    absl::Status s = ErrnoStatus(errno, "cannot replace", path_);
    Discard();
    return s;
  }
  temp_.clear();
  Discard();
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  ASSIGN_OR_RETURN(StagedFile f, StagedFile::Create(path, contents));
  return f.Commit();
}

// ---- StagedDirectory -------------------------------------------------------

namespace {

// The files a previous tpuoff output in `dir` consists of (manifest.json
// and the files it lists), or an error saying why `dir` is not one.
absl::StatusOr<std::vector<std::string>> PreviousOutputFiles(const std::string& user_dir,
                                                              const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", user_dir);
  bool too_big = false;
  const std::string manifest = ReadSmallAt(fd, kManifest, &too_big);
  ::close(fd);
  auto not_output = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        user_dir, ": --overwrite replaces only a previous tpuoff output (manifest.json and the "
                  "files it lists, nothing else), but ", why));
  };
  if (too_big) {
    return not_output(absl::StrCat("its manifest.json is larger than ", kMaxSmallFile >> 20,
                                   " MiB, more than tpuoff reads back"));
  }
  if (manifest.empty()) return not_output("it has no manifest.json");
  std::set<std::string> listed = {kManifest};
  nlohmann::json j = nlohmann::json::parse(manifest, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("outputs") || !j["outputs"].is_array()) {
    return not_output("its manifest.json is not one tpuoff wrote");
  }
  for (const nlohmann::json& o : j["outputs"]) {
    if (!o.is_object() || !o.contains("file") || !o["file"].is_string()) {
      return not_output("its manifest.json is not one tpuoff wrote");
    }
    const std::string file = o["file"].get<std::string>();
    // tpuoff writes <name>.npy files only: a manifest listing anything else
    // (a user's notes.txt) was not written by tpuoff, and what it lists is
    // not deleted.
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == ".." ||
        !absl::EndsWith(file, ".npy") || file == ".npy") {
      return not_output(absl::StrCat("its manifest.json lists '", file, "'"));
    }
    listed.insert(file);
  }
  std::vector<std::string> files;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus(errno, "cannot list", user_dir);
  std::string extra;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == ".." || absl::StartsWith(n, kStagingTag)) continue;
    struct stat st;
    const bool regular =
        ::lstat(Join(dir, n).c_str(), &st) == 0 && S_ISREG(st.st_mode);
    if (!listed.count(n) || !regular) {
      if (extra.empty()) extra = n;
    } else {
      files.push_back(n);
    }
  }
  ::closedir(d);
  if (!extra.empty()) return not_output(absl::StrCat("it also holds '", extra, "'"));
  return files;
}

// Entries of `dir` other than our own hidden staging directories.
absl::StatusOr<std::vector<std::string>> Entries(const std::string& user_dir,
                                                 const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus(errno, "cannot list", user_dir);
  std::vector<std::string> out;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != ".." && !absl::StartsWith(n, kStagingTag)) out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

struct DirectoryPlan {
  std::string target;  // symlinks resolved
  bool exists = false;
  bool replace = false;  // holds a previous output (overwrite)
  std::string parent;
};

void RemoveStale(const DirectoryPlan& p);

absl::StatusOr<DirectoryPlan> PlanDirectory(const std::string& user_dir,
                                            const StagedDirectoryOptions& options) {
  DirectoryPlan p;
  std::string dir = user_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) return absl::InvalidArgumentError("output directory name is empty");
  struct stat st;
  if (::lstat(dir.c_str(), &st) == 0) {
    // An existing path is resolved ("." or "a/.." get their real parent; a
    // symlink stays, the directory it points to is what gets written).
    char* real = ::realpath(dir.c_str(), nullptr);
    if (real == nullptr) {
      return ErrnoStatus(errno, S_ISLNK(st.st_mode) ? "is a symlink that leads nowhere"
                                                    : "cannot resolve",
                         user_dir);
    }
    dir = real;
    std::free(real);
  }
  p.target = dir;
  p.parent = DirName(dir);
  // What killed runs left goes first: their files are not the user's.
  RemoveStale(p);
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(user_dir, ": exists and is ", FileKind(st.st_mode), ", not a directory"));
    }
    p.exists = true;
    ASSIGN_OR_RETURN(std::vector<std::string> entries, Entries(user_dir, dir));
    if (!entries.empty()) {
      if (!options.overwrite) {
        std::vector<std::string> shown(entries.begin(),
                                       entries.begin() + std::min<size_t>(entries.size(), 3));
        return absl::FailedPreconditionError(absl::StrCat(
            user_dir, ": is not empty (it holds ", absl::StrJoin(shown, ", "),
            entries.size() > 3 ? ", ..." : "",
            "); nothing was written. Give an empty or new directory, or --overwrite to replace "
            "a previous tpuoff output there"));
      }
      RETURN_IF_ERROR(PreviousOutputFiles(user_dir, dir).status());
      p.replace = true;
    }
  } else if (errno != ENOENT) {
    return ErrnoStatus(errno, "cannot examine", user_dir);
  }
  if (::stat(p.parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat(user_dir, ": parent directory ", p.parent, " does not exist"));
  }
  return p;
}

// Cleans what killed runs left for `target`: sibling staging directories,
// sibling old outputs of an interrupted swap (put back when the target is
// missing), and staging directories inside it (with the files their
// journal says were already moved in).
void RemoveStale(const DirectoryPlan& p) {
  const std::string base = BaseName(p.target);
  ForEachStale(p.parent, absl::StrCat(".", base, kStagingTag), true,
               [](int parent_fd, const std::string& name, int fd) {
                 RemoveFlatDirectory(parent_fd, name, fd);
               });
  ForEachStale(p.parent, absl::StrCat(".", base, kOldTag), true,
               [&](int parent_fd, const std::string& name, int fd) {
                 struct stat st;
                 if (::stat(p.target.c_str(), &st) != 0 && errno == ENOENT) {
                   ::renameat(parent_fd, name.c_str(), AT_FDCWD, p.target.c_str());
                 } else {
                   RemoveFlatDirectory(parent_fd, name, fd);
                 }
               });
  ForEachStale(p.target, kStagingTag, true, [&](int parent_fd, const std::string& name, int fd) {
    const std::string journal = ReadSmallAt(fd, kJournal);
    for (absl::string_view n : absl::StrSplit(journal, '\n', absl::SkipEmpty())) {
      const std::string file(n);
      struct stat st;
      if (file.find('/') != std::string::npos) continue;
      // Moved in by the killed run: gone from its staging directory.
      if (::fstatat(fd, file.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 &&
          ::fstatat(parent_fd, file.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
        ::unlinkat(parent_fd, file.c_str(), 0);
      }
    }
    RemoveFlatDirectory(parent_fd, name, fd);
  });
}

}  // namespace

absl::Status CheckOutputDirectory(const std::string& dir, const StagedDirectoryOptions& options) {
  ASSIGN_OR_RETURN(DirectoryPlan p, PlanDirectory(dir, options));
  if (::access(p.parent.c_str(), W_OK | X_OK) == 0) return absl::OkStatus();
  if (p.exists && !p.replace && ::access(p.target.c_str(), W_OK | X_OK) == 0) {
    return absl::OkStatus();  // staged inside it
  }
  return ErrnoStatus(EACCES,
                     p.exists ? "cannot replace it (its parent directory is not writable)"
                              : "cannot create it (its parent directory is not writable)",
                     dir);
}

absl::StatusOr<StagedDirectory> StagedDirectory::Create(const std::string& final_dir,
                                                        const StagedDirectoryOptions& options) {
  ASSIGN_OR_RETURN(DirectoryPlan p, PlanDirectory(final_dir, options));
  StagedDirectory s;
  s.final_dir_ = final_dir;
  s.target_dir_ = p.target;
  s.replace_ = p.replace;
  std::string tmpl = Join(p.parent, absl::StrCat(".", BaseName(p.target), kStagingTag, "XXXXXX"));
  if (::mkdtemp(tmpl.data()) == nullptr) {
    const int err = errno;
    if (!NoPermission(err) || !p.exists || p.replace) {
      return ErrnoStatus(err,
                         p.exists ? "cannot replace it (its parent directory is not writable)"
                                  : "cannot create it",
                         final_dir);
    }
    // Only the (empty) directory itself is writable: stage inside it.
    tmpl = Join(p.target, absl::StrCat(kStagingTag, "XXXXXX"));
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return ErrnoStatus(errno, "cannot write into it", final_dir);
    }
    s.inside_ = true;
  }
  s.staging_ = tmpl;
  s.lock_fd_ = ::open(tmpl.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (s.lock_fd_ >= 0) TryLock(s.lock_fd_);
  if (::chmod(tmpl.c_str(), 0777 & ~CurrentUmask()) != 0) {
    return ErrnoStatus(errno, "cannot prepare it", final_dir);  // destructor cleans up
  }
  return s;
}

StagedDirectory::StagedDirectory(StagedDirectory&& o) noexcept
    : final_dir_(std::move(o.final_dir_)), target_dir_(std::move(o.target_dir_)),
      staging_(std::exchange(o.staging_, "")), inside_(o.inside_), replace_(o.replace_),
      lock_fd_(std::exchange(o.lock_fd_, -1)), names_(std::move(o.names_)) {}

StagedDirectory::~StagedDirectory() { Discard(); }

void StagedDirectory::Discard() {
  if (!staging_.empty()) {
    for (const std::string& n : names_) ::unlink(Join(staging_, n).c_str());
    ::unlink(Join(staging_, kJournal).c_str());
    ::rmdir(staging_.c_str());
    staging_.clear();
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

absl::Status StagedDirectory::WriteFile(const std::string& name, absl::string_view contents) {
  if (staging_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(final_dir_, ": already written"));
  }
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." ||
      name == kJournal) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a plain file name"));
  }
  const std::string shown = Join(final_dir_, name);  // messages: the user's path
  if (std::find(names_.begin(), names_.end(), name) != names_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(shown, ": written twice"));
  }
  const std::string path = Join(staging_, name);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", shown);
  names_.push_back(name);  // registered first so cleanup removes it
  absl::Status status = WriteAll(fd, contents, shown);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoStatus(errno, "fsync failed", shown);
  if (::close(fd) != 0 && status.ok()) status = ErrnoStatus(errno, "close failed", shown);
  return status;
}

namespace {

// Testing hook for the kill -9 tests (tests/cli/robustness_outputs.sh):
// TPUOFF_TEST_KILL_IN_COMMIT=k sends this process SIGKILL right before the
// k-th rename of a directory commit (1 = before the first).
void MaybeKillForTest(int rename_index) {
  static const int k = [] {
    const char* v = std::getenv("TPUOFF_TEST_KILL_IN_COMMIT");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  if (k > 0 && rename_index == k) ::kill(::getpid(), SIGKILL);
}

}  // namespace

absl::Status StagedDirectory::Commit() {
  if (staging_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(final_dir_, ": already written"));
  }
  // manifest.json last: with files moved one by one it marks completeness.
  std::stable_partition(names_.begin(), names_.end(),
                        [](const std::string& n) { return n != kManifest; });
  if (inside_) {
    // The journal lets a later run take back what a killed commit moved.
    {
      const std::string journal = Join(staging_, kJournal);
      const int fd = ::open(journal.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0) return ErrnoStatus(errno, "cannot write into it", final_dir_);
      absl::Status s = WriteAll(fd, absl::StrJoin(names_, "\n"), final_dir_);
      if (s.ok() && ::fsync(fd) != 0) s = ErrnoStatus(errno, "fsync failed", final_dir_);
      ::close(fd);
      RETURN_IF_ERROR(s);
    }
    for (size_t i = 0; i < names_.size(); ++i) {
      const std::string from = Join(staging_, names_[i]);
      const std::string to = Join(target_dir_, names_[i]);
      MaybeKillForTest(static_cast<int>(i) + 1);
      if (::syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(),
                    RENAME_NOREPLACE) != 0) {
        absl::Status s = ErrnoStatus(errno, "cannot move into place", Join(final_dir_, names_[i]));
        for (size_t j = 0; j < i; ++j) ::unlink(Join(target_dir_, names_[j]).c_str());
        Discard();
        return s;
      }
    }
    names_.clear();
    Discard();
    return absl::OkStatus();
  }
  if (!replace_) {
    // New (or empty) directory: one rename publishes every file at once.
    MaybeKillForTest(1);
    if (::rename(staging_.c_str(), target_dir_.c_str()) != 0) {
      const int err = errno;
      absl::Status s = err == ENOTEMPTY || err == EEXIST
                           ? absl::FailedPreconditionError(absl::StrCat(
                                 final_dir_, ": another process wrote into it meanwhile"))
                           : ErrnoStatus(err, "cannot create it", final_dir_);
      Discard();
      return s;
    }
    staging_.clear();
    Discard();
    return absl::OkStatus();
  }
  // A previous output: swap the directories atomically, then remove the
  // old files (now in the staging place).
  ASSIGN_OR_RETURN(std::vector<std::string> old_files,
                   PreviousOutputFiles(final_dir_, target_dir_));
  std::string old_place = staging_;
  MaybeKillForTest(1);
  if (::syscall(SYS_renameat2, AT_FDCWD, staging_.c_str(), AT_FDCWD, target_dir_.c_str(),
                RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) {
      absl::Status s = ErrnoStatus(errno, "cannot replace it", final_dir_);
      Discard();
      return s;
    }
    // No atomic exchange on this file system: move the old output aside
    // (a later run puts it back if we die before the next rename).
    old_place = Join(DirName(target_dir_),
                     absl::StrCat(".", BaseName(target_dir_), kOldTag, ::getpid()));
    if (::rename(target_dir_.c_str(), old_place.c_str()) != 0) {
      absl::Status s = ErrnoStatus(errno, "cannot replace it", final_dir_);
      Discard();
      return s;
    }
    MaybeKillForTest(2);
    if (::rename(staging_.c_str(), target_dir_.c_str()) != 0) {
      absl::Status s = ErrnoStatus(errno, "cannot replace it", final_dir_);
      ::rename(old_place.c_str(), target_dir_.c_str());
      Discard();
      return s;
    }
  }
  MaybeKillForTest(3);  // after the swap, before the old output is removed
  for (const std::string& n : old_files) ::unlink(Join(old_place, n).c_str());
  ::rmdir(old_place.c_str());
  staging_.clear();
  Discard();
  return absl::OkStatus();
}

}  // namespace tpuoff::tools
