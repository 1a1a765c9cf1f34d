// Plugin calls in a child process. A PJRT plugin is code tpuoff does not
// control: libtpu CHECK-fails (SIGABRT) or divides by zero (SIGFPE) on
// inputs it dislikes, the XLA CPU plugin aborts on a collective that never
// completes, and neither can be stopped once it runs (the PJRT C API has no
// cancellation). RunIsolated forks: the child makes the plugin calls and
// streams its result back through a pipe; the parent reads it, so a crash,
// an endless loop past the time limit or a cancellation ends the child (a
// status naming the signal or the limit), never the caller.
#ifndef TPUOFF_RUNTIME_PJRT_ISOLATED_H_
#define TPUOFF_RUNTIME_PJRT_ISOLATED_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tpuoff::runtime::pjrt {

struct IsolationOptions {
  // What the child does, for messages ("running m with /path/plugin.so").
  std::string what;
  // Wall-clock limit in seconds (0: none): the child is killed,
  // DEADLINE_EXCEEDED.
  double timeout_seconds = 0;
  // Polled every 50 ms: once set, the child is killed, CANCELLED.
  const std::atomic<bool>* cancel = nullptr;
};

class ChildReader;

// The child's end of the pipe.
class ChildWriter {
 public:
  explicit ChildWriter(int fd) : fd_(fd) {}
  // The first write marks the result as a success (a frame tag first).
  absl::Status Write(const void* data, int64_t n);
  absl::Status Write(absl::string_view s) { return Write(s.data(), static_cast<int64_t>(s.size())); }
  absl::Status WriteU64(uint64_t v) { return Write(&v, sizeof(v)); }
  absl::Status WriteString(absl::string_view s);  // length-prefixed

 private:
  friend absl::Status RunIsolated(const IsolationOptions&,
                                  const std::function<absl::Status(ChildWriter&)>&,
                                  const std::function<absl::Status(ChildReader&)>&);
  absl::Status WriteRaw(const void* data, int64_t n);
  int fd_;
  bool started_ = false;
};

// The parent's end: exact reads that honour the limit and the cancel flag.
class ChildReader {
 public:
  absl::Status Read(void* data, int64_t n);
  absl::Status ReadU64(uint64_t* v) { return Read(v, sizeof(*v)); }
  // A length-prefixed string of at most `max_bytes`.
  absl::Status ReadString(std::string* s, uint64_t max_bytes = uint64_t{1} << 32);

 private:
  friend absl::Status RunIsolated(const IsolationOptions&,
                                  const std::function<absl::Status(ChildWriter&)>&,
                                  const std::function<absl::Status(ChildReader&)>&);
  ChildReader(int fd, int pid, const IsolationOptions* o, double start) :
      fd_(fd), pid_(pid), options_(o), start_(start) {}
  absl::Status Ended();  // the child is gone or must go: why
  int fd_;
  int pid_;
  const IsolationOptions* options_;
  double start_;
  bool killed_ = false;
};

// Forks. The child runs `child` and exits without running destructors or
// exit handlers (_exit); it writes its result with the writer: an error
// status returned before it wrote anything reaches the parent as that
// status. The parent runs `parent` on the reader (its reads fail if the
// child dies, runs past the limit or is cancelled) and then waits for the
// child. A child killed by a signal is INTERNAL "<what>: the plugin
// crashed (signal N, SIGABRT)"; its own message, if it printed one, is on
// stderr above. No core file is written.
absl::Status RunIsolated(const IsolationOptions& options,
                         const std::function<absl::Status(ChildWriter&)>& child,
                         const std::function<absl::Status(ChildReader&)>& parent);

}  // namespace tpuoff::runtime::pjrt

#endif  // TPUOFF_RUNTIME_PJRT_ISOLATED_H_
