// The functions behind tpuoff._tpuoff (bound in extension.cc). Module holds a
// parsed, verified HLO module shared by the Python objects that use it.
#ifndef TPUOFF_PYTHON_SRC_API_H_
#define TPUOFF_PYTHON_SRC_API_H_

#include <memory>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "hlo/ir/module.h"

namespace tpuoff::python {

struct Module {
  std::shared_ptr<const hlo::HloModule> hlo;
};

// --- kernel_api.cc ---------------------------------------------------------
// Every flag name (without dashes) the kernel and sharding flags of the CLI
// have: what tpuoff.kernel_hlo accepts as keywords.
std::vector<std::string> KernelFlagNames();
// The kernel module `args` (CLI flags: "--kernel=grpo_tiled", "--batch=2",
// ...) describe, parsed and checked by the CLI's own flag code, in `format`
// ("text" -> str, "proto" -> bytes, "json" -> str).
nanobind::object KernelHlo(const std::vector<std::string>& args, const std::string& format);
// The same module, parsed (no serialisation).
Module KernelModule(const std::vector<std::string>& args);

// --- module_api.cc ---------------------------------------------------------
// `data` is HLO text, binary HloModuleProto or proto JSON (detected);
// `filename` names it in messages.
Module ModuleFromBytes(nanobind::bytes data, const std::string& filename);
Module ModuleFromFile(const std::string& path);
nanobind::object Serialize(const Module& module, const std::string& format);
// {"name", "num_partitions", "partitioned", "parameters": [...], "outputs":
// [...]}, each entry {"name", "dtype" (HLO name), "shape" (per device),
// "global_shape" (partitioned modules: of the global array)}.
nanobind::dict Signature(const Module& module);
// `tpuoff memory --json` of the module.
std::string MemoryJson(const Module& module, double hbm_gib, int top);

// --- run_api.cc ------------------------------------------------------------
// How tpuoff.run runs a module: `tpuoff run`'s flags of the same names.
struct RunConfig {
  std::string backend = "emulator";  // "emulator" | "pjrt"
  int threads = 0;                   // emulator host threads (0 = all)
  double hbm_gib = 32.0;             // emulator HBM per device
  int64_t max_loop_iterations = 0;   // emulator; 0 = no limit
  double timeout = 0;                // emulator, seconds; 0 = no limit
  double collective_timeout = 60;    // emulator, seconds
  std::string pjrt_plugin;           // pjrt; empty = the build's CPU plugin
};
// Runs the module as `tpuoff run` does (tools::RunOnBackend, after the same
// host-memory check). `inputs` maps every entry parameter name (global
// names for partitioned modules) to an array, or for a non-partitioned SPMD
// module to one array or a list of one per device. Returns ([(output name,
// array, numpy type name)], stats dict). The GIL is released while the
// module runs.
nanobind::tuple Run(const Module& module, nanobind::dict inputs, const RunConfig& config);
// {"available": bool, "cpu_plugin": path, "tpu_plugin": path}: whether this
// build has the PJRT backend and the plugins it found when it was built.
nanobind::dict PjrtInfo();

}  // namespace tpuoff::python

#endif  // TPUOFF_PYTHON_SRC_API_H_
