#include "runtime/pjrt/plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tpuoff::runtime::pjrt {
namespace {

absl::StatusCode CodeOf(PJRT_Error_Code code) {
  // PJRT_Error_Code mirrors absl::StatusCode value for value.
  const int c = static_cast<int>(code);
  return c >= 0 && c <= 16 ? static_cast<absl::StatusCode>(c) : absl::StatusCode::kUnknown;
}

std::mutex& PluginsMutex() {
  static std::mutex mu;
  return mu;
}
// Loaded plugins by path; never unloaded (plugins keep threads and static
// state that do not survive dlclose).
std::map<std::string, std::unique_ptr<Plugin>>& Plugins() {
  static auto* plugins = new std::map<std::string, std::unique_ptr<Plugin>>();
  return *plugins;
}

void SetIfUnset(const char* name, const std::string& value) {
  if (std::getenv(name) == nullptr) setenv(name, value.c_str(), 1);
}

}  // namespace

void SetLibtpuEnvironment(const std::string& accelerator_type) {
  setenv("TPU_SKIP_MDS_QUERY", "1", 1);
  SetIfUnset("ALLOW_MULTIPLE_LIBTPU_LOAD", "1");
  SetIfUnset("TPU_WORKER_HOSTNAMES", "localhost");
  SetIfUnset("TPU_WORKER_ID", "0");
  if (!accelerator_type.empty()) SetIfUnset("TPU_ACCELERATOR_TYPE", accelerator_type);
  // libtpu tries to remap the host program's text onto huge pages and logs
  // an error to stderr when the binary's segments are not 2 MiB aligned;
  // compile-only use gains nothing from it.
  const char* init = std::getenv("LIBTPU_INIT_ARGS");
  std::string args = init ? init : "";
  if (args.find("hugepage_text") == std::string::npos) {
    setenv("LIBTPU_INIT_ARGS", (args.empty() ? "" : args + " ").append("--hugepage_text=false").c_str(), 1);
  }
}

absl::Status Plugin::Require(size_t offset, const char* name) const {
  if (api_->struct_size < offset + sizeof(void*)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PJRT plugin ", info_.path, " (API ", info_.api_major, ".", info_.api_minor,
        ") has no ", name, ": its PJRT_Api is ", api_->struct_size, " bytes"));
  }
  void* fn = nullptr;
  std::memcpy(&fn, reinterpret_cast<const char*>(api_) + offset, sizeof(void*));
  if (fn == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("PJRT plugin ", info_.path, " does not implement ", name));
  }
  return absl::OkStatus();
}

absl::Status Plugin::ToStatus(PJRT_Error* error, const char* what) const {
  if (error == nullptr) return absl::OkStatus();
  std::string message = "(no message)";
  absl::StatusCode code = absl::StatusCode::kUnknown;
  if (Require(offsetof(PJRT_Api, PJRT_Error_Message), "PJRT_Error_Message").ok()) {
    PJRT_Error_Message_Args m = TPUOFF_PJRT_ARGS(PJRT_Error_Message_Args);
    m.error = error;
    api_->PJRT_Error_Message(&m);
    if (m.message != nullptr) message.assign(m.message, m.message_size);
  }
  if (Require(offsetof(PJRT_Api, PJRT_Error_GetCode), "PJRT_Error_GetCode").ok()) {
    PJRT_Error_GetCode_Args g = TPUOFF_PJRT_ARGS(PJRT_Error_GetCode_Args);
    g.error = error;
    // A failing GetCode returns an error of its own; keep kUnknown then.
    if (PJRT_Error* e = api_->PJRT_Error_GetCode(&g); e == nullptr) {
      code = CodeOf(g.code);
    } else {
      PJRT_Error_Destroy_Args d = TPUOFF_PJRT_ARGS(PJRT_Error_Destroy_Args);
      d.error = e;
      api_->PJRT_Error_Destroy(&d);
    }
  }
  if (Require(offsetof(PJRT_Api, PJRT_Error_Destroy), "PJRT_Error_Destroy").ok()) {
    PJRT_Error_Destroy_Args d = TPUOFF_PJRT_ARGS(PJRT_Error_Destroy_Args);
    d.error = error;
    api_->PJRT_Error_Destroy(&d);
  }
  if (code == absl::StatusCode::kOk) code = absl::StatusCode::kUnknown;
  return absl::Status(code, absl::StrCat(what, ": ", message));
}

absl::StatusOr<const Plugin*> Plugin::Get(const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError("no PJRT plugin given (--pjrt-plugin=PATH)");
  }
  std::lock_guard<std::mutex> lock(PluginsMutex());
  auto it = Plugins().find(path);
  if (it != Plugins().end()) return it->second.get();

  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("PJRT plugin ", path, ": no such file"));
  }
  // libtpu reads these when it is loaded: never the metadata server.
  setenv("TPU_SKIP_MDS_QUERY", "1", 1);
  // XLA's plugins log client options (INFO) and deprecation notes (WARNING)
  // to stderr; errors still show (and come back as a Status too).
  SetIfUnset("TF_CPP_MIN_LOG_LEVEL", "2");
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "PJRT plugin ", path, ": cannot load: ", err ? err : "dlopen failed"));
  }
  using GetApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    dlclose(handle);
    return absl::FailedPreconditionError(
        absl::StrCat("PJRT plugin ", path, ": no GetPjrtApi symbol (not a PJRT plugin)"));
  }
  const PJRT_Api* api = get_api();
  if (api == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("PJRT plugin ", path, ": GetPjrtApi returned null"));
  }
  const size_t version_end =
      offsetof(PJRT_Api, pjrt_api_version) + sizeof(PJRT_Api_Version);
  if (api->struct_size < version_end) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PJRT plugin ", path, ": PJRT_Api struct_size ", api->struct_size,
        " is too small to hold the API version"));
  }
  PluginInfo info;
  info.path = path;
  info.api_major = api->pjrt_api_version.major_version;
  info.api_minor = api->pjrt_api_version.minor_version;
  if (info.api_major != PJRT_API_MAJOR) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PJRT plugin ", path, ": PJRT C API ", info.api_major, ".", info.api_minor,
        ", this tpuoff was built against ", PJRT_API_MAJOR, ".", PJRT_API_MINOR,
        " (major versions must match)"));
  }
  std::unique_ptr<Plugin> plugin(new Plugin(api, info));
  PJRT_Plugin_Initialize_Args init = TPUOFF_PJRT_ARGS(PJRT_Plugin_Initialize_Args);
  if (absl::Status s = TPUOFF_PJRT_CALL(*plugin, PJRT_Plugin_Initialize, &init); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("PJRT plugin ", path, ": ", s.message()));
  }
  const Plugin* result = plugin.get();
  Plugins()[path] = std::move(plugin);
  return result;
}

absl::StatusOr<PluginInfo> LoadPlugin(const std::string& path) {
  absl::StatusOr<const Plugin*> plugin = Plugin::Get(path);
  if (!plugin.ok()) return plugin.status();
  return (*plugin)->info();
}

bool Available() { return true; }

std::string DefaultCpuPluginPath() { return TPUOFF_PJRT_DEFAULT_CPU_PLUGIN; }
std::string DefaultTpuPluginPath() { return TPUOFF_PJRT_DEFAULT_TPU_PLUGIN; }

}  // namespace tpuoff::runtime::pjrt
