// The PJRT backend of a build without the PJRT C API header: every entry
// point says so and how to get it (compiled instead of plugin.cc,
// execute.cc, topology_compile.cc and handles.cc; see runtime/CMakeLists.txt).
#include "absl/strings/str_cat.h"
#include "runtime/pjrt/pjrt_backend.h"

namespace tpuoff::runtime::pjrt {
namespace {

absl::Status NotBuilt() {
  return absl::FailedPreconditionError(
      "this tpuoff was built without the PJRT backend (CMake did not find the PJRT C API "
      "header pjrt_c_api.h): run tools/pjrt/setup_plugins.sh and reconfigure with "
      "-DTPUOFF_PJRT_PLUGINS=<the directory it prints>");
}

}  // namespace

bool Available() { return false; }
std::string DefaultCpuPluginPath() { return ""; }
std::string DefaultTpuPluginPath() { return ""; }

absl::StatusOr<PluginInfo> LoadPlugin(const std::string&) { return NotBuilt(); }

absl::StatusOr<ExecuteResult> Execute(const hlo::HloModule&,
                                      absl::Span<const absl::Span<const hlo::Literal>>,
                                      const ExecuteOptions&) {
  return NotBuilt();
}

absl::StatusOr<ExecuteResult> Execute(const hlo::HloModule&,
                                      const std::vector<std::vector<hlo::Literal>>&,
                                      const ExecuteOptions&) {
  return NotBuilt();
}

absl::StatusOr<TopologyCompileResult> CompileForTopology(const hlo::HloModule&,
                                                         const TopologyCompileOptions&) {
  return NotBuilt();
}

}  // namespace tpuoff::runtime::pjrt
