#include "runtime/pjrt/program.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "hlo/ir/primitive_type.h"
#include "runtime/pjrt/pjrt_backend.h"
#include "hlo/ir/status_macros.h"
#include "hlo/proto/proto_io.h"
#if __has_include("proto/compile_options.pb.h")
#include "proto/compile_options.pb.h"
#include "proto/hlo.pb.h"
#else
#include "compile_options.pb.h"
#include "hlo.pb.h"
#endif

namespace tpuoff::runtime::pjrt {
namespace {

int64_t CountLeaves(const xla::ShapeProto& shape) {
  if (shape.element_type() != xla::TUPLE) return 1;
  int64_t n = 0;
  for (const xla::ShapeProto& s : shape.tuple_shapes()) n += CountLeaves(s);
  return n;
}

// {manual}, or a tuple of `leaves` {manual} for a tuple-shaped value.
xla::OpSharding Manual(const xla::ShapeProto& shape) {
  xla::OpSharding s;
  if (shape.element_type() != xla::TUPLE) {
    s.set_type(xla::OpSharding::MANUAL);
    return s;
  }
  s.set_type(xla::OpSharding::TUPLE);
  const int64_t leaves = CountLeaves(shape);
  for (int64_t i = 0; i < leaves; ++i) {
    s.add_tuple_shardings()->set_type(xla::OpSharding::MANUAL);
  }
  return s;
}

void Manualize(xla::HloModuleProto& m) {
  for (xla::HloComputationProto& c : *m.mutable_computations()) {
    const bool entry = c.id() == m.entry_computation_id();
    for (xla::HloInstructionProto& i : *c.mutable_instructions()) {
      const bool boundary = entry && (i.opcode() == "parameter" || i.id() == c.root_id());
      // A partition-id (or replica-id) is the device's own index only in
      // manual code; one without users gets no sharding from propagation and
      // XLA's partitioner refuses it as ambiguous (a vocab-sharded entropy
      // whose shard offset nothing reads).
      const bool device_index = i.opcode() == "partition-id" || i.opcode() == "replica-id";
      // XLA's sharding propagation requires a sharding on every `Sharding`
      // annotation; a lowered global program (--global-form, jax's
      // pre-partitioning modules) keeps some without one.
      const bool annotation = i.opcode() == "custom-call" && i.custom_call_target() == "Sharding";
      if (i.has_sharding() || boundary || device_index || annotation) {
        *i.mutable_sharding() = Manual(i.shape());
      }
    }
  }
  m.clear_spmd_output_sharding();
  m.clear_spmd_parameters_shardings();
}

}  // namespace

absl::StatusOr<std::string> PjrtProgramBytes(const hlo::HloModule& module) {
  ASSIGN_OR_RETURN(std::string bytes, hlo::ModuleToProtoBytes(module));
  if (module.num_partitions() <= 1 && !module.is_scheduled()) return bytes;
  xla::HloModuleProto proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::InternalError(
        absl::StrCat("module ", module.name(), ": its own HloModuleProto does not parse"));
  }
  // XLA:CPU refuses the schedule of a module it optimised once already
  // (its pipeline's first verifier counts one more sequence than the
  // computations it keeps): the plugin schedules the program itself.
  proto.clear_schedule();
  if (module.num_partitions() > 1) Manualize(proto);
  std::string out;
  if (!proto.SerializeToString(&out)) {
    return absl::InternalError(absl::StrCat("module ", module.name(), ": cannot serialize"));
  }
  return out;
}

absl::StatusOr<std::string> CompileOptionsBytes(const CompileOptionsSpec& spec,
                                                absl::string_view program) {
  if (spec.num_partitions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile options: num_partitions must be >= 1, got ", spec.num_partitions));
  }
  if (!spec.device_ids.empty() &&
      static_cast<int64_t>(spec.device_ids.size()) != spec.num_partitions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compile options: ", spec.device_ids.size(), " device ids for ", spec.num_partitions,
        " partitions"));
  }
  xla::CompileOptionsProto options;
  xla::ExecutableBuildOptionsProto* build = options.mutable_executable_build_options();
  if (spec.entry_layouts) {
    xla::HloModuleProto module;
    if (!module.ParseFromArray(program.data(), static_cast<int>(program.size()))) {
      return absl::InvalidArgumentError("compile options: the program is no HloModuleProto");
    }
    const xla::ProgramShapeProto& entry = module.host_program_shape();
    for (const xla::ShapeProto& p : entry.parameters()) *options.add_argument_layouts() = p;
    *build->mutable_result_layout() = entry.result();
  }
  build->set_device_ordinal(-1);
  build->set_num_replicas(1);
  build->set_num_partitions(spec.num_partitions);
  if (spec.num_partitions > 1) {
    build->set_use_spmd_partitioning(true);
    build->set_use_shardy_partitioner(false);
  }
  if (!spec.device_ids.empty()) {
    xla::DeviceAssignmentProto* da = build->mutable_device_assignment();
    da->set_replica_count(1);
    da->set_computation_count(static_cast<int32_t>(spec.num_partitions));
    for (int64_t id : spec.device_ids) da->add_computation_devices()->add_replica_device_ids(id);
  }
  std::string out;
  if (!options.SerializeToString(&out) || out.empty()) {
    return absl::InternalError("compile options: cannot serialize CompileOptionsProto");
  }
  return out;
}

void PermuteToRowMajor(const hlo::Literal& device_order, absl::Span<const int64_t> minor_to_major,
                       hlo::Literal* row_major) {
  const std::vector<int64_t>& dims = row_major->shape().dimensions();
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int64_t width = hlo::ByteWidth(row_major->shape().element_type());
  // Stride (in elements) of each logical dimension in the device order.
  std::vector<int64_t> stride(rank, 1);
  int64_t s = 1;
  for (int64_t d : minor_to_major) {
    stride[d] = s;
    s *= dims[d];
  }
  std::vector<int64_t> index(rank, 0);
  const int64_t n = row_major->num_elements();
  const uint8_t* src = device_order.raw();
  uint8_t* out = row_major->raw();
  for (int64_t linear = 0; linear < n; ++linear) {
    int64_t offset = 0;
    for (int64_t d = 0; d < rank; ++d) offset += index[d] * stride[d];
    std::memcpy(out + linear * width, src + offset * width, width);
    for (int64_t d = rank - 1; d >= 0; --d) {  // next row-major index
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
}

absl::StatusOr<std::string> ModuleProtoFromProgram(absl::string_view code,
                                                   absl::string_view format) {
  if (format == "hlo") return std::string(code);
  if (format != "hlo_with_config") {
    return absl::UnimplementedError(
        absl::StrCat("optimised program in format '", format,
                     "' (expected 'hlo' or 'hlo_with_config')"));
  }
  xla::HloModuleProtoWithConfig wrapped;
  if (!wrapped.ParseFromArray(code.data(), static_cast<int>(code.size()))) {
    return absl::DataLossError(
        absl::StrCat("optimised program: ", code.size(),
                     " bytes that do not parse as HloModuleProtoWithConfig"));
  }
  std::string out;
  if (!wrapped.hlo_module().SerializeToString(&out)) {
    return absl::InternalError("optimised program: cannot serialize its HloModuleProto");
  }
  return out;
}

}  // namespace tpuoff::runtime::pjrt
