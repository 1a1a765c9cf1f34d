// Loading, serialising, describing and analysing modules for Python.
#include <memory>
#include <string>
#include <vector>

#include <nanobind/stl/string.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/instruction.h"
#include "hlo/spmd/sharding_util.h"
#include "python/src/api.h"
#include "python/src/status_error.h"
#include "tools/cli/memory_report.h"
#include "tools/io/module_io.h"
#include "tools/io/output_writer.h"

namespace nb = nanobind;

namespace tpuoff::python {
namespace {

Module Wrap(absl::StatusOr<std::unique_ptr<hlo::HloModule>> module) {
  return Module{std::shared_ptr<const hlo::HloModule>(ValueOrThrow(std::move(module)))};
}

std::vector<hlo::Shape> Leaves(const hlo::Shape& shape) {
  if (!shape.IsTuple()) return {shape};
  std::vector<hlo::Shape> out;
  for (const hlo::Shape& s : shape.tuple_shapes()) {
    for (hlo::Shape& leaf : Leaves(s)) out.push_back(std::move(leaf));
  }
  return out;
}

nb::dict Entry(const std::string& name, const hlo::Shape& local, const hlo::Shape& global) {
  nb::dict d;
  d["name"] = name;
  d["dtype"] = std::string(hlo::PrimitiveTypeName(local.element_type()));
  nb::list shape, global_shape;
  for (int64_t n : local.dimensions()) shape.append(n);
  for (int64_t n : global.dimensions()) global_shape.append(n);
  d["shape"] = nb::tuple(shape);
  d["global_shape"] = nb::tuple(global_shape);
  return d;
}

}  // namespace

Module ModuleFromBytes(nb::bytes data, const std::string& filename) {
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module;
  {
    const absl::string_view bytes(data.c_str(), data.size());
    nb::gil_scoped_release release;
    module = tools::ParseModuleBytes(bytes, filename);
  }
  return Wrap(std::move(module));
}

Module ModuleFromFile(const std::string& path) {
  // (the C library would read the path only up to the NUL: another file)
  ThrowIfError(CheckPath("tpuoff.load", "path", path));
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module;
  {
    nb::gil_scoped_release release;
    module = tools::LoadModuleFile(path);
  }
  return Wrap(std::move(module));
}

nb::object Serialize(const Module& module, const std::string& format) {
  tools::ModuleFormat f = tools::ModuleFormat::kAuto;
  if (format == "text") f = tools::ModuleFormat::kText;
  if (format == "proto") f = tools::ModuleFormat::kProto;
  if (format == "json") f = tools::ModuleFormat::kJson;
  if (f == tools::ModuleFormat::kAuto) {
    ThrowIfError(absl::InvalidArgumentError(
        absl::StrCat("format must be \"text\", \"proto\" or \"json\", got \"", format, "\"")));
  }
  absl::StatusOr<std::string> bytes;
  {
    nb::gil_scoped_release release;
    bytes = tools::SerializeModule(*module.hlo, f);
  }
  std::string out = ValueOrThrow(std::move(bytes));
  if (f == tools::ModuleFormat::kProto) return nb::bytes(out.data(), out.size());
  return nb::str(out.data(), out.size());
}

nb::dict Signature(const Module& module) {
  const hlo::HloModule& m = *module.hlo;
  const hlo::HloComputation& entry = *m.entry();
  const bool partitioned = hlo::IsPartitionedModule(m);
  hlo::PartitionedSignature sig;
  if (partitioned) sig = ValueOrThrow(hlo::GetPartitionedSignature(m));
  nb::list params;
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    const hlo::Shape& local = entry.parameter(i)->shape();
    params.append(Entry(entry.parameter(i)->name(), local,
                        partitioned ? sig.global_parameters[i] : local));
  }
  const std::vector<hlo::Shape> leaves = Leaves(entry.root()->shape());
  const std::vector<std::string> names =
      tools::OutputNames(m, static_cast<int64_t>(leaves.size()));
  nb::list outputs;
  for (size_t i = 0; i < leaves.size(); ++i) {
    outputs.append(Entry(names[i], leaves[i], partitioned ? sig.global_outputs[i] : leaves[i]));
  }
  nb::dict d;
  d["name"] = m.name();
  d["num_partitions"] = std::max<int64_t>(m.num_partitions(), 1);
  d["partitioned"] = partitioned;
  d["parameters"] = params;
  d["outputs"] = outputs;
  return d;
}

std::string MemoryJson(const Module& module, double hbm_gib, int top) {
  if (!(hbm_gib > 0) || hbm_gib > 1e6) {
    ThrowIfError(absl::InvalidArgumentError(
        absl::StrCat("hbm_gib must be in (0, 1e6], got ", hbm_gib)));
  }
  if (top < 0) ThrowIfError(absl::InvalidArgumentError("top must be >= 0"));
  absl::StatusOr<hlo::DeviceMemoryReport> report;
  {
    nb::gil_scoped_release release;
    report = hlo::AnalyzeDeviceMemory(*module.hlo);
  }
  tools::MemoryReportOptions options;
  options.hbm_capacity_bytes =
      std::max<int64_t>(1, static_cast<int64_t>(std::llround(hbm_gib * 1073741824.0)));
  options.top = top;
  return tools::MemoryReportJson(ValueOrThrow(std::move(report)), options);
}

}  // namespace tpuoff::python
