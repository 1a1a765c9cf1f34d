// A loaded PJRT plugin and the checked calls into it (internal to
// runtime/pjrt: the only header that includes the PJRT C API).
#ifndef TPUOFF_RUNTIME_PJRT_PLUGIN_H_
#define TPUOFF_RUNTIME_PJRT_PLUGIN_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pjrt_c_api.h"
#include "runtime/pjrt/pjrt_backend.h"

namespace tpuoff::runtime::pjrt {

class Plugin {
 public:
  // The process-wide plugin of `path`, loaded and initialised on first use.
  static absl::StatusOr<const Plugin*> Get(const std::string& path);

  const PJRT_Api* api() const { return api_; }
  const PluginInfo& info() const { return info_; }

  // FAILED_PRECONDITION unless the plugin's PJRT_Api has the function at
  // byte `offset` (its struct_size covers it and it is not null).
  absl::Status Require(size_t offset, const char* name) const;
  // OK for a null error; otherwise the error's code and message (the error
  // is destroyed) as a Status prefixed with `what`.
  absl::Status ToStatus(PJRT_Error* error, const char* what) const;

 private:
  Plugin(const PJRT_Api* api, PluginInfo info) : api_(api), info_(std::move(info)) {}
  const PJRT_Api* api_;
  PluginInfo info_;
};

// Calls api->FN(ARGS) after checking the plugin has FN; evaluates to an
// absl::Status naming FN.
#define TPUOFF_PJRT_CALL(plugin, FN, args)                                        \
  ([&]() -> absl::Status {                                                        \
    if (absl::Status s = (plugin).Require(offsetof(PJRT_Api, FN), #FN); !s.ok()) { \
      return s;                                                                   \
    }                                                                             \
    return (plugin).ToStatus((plugin).api()->FN(args), #FN);                      \
  }())

// Zero-initialised PJRT argument struct with its struct_size set.
template <typename T>
T PjrtArgs(size_t struct_size) {
  T args{};
  args.struct_size = struct_size;
  return args;
}
#define TPUOFF_PJRT_ARGS(T) ::tpuoff::runtime::pjrt::PjrtArgs<T>(T##_STRUCT_SIZE)

// Sets the environment libtpu reads at load time so that it never queries
// the GCE metadata server (TPU_SKIP_MDS_QUERY=1; otherwise it retries for
// ~30 s per key without a network), does not take the one-process lock
// meant for a real TPU, knows a worker host, and does not remap the host
// binary onto huge pages (LIBTPU_INIT_ARGS gets --hugepage_text=false):
// compile-only use needs none of them. `accelerator_type` (e.g. "v6e-8") is set when the user has
// not set TPU_ACCELERATOR_TYPE. Values the user set are kept, except
// TPU_SKIP_MDS_QUERY, which is always 1.
void SetLibtpuEnvironment(const std::string& accelerator_type);

}  // namespace tpuoff::runtime::pjrt

#endif  // TPUOFF_RUNTIME_PJRT_PLUGIN_H_
