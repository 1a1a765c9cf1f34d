// tpuoff._tpuoff: the compiled half of the tpuoff Python package. The public
// API (argument conversion, dtype handling, docs) is python/tpuoff/.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "python/src/api.h"

namespace nb = nanobind;
using namespace nb::literals;

NB_MODULE(_tpuoff, m) {
  using namespace tpuoff::python;
  m.doc() = "tpuoff's C++ core (use the tpuoff package, not this module)";

  nb::class_<Module>(m, "HloModule", "A parsed, verified HLO module")
      .def_prop_ro("name", [](const Module& self) { return self.hlo->name(); });

  m.def("kernel_flag_names", &KernelFlagNames);
  m.def("kernel_hlo", &KernelHlo, "args"_a, "format"_a);
  m.def("kernel_module", &KernelModule, "args"_a);
  m.def("module_from_bytes", &ModuleFromBytes, "data"_a, "filename"_a);
  m.def("module_from_file", &ModuleFromFile, "path"_a);
  m.def("serialize", &Serialize, "module"_a, "format"_a);
  m.def("signature", &Signature, "module"_a);
  m.def("memory_json", &MemoryJson, "module"_a, "hbm_gib"_a, "top"_a);
  m.def(
      "run",
      [](const Module& module, nb::dict inputs, std::string backend, int threads, double hbm_gib,
         int64_t max_loop_iterations, double timeout, double collective_timeout,
         std::string pjrt_plugin) {
        return Run(module, inputs,
                   RunConfig{std::move(backend), threads, hbm_gib, max_loop_iterations, timeout,
                             collective_timeout, std::move(pjrt_plugin)});
      },
      "module"_a, "inputs"_a, "backend"_a, "threads"_a, "hbm_gib"_a, "max_loop_iterations"_a,
      "timeout"_a, "collective_timeout"_a, "pjrt_plugin"_a);
  m.def("pjrt_info", &PjrtInfo);
}
