#include "runtime/pjrt/isolated.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tpuoff::runtime::pjrt {
namespace {

constexpr uint8_t kResult = 0;
constexpr uint8_t kError = 1;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string SignalText(int sig) {
  const char* name = sigabbrev_np(sig);
  return absl::StrCat("signal ", sig, name != nullptr ? absl::StrCat(", SIG", name) : "");
}

}  // namespace

absl::Status ChildWriter::WriteRaw(const void* data, int64_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, static_cast<size_t>(std::min<int64_t>(n, 1 << 20)));
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("writing to the parent: ", std::strerror(errno)));
    }
    p += w;
    n -= w;
  }
  return absl::OkStatus();
}

absl::Status ChildWriter::Write(const void* data, int64_t n) {
  if (!started_) {
    started_ = true;
    if (absl::Status s = WriteRaw(&kResult, 1); !s.ok()) return s;
  }
  return WriteRaw(data, n);
}

absl::Status ChildWriter::WriteString(absl::string_view s) {
  if (absl::Status st = WriteU64(s.size()); !st.ok()) return st;
  return Write(s);
}

absl::Status ChildReader::Ended() {
  if (!killed_) {
    ::kill(pid_, SIGKILL);
    killed_ = true;
  }
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL) {
    return absl::InternalError(absl::StrCat(
        options_->what, ": the plugin crashed (", SignalText(WTERMSIG(status)),
        "); its own message, if it printed one, is above"));
  }
  if (WIFSIGNALED(status)) {
    return absl::InternalError(absl::StrCat(options_->what, ": the process running the plugin "
                                                            "was killed (SIGKILL: out of memory?)"));
  }
  return absl::InternalError(absl::StrCat(options_->what,
                                          ": the process running the plugin ended (exit ",
                                          WEXITSTATUS(status), ") without a result"));
}

absl::Status ChildReader::Read(void* data, int64_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (options_->cancel != nullptr && options_->cancel->load(std::memory_order_relaxed)) {
      ::kill(pid_, SIGKILL);
      killed_ = true;
      (void)Ended();
      return absl::CancelledError(absl::StrCat(options_->what, ": cancelled"));
    }
    if (options_->timeout_seconds > 0 && Now() - start_ > options_->timeout_seconds) {
      ::kill(pid_, SIGKILL);
      killed_ = true;
      (void)Ended();
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s: exceeded the time limit of %g s (the plugin's process was killed)",
          options_->what, options_->timeout_seconds));
    }
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, 50);
    if (ready < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
    }
    if (ready <= 0) continue;
    const ssize_t r = ::read(fd_, p, static_cast<size_t>(std::min<int64_t>(n, 1 << 20)));
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::InternalError(absl::StrCat("reading from the plugin's process: ",
                                              std::strerror(errno)));
    }
    if (r == 0) {
      killed_ = true;  // it is gone already: no kill
      return Ended();
    }
    p += r;
    n -= r;
  }
  return absl::OkStatus();
}

absl::Status ChildReader::ReadString(std::string* s, uint64_t max_bytes) {
  uint64_t n = 0;
  if (absl::Status st = ReadU64(&n); !st.ok()) return st;
  if (n > max_bytes) {
    return absl::InternalError(absl::StrCat(options_->what, ": a malformed reply (", n,
                                            " bytes announced)"));
  }
  s->resize(n);
  return Read(s->data(), static_cast<int64_t>(n));
}

absl::Status RunIsolated(const IsolationOptions& options,
                         const std::function<absl::Status(ChildWriter&)>& child,
                         const std::function<absl::Status(ChildReader&)>& parent) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t parent_pid = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::ResourceExhaustedError(
        absl::StrCat(options.what, ": cannot start a process for the plugin: ",
                     std::strerror(err)));
  }
  if (pid == 0) {
    // The plugin's process dies with tpuoff, however tpuoff ends (Ctrl-C,
    // SIGTERM, SIGKILL): an endless program left behind would spin forever,
    // since tpuoff is what enforces --timeout. (Set after the fork: check
    // the parent did not die before it took effect.)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent_pid) ::_exit(1);
    ::close(fds[0]);
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(SIGPIPE, SIG_IGN);
    // The caller's crash handlers (a sanitizer's, Python's faulthandler)
    // would report or turn the plugin's signal into another: the child dies
    // of the signal itself, which the parent names.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP}) ::signal(sig, SIG_DFL);
    ChildWriter w(fds[1]);
    absl::Status s;
    try {
      s = child(w);
    } catch (...) {  // never unwinds into the caller's code in this process
      s = absl::InternalError(absl::StrCat(options.what, ": an exception in the plugin's process"));
    }
    if (!s.ok()) {
      if (w.started_) ::_exit(1);
      const uint64_t code = static_cast<uint64_t>(s.code());
      const std::string message(s.message());
      const uint64_t size = message.size();
      if (!w.WriteRaw(&kError, 1).ok() || !w.WriteRaw(&code, 8).ok() ||
          !w.WriteRaw(&size, 8).ok() || !w.WriteRaw(message.data(), size).ok()) {
        ::_exit(1);
      }
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildReader reader(fds[0], pid, &options, Now());
  absl::Status result = [&]() -> absl::Status {
    uint8_t tag = 0;
    if (absl::Status s = reader.Read(&tag, 1); !s.ok()) return s;
    if (tag == kError) {
      uint64_t code = 0;
      std::string message;
      if (absl::Status s = reader.ReadU64(&code); !s.ok()) return s;
      if (absl::Status s = reader.ReadString(&message, 1 << 24); !s.ok()) return s;
      return absl::Status(static_cast<absl::StatusCode>(code), message);
    }
    if (tag != kResult) {
      return absl::InternalError(absl::StrCat(options.what, ": a malformed reply"));
    }
    return parent(reader);
  }();
  ::close(fds[0]);
  if (reader.pid_ > 0) {
    // Done reading (or the parent gave up): the child has exited or must.
    if (!result.ok()) ::kill(reader.pid_, SIGKILL);
    int status = 0;
    while (::waitpid(reader.pid_, &status, 0) < 0 && errno == EINTR) {
    }
    if (result.ok() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      return absl::InternalError(absl::StrCat(
          options.what, ": the plugin's process ended badly after its result (",
          WIFSIGNALED(status) ? SignalText(WTERMSIG(status))
                              : absl::StrCat("exit ", WEXITSTATUS(status)),
          ")"));
    }
  }
  return result;
}

}  // namespace tpuoff::runtime::pjrt
