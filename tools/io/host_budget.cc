#include "tools/io/host_budget.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/analysis/buffer_plan.h"
#include "hlo/analysis/memory_analysis.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/device/device.h"

namespace tpuoff::tools {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t SaturatingAdd(int64_t a, int64_t b) { return a > kMax - b ? kMax : a + b; }
int64_t SaturatingMul(int64_t a, int64_t b) {
  return a != 0 && b > kMax / a ? kMax : a * b;
}

int64_t ShapeBytes(const hlo::Shape& shape) {
  int64_t total = 0;
  for (const hlo::Shape& leaf : hlo::LeafShapes(shape)) {
    if (leaf.IsArray()) total = SaturatingAdd(total, leaf.byte_size());
  }
  return total;
}

std::string Human(int64_t bytes) {
  return bytes == kMax ? std::string("more than 8 EiB") : runtime::HumanBytes(bytes);
}

}  // namespace

int64_t HostNeed::total() const {
  return SaturatingAdd(SaturatingAdd(inputs, SaturatingMul(per_device, num_devices)), outputs);
}

int64_t ParameterBytes(const hlo::HloComputation& computation) {
  int64_t total = 0;
  for (const hlo::HloInstruction* p : computation.parameters()) {
    if (p != nullptr) total = SaturatingAdd(total, ShapeBytes(p->shape()));
  }
  return total;
}

int64_t SaturatingBytes(int64_t bytes, int64_t n) { return SaturatingMul(bytes, n); }

int64_t ShapesBytes(const std::vector<hlo::Shape>& shapes) {
  int64_t total = 0;
  for (const hlo::Shape& s : shapes) total = SaturatingAdd(total, ShapeBytes(s));
  return total;
}

int64_t ResultBytes(const hlo::HloComputation& computation) {
  return computation.root() ? ShapeBytes(computation.root()->shape()) : 0;
}

int64_t DeviceBytesBeyondArguments(const hlo::HloModule& module) {
  absl::StatusOr<hlo::MemoryAnalysis> a = hlo::AnalyzeMemory(module);
  if (!a.ok()) return -1;
  return std::max<int64_t>(0, a->peak.bytes - a->peak.argument_bytes);
}

HostNeed RunHostNeed(const hlo::HloModule& m, const hlo::PartitionedSignature* sig,
                     const RunHostOptions& o) {
  HostNeed need;
  const int64_t all = std::max<int64_t>(m.num_partitions(), 1);
  need.num_devices = o.local_devices < 0 ? all : o.local_devices;
  if (sig != nullptr || o.device_inputs) {
    need.inputs = SaturatingMul(ParameterBytes(*m.entry()), need.num_devices);
  }
  if (sig != nullptr && o.global_inputs) {
    need.inputs = SaturatingAdd(need.inputs, ShapesBytes(sig->global_parameters));
  }
  need.per_device = std::max<int64_t>(0, DeviceBytesBeyondArguments(m));
  // Every device's outputs end up here (a distributed run gathers them on
  // rank 0); a partitioned module's are also assembled into global arrays.
  const int64_t outputs = sig != nullptr ? ShapesBytes(sig->global_outputs)
                                         : SaturatingMul(ResultBytes(*m.entry()), all);
  need.outputs =
      SaturatingMul(outputs, (sig != nullptr ? 1 : 0) + std::max<int64_t>(o.output_copies, 0));
  return need;
}

absl::Status CheckHostMemory(absl::string_view what, const HostNeed& need) {
  const runtime::HostMemoryInfo host = runtime::QueryHostMemory();
  if (host.available < 0 || need.total() <= host.available) return absl::OkStatus();
  std::vector<std::string> limits;
  if (host.mem_available >= 0) limits.push_back(absl::StrCat("MemAvailable ", Human(host.mem_available)));
  if (host.cgroup_available >= 0) {
    limits.push_back(absl::StrCat("cgroup memory.max leaves ", Human(host.cgroup_available)));
  }
  if (host.address_space_available >= 0) {
    limits.push_back(absl::StrCat("ulimit -v leaves ", Human(host.address_space_available),
                                  " with ", Human(host.address_space_used), " in use"));
  }
  if (host.data_available >= 0) {
    limits.push_back(absl::StrCat("ulimit -d leaves ", Human(host.data_available), " with ",
                                  Human(host.data_used), " in use"));
  }
  std::string parts = absl::StrCat("inputs ", Human(need.inputs), ", device buffers ",
                                   Human(SaturatingMul(need.per_device, need.num_devices)));
  if (need.num_devices > 1) {
    absl::StrAppend(&parts, " (", Human(need.per_device), " on each of ", need.num_devices,
                    " devices)");
  }
  if (need.outputs > 0) absl::StrAppend(&parts, ", outputs ", Human(need.outputs));
  return absl::ResourceExhaustedError(absl::StrCat(
      "not enough host memory: ", what, " needs about ", Human(need.total()), " (", parts,
      ") but the host has ", Human(host.available), " available (",
      absl::StrJoin(limits, "; "), ")"));
}

}  // namespace tpuoff::tools
