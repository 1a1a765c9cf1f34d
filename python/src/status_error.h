// absl::Status -> Python exceptions. Every error a tpuoff call reports
// becomes an instance of the tpuoff._errors class for its code, which also
// derives from the matching builtin (InvalidArgument -> ValueError, NotFound
// -> FileNotFoundError, ResourceExhausted -> MemoryError, Unimplemented ->
// NotImplementedError, ...), carrying the status message unchanged.
#ifndef TPUOFF_PYTHON_SRC_STATUS_ERROR_H_
#define TPUOFF_PYTHON_SRC_STATUS_ERROR_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tpuoff::python {

// Raises (throws nanobind::python_error) unless `status` is ok. Needs the GIL.
void ThrowIfError(const absl::Status& status);

// INVALID_ARGUMENT "<function>: <what> contains a NUL byte" when the path
// has one: C file APIs would read only the part before it (another file).
absl::Status CheckPath(const std::string& function, const std::string& what,
                       const std::string& path);

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return *std::move(value);
}

}  // namespace tpuoff::python

#endif  // TPUOFF_PYTHON_SRC_STATUS_ERROR_H_
