// What the PJRT backend sends a plugin, built without the PJRT C API: the
// program bytes (a serialized HloModuleProto, per-device SPMD modules made
// manual), the serialized CompileOptionsProto, and the module inside an
// optimised program a plugin returns.
#ifndef TPUOFF_RUNTIME_PJRT_PROGRAM_H_
#define TPUOFF_RUNTIME_PJRT_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "hlo/ir/module.h"

namespace tpuoff::runtime::pjrt {

// The serialized HloModuleProto of `module` for PJRT_Program format "hlo".
// A module with num_partitions > 1 is tpuoff's per-device SPMD program: every
// sharding in it becomes {manual} (a tuple sharding: one {manual} per leaf),
// and the entry's parameters and root get one when they have none, so that
// XLA's SPMD partitioner (required for num_partitions > 1) keeps each
// device's program as it is instead of partitioning it again.
absl::StatusOr<std::string> PjrtProgramBytes(const hlo::HloModule& module);

struct CompileOptionsSpec {
  int64_t num_partitions = 1;
  // Global device ids of the partitions (computation i runs on
  // device_ids[i]); empty: no device assignment (compile-only, or one
  // device). When given, its size must be num_partitions.
  std::vector<int64_t> device_ids;
  // Send the program's entry layouts (its host_program_shape: the
  // entry_computation_layout the module declares, else row-major) as
  // argument_layouts and result_layout, so that XLA keeps them instead of
  // choosing its default layouts for the parameters and results.
  bool entry_layouts = true;
};

// A serialized CompileOptionsProto for `program` (PjrtProgramBytes): one
// replica, `num_partitions` partitions, device_ordinal -1, SPMD partitioning
// (GSPMD, not Shardy) when num_partitions > 1. Always non-empty (an empty
// one aborts the CPU plugin).
absl::StatusOr<std::string> CompileOptionsBytes(const CompileOptionsSpec& spec,
                                                absl::string_view program);

// The serialized HloModuleProto inside an optimised program returned by
// PJRT_Executable_OptimizedProgram: format "hlo" is one already,
// "hlo_with_config" wraps one (HloModuleProtoWithConfig). UNIMPLEMENTED for
// other formats, DATA_LOSS for bytes that do not parse.
absl::StatusOr<std::string> ModuleProtoFromProgram(absl::string_view code,
                                                   absl::string_view format);

}  // namespace tpuoff::runtime::pjrt

#endif  // TPUOFF_RUNTIME_PJRT_PROGRAM_H_
