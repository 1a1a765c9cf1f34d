// The PJRT backend: runs tpuoff's modules through a PJRT plugin (the XLA CPU
// plugin, libtpu on a TPU VM) and compiles them for TPU topologies without a
// TPU (libtpu's compile-only path), reading XLA's own memory statistics.
//
// The plugin is dlopen()ed at run time from a path (never linked); its
// GetPjrtApi() table is checked (major version, struct_size covering every
// function called) and every error a plugin returns becomes an absl::Status
// naming the PJRT call. Programs go to the plugin as serialized
// HloModuleProto ("hlo" format) with a CompileOptionsProto
// (proto/compile_options.proto). A per-device SPMD module (num_partitions =
// N > 1) is compiled for N partitions with every sharding {manual}
// (ManualizeForPjrt), so XLA's SPMD partitioner does not partition it again.
//
// Built only when CMake finds the PJRT C API header (tools/pjrt/
// setup_plugins.sh); otherwise Available() is false and every entry point
// returns FAILED_PRECONDITION saying how to build it.
#ifndef TPUOFF_RUNTIME_PJRT_PJRT_BACKEND_H_
#define TPUOFF_RUNTIME_PJRT_PJRT_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/module.h"

namespace tpuoff::runtime::pjrt {

// Whether this build has the PJRT backend.
bool Available();
// The plugins found at configure time (the pinned venv of
// tools/pjrt/setup_plugins.sh); empty when unknown.
std::string DefaultCpuPluginPath();
std::string DefaultTpuPluginPath();

struct PluginInfo {
  std::string path;
  int api_major = 0;
  int api_minor = 0;
};

// Loads (once per path and process; plugins are never unloaded) and
// initialises a plugin. NOT_FOUND for a missing file, FAILED_PRECONDITION
// for a library without GetPjrtApi or with an incompatible API.
absl::StatusOr<PluginInfo> LoadPlugin(const std::string& path);

struct ExecuteOptions {
  std::string plugin_path;  // empty: DefaultCpuPluginPath()
  // The plugin runs in a child process (runtime/pjrt/isolated.h): past
  // this many seconds (0: no limit) it is killed, DEADLINE_EXCEEDED; once
  // `cancel` is set, CANCELLED. A plugin that crashes is INTERNAL naming
  // the signal.
  double timeout_seconds = 0;
  const std::atomic<bool>* cancel = nullptr;
};

struct ExecuteResult {
  // Leaves of the root tuple (or the single array) of every device,
  // device-major: device 0's leaves, then device 1's, ... (as RunSpmd).
  std::vector<hlo::Literal> outputs;
  int64_t num_devices = 1;
  PluginInfo plugin;
  std::string platform;  // the client's platform name, e.g. "cpu"
  double compile_seconds = 0;
  double execute_seconds = 0;  // host->device, execution, device->host
};

// Compiles `module` on a client of max(num_partitions, 1) devices of the
// plugin and runs it, in a child process (ExecuteOptions): device d gets per_device_arguments[d] (one set per
// device, matching the entry parameters in number, type and shape:
// INVALID_ARGUMENT naming the parameter otherwise).
absl::StatusOr<ExecuteResult> Execute(
    const hlo::HloModule& module,
    absl::Span<const absl::Span<const hlo::Literal>> per_device_arguments,
    const ExecuteOptions& options = {});
absl::StatusOr<ExecuteResult> Execute(
    const hlo::HloModule& module,
    const std::vector<std::vector<hlo::Literal>>& per_device_arguments,
    const ExecuteOptions& options = {});

// Copies an array held in the dense layout `minor_to_major` (XLA's order
// of dimensions, fastest first) into the row-major `row_major` of the same
// shape (used for device buffers a plugin returns in another layout).
void PermuteToRowMajor(const hlo::Literal& device_order, absl::Span<const int64_t> minor_to_major,
                       hlo::Literal* row_major);

// XLA's memory statistics of a compiled executable, per device
// (PJRT_Executable_GetCompiledMemoryStats).
struct CompiledMemoryStats {
  int64_t argument_bytes = 0;
  int64_t output_bytes = 0;
  int64_t alias_bytes = 0;
  int64_t temp_bytes = 0;
  int64_t generated_code_bytes = 0;
  int64_t peak_bytes = 0;
};

struct TopologyCompileOptions {
  std::string plugin_path;  // empty: DefaultTpuPluginPath()
  // A topology name the plugin knows, e.g. "v6e:2x4" (libtpu).
  std::string topology = "v6e:2x4";
  // Also fetch the optimised module (PJRT_Executable_OptimizedProgram).
  bool want_optimized_module = false;
};

struct TopologyCompileResult {
  PluginInfo plugin;
  std::string platform;  // the topology's platform name, e.g. "tpu"
  int64_t topology_devices = 0;  // devices the topology describes
  CompiledMemoryStats stats;
  // Serialized HloModuleProto of the optimised module (empty unless asked).
  std::string optimized_module_proto;
  double compile_seconds = 0;
};

// INVALID_ARGUMENT naming the topology unless a "GEN:AxB[xC]" name has 1-3
// dimensions in [1, 4096] (at most 65536 chips): libtpu divides by them (a
// zero is a SIGFPE inside the plugin). Names without ':' are the plugin's
// to judge.
absl::Status CheckTopologyName(const std::string& topology);

// Compile-only: compiles `module` for `options.topology` without a device
// (PJRT_TopologyDescription_Create + PJRT_Compile) and returns XLA's memory
// statistics. The module's num_partitions must not exceed the topology's
// devices. libtpu runs in a child process: its CHECK failures and crashes
// are INTERNAL naming the signal (runtime/pjrt/isolated.h).
absl::StatusOr<TopologyCompileResult> CompileForTopology(
    const hlo::HloModule& module, const TopologyCompileOptions& options);

}  // namespace tpuoff::runtime::pjrt

#endif  // TPUOFF_RUNTIME_PJRT_PJRT_BACKEND_H_
