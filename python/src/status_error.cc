#include "python/src/status_error.h"

#include <string>

#include <nanobind/nanobind.h>

#include "absl/strings/str_cat.h"

namespace nb = nanobind;

namespace tpuoff::python {

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  // tpuoff._errors.from_status(code, message) builds the exception; the
  // Python side owns the code -> class table.
  nb::object errors = nb::module_::import_("tpuoff._errors");
  const absl::string_view message = status.message();
  nb::object exc = errors.attr("from_status")(static_cast<int>(status.code()),
                                              nb::str(message.data(), message.size()));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw nb::python_error();
}

absl::Status CheckPath(const std::string& function, const std::string& what,
                       const std::string& path) {
  const size_t nul = path.find('\0');
  if (nul == std::string::npos) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(function, ": ", what, " contains a NUL byte (at ", nul, ")"));
}

}  // namespace tpuoff::python
