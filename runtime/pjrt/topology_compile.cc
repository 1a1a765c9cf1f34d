// CompileForTopology(): compile-only for a device topology (libtpu: TPU
// slices without a TPU).
#include <chrono>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hlo/ir/status_macros.h"
#include "runtime/pjrt/handles.h"
#include "runtime/pjrt/isolated.h"
#include "runtime/pjrt/program.h"

namespace tpuoff::runtime::pjrt {
namespace {

// "v6e:2x4" -> "v6e-8" (the accelerator type libtpu expects in its
// environment); "" when the name has no "GEN:AxB[xC]" form.
std::string AcceleratorType(const std::string& topology) {
  std::vector<std::string> parts = absl::StrSplit(topology, ':');
  if (parts.size() != 2) return "";
  int64_t chips = 1;
  for (absl::string_view d : absl::StrSplit(parts[1], 'x')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(d, &v) || v <= 0) return "";
    chips *= v;
  }
  return absl::StrCat(parts[0], "-", chips);
}

absl::StatusOr<TopologyCompileResult> CompileInProcess(const hlo::HloModule& module,
                                                       const TopologyCompileOptions& options,
                                                       const std::string& path) {
  SetLibtpuEnvironment(AcceleratorType(options.topology));
  ASSIGN_OR_RETURN(const Plugin* plugin, Plugin::Get(path));
  const Plugin& p = *plugin;
  TopologyCompileResult result;
  result.plugin = p.info();

  PJRT_TopologyDescription_Create_Args create =
      TPUOFF_PJRT_ARGS(PJRT_TopologyDescription_Create_Args);
  create.topology_name = options.topology.data();
  create.topology_name_size = options.topology.size();
  if (absl::Status s = TPUOFF_PJRT_CALL(p, PJRT_TopologyDescription_Create, &create); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("topology '", options.topology, "' (plugin ",
                                               path, "): ", s.message()));
  }
  Owned<PJRT_TopologyDescription> topology(&p, create.topology);

  PJRT_TopologyDescription_PlatformName_Args pn =
      TPUOFF_PJRT_ARGS(PJRT_TopologyDescription_PlatformName_Args);
  pn.topology = topology.get();
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_TopologyDescription_PlatformName, &pn));
  result.platform.assign(pn.platform_name, pn.platform_name_size);
  PJRT_TopologyDescription_GetDeviceDescriptions_Args dd =
      TPUOFF_PJRT_ARGS(PJRT_TopologyDescription_GetDeviceDescriptions_Args);
  dd.topology = topology.get();
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_TopologyDescription_GetDeviceDescriptions, &dd));
  result.topology_devices = static_cast<int64_t>(dd.num_descriptions);

  const int64_t n = std::max<int64_t>(module.num_partitions(), 1);
  if (n > result.topology_devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "module ", module.name(), " has ", n, " partitions; topology '", options.topology,
        "' has ", result.topology_devices, " devices"));
  }
  ASSIGN_OR_RETURN(std::string code, PjrtProgramBytes(module));
  ASSIGN_OR_RETURN(std::string copts, CompileOptionsBytes({.num_partitions = n}, code));
  PJRT_Program program = TPUOFF_PJRT_ARGS(PJRT_Program);
  program.code = code.data();
  program.code_size = code.size();
  program.format = "hlo";
  program.format_size = 3;
  PJRT_Compile_Args compile = TPUOFF_PJRT_ARGS(PJRT_Compile_Args);
  compile.topology = topology.get();
  compile.program = &program;
  compile.compile_options = copts.data();
  compile.compile_options_size = copts.size();
  const auto t0 = std::chrono::steady_clock::now();
  if (absl::Status s = TPUOFF_PJRT_CALL(p, PJRT_Compile, &compile); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("compiling ", module.name(), " for ",
                                               options.topology, ": ", s.message()));
  }
  Owned<PJRT_Executable> exe(&p, compile.executable);
  result.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSIGN_OR_RETURN(result.stats, GetMemoryStats(p, exe.get()));
  if (options.want_optimized_module) {
    ASSIGN_OR_RETURN(result.optimized_module_proto, GetOptimizedModule(p, exe.get()));
  }
  return result;
}

// The result's fields through the pipe, in one order both ways.
absl::Status Send(const TopologyCompileResult& r, ChildWriter& w) {
  const CompiledMemoryStats& m = r.stats;
  for (int64_t v : {int64_t{r.plugin.api_major}, int64_t{r.plugin.api_minor}, r.topology_devices,
                    m.argument_bytes, m.output_bytes, m.alias_bytes, m.temp_bytes,
                    m.generated_code_bytes, m.peak_bytes}) {
    RETURN_IF_ERROR(w.WriteU64(static_cast<uint64_t>(v)));
  }
  RETURN_IF_ERROR(w.Write(&r.compile_seconds, sizeof(double)));
  RETURN_IF_ERROR(w.WriteString(r.plugin.path));
  RETURN_IF_ERROR(w.WriteString(r.platform));
  return w.WriteString(r.optimized_module_proto);
}

absl::Status Receive(ChildReader& rd, TopologyCompileResult* r) {
  CompiledMemoryStats& m = r->stats;
  uint64_t v[9];
  for (uint64_t& x : v) RETURN_IF_ERROR(rd.ReadU64(&x));
  r->plugin.api_major = static_cast<int>(v[0]);
  r->plugin.api_minor = static_cast<int>(v[1]);
  r->topology_devices = static_cast<int64_t>(v[2]);
  int64_t* fields[] = {&m.argument_bytes, &m.output_bytes, &m.alias_bytes, &m.temp_bytes,
                       &m.generated_code_bytes, &m.peak_bytes};
  for (int i = 0; i < 6; ++i) *fields[i] = static_cast<int64_t>(v[3 + i]);
  RETURN_IF_ERROR(rd.Read(&r->compile_seconds, sizeof(double)));
  RETURN_IF_ERROR(rd.ReadString(&r->plugin.path, 1 << 16));
  RETURN_IF_ERROR(rd.ReadString(&r->platform, 1 << 16));
  return rd.ReadString(&r->optimized_module_proto);
}

}  // namespace

absl::StatusOr<TopologyCompileResult> CompileForTopology(
    const hlo::HloModule& module, const TopologyCompileOptions& options) {
  const std::string path =
      options.plugin_path.empty() ? DefaultTpuPluginPath() : options.plugin_path;
  RETURN_IF_ERROR(CheckTopologyName(options.topology));
  // In a child process: libtpu aborts (CHECK failures) or divides by zero
  // on some inputs; that ends the child, and this is an error naming it.
  TopologyCompileResult result;
  RETURN_IF_ERROR(RunIsolated(
      {.what = absl::StrCat("compiling ", module.name(), " for ", options.topology, " with ",
                            path)},
      [&](ChildWriter& w) -> absl::Status {
        ASSIGN_OR_RETURN(TopologyCompileResult r, CompileInProcess(module, options, path));
        return Send(r, w);
      },
      [&](ChildReader& rd) { return Receive(rd, &result); }));
  return result;
}

}  // namespace tpuoff::runtime::pjrt
