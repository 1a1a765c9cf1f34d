// IR -> HloModuleProto (binary and JSON). Ids are assigned afresh in export
// order (computations 1..C, instructions 1..N module-wide), so the output is
// deterministic and every id is unique.
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver.h"
#include "google/protobuf/util/type_resolver_util.h"
#include "hlo/proto/proto_internal.h"
#include "hlo/proto/proto_io.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo {
namespace {

using proto_internal::FrontendAttributesToProto;
using proto_internal::LiteralToProto;
using proto_internal::MetadataToProto;
using proto_internal::PrecisionFromString;
using proto_internal::ReplicaGroupsToProto;
using proto_internal::RespellNegativeZeros;
using proto_internal::ShapeToProto;
using proto_internal::ShardingToProto;
using proto_internal::kMaxDevices;

std::string Where(const HloComputation& c, const HloInstruction* i = nullptr) {
  std::string out = absl::StrCat("computation '", c.name(), "'");
  if (i != nullptr) absl::StrAppend(&out, ", instruction '", i->name(), "'");
  return out;
}

// Stable depth-first topological order: `nodes` in their given order, except
// that every node comes after its dependencies. Errors on a cycle or on a
// dependency outside `nodes` (described by `describe`).
template <typename T, typename DepsFn, typename NameFn>
absl::StatusOr<std::vector<const T*>> StableTopoOrder(
    const std::vector<const T*>& nodes, DepsFn deps, NameFn describe) {
  enum State { kNew, kActive, kDone };
  absl::flat_hash_map<const T*, State> state;
  for (const T* n : nodes) state[n] = kNew;
  std::vector<const T*> order;
  order.reserve(nodes.size());
  for (const T* start : nodes) {
    if (state[start] != kNew) continue;
    // (node, its dependencies, next dependency to visit)
    std::vector<std::pair<const T*, std::pair<std::vector<const T*>, size_t>>> stack;
    stack.push_back({start, {deps(start), 0}});
    state[start] = kActive;
    while (!stack.empty()) {
      auto& [node, frame] = stack.back();
      if (frame.second < frame.first.size()) {
        const T* dep = frame.first[frame.second++];
        auto it = state.find(dep);
        if (it == state.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(describe(node), " depends on something outside its scope"));
        }
        if (it->second == kActive) {
          return absl::InvalidArgumentError(
              absl::StrCat(describe(node), " is part of a cycle"));
        }
        if (it->second == kNew) {
          it->second = kActive;
          stack.push_back({dep, {deps(dep), 0}});
        }
      } else {
        state[node] = kDone;
        order.push_back(node);
        stack.pop_back();
      }
    }
  }
  return order;
}

class Exporter {
 public:
  explicit Exporter(const HloModule& module) : module_(module) {}

  absl::StatusOr<xla::HloModuleProto> Run();

 private:
  absl::Status ExportComputation(const HloComputation& comp,
                                 xla::HloComputationProto* proto);
  absl::Status ExportInstruction(const HloComputation& comp,
                                 const HloInstruction& instr,
                                 xla::HloInstructionProto* proto);
  absl::Status ExportProgramShape(const HloComputation& comp,
                                  xla::ProgramShapeProto* proto);
  absl::Status ExportModuleFields(xla::HloModuleProto* proto);

  const HloModule& module_;
  absl::flat_hash_map<const HloComputation*, int64_t> comp_ids_;
  xla::HloScheduleProto* schedule_ = nullptr;  // scheduled modules
  absl::flat_hash_map<const HloInstruction*, int64_t> instr_ids_;
  int64_t next_instr_id_ = 1;
};

absl::StatusOr<xla::HloModuleProto> Exporter::Run() {
  if (module_.entry() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("module '", module_.name(), "' has no entry computation"));
  }
  std::vector<const HloComputation*> comps;
  for (const auto& c : module_.computations()) comps.push_back(c.get());
  auto callees = [](const HloComputation* c) {
    std::vector<const HloComputation*> out;
    for (const auto& i : c->instructions()) {
      for (const HloComputation* callee : i->called_computations()) out.push_back(callee);
    }
    return out;
  };
  ASSIGN_OR_RETURN(
      std::vector<const HloComputation*> order,
      StableTopoOrder<HloComputation>(comps, callees, [](const HloComputation* c) {
        return absl::StrCat("computation '", c->name(), "' (through its callees)");
      }));
  for (const HloComputation* c : order) {
    comp_ids_[c] = static_cast<int64_t>(comp_ids_.size()) + 1;
  }
  if (!comp_ids_.contains(module_.entry())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "entry computation '", module_.entry()->name(), "' is not in module '",
        module_.name(), "'"));
  }

  xla::HloModuleProto proto;
  proto.set_name(module_.name());
  if (module_.is_scheduled()) schedule_ = proto.mutable_schedule();
  for (const HloComputation* c : order) {
    RETURN_IF_ERROR(ExportComputation(*c, proto.add_computations()));
  }
  proto.set_entry_computation_name(module_.entry()->name());
  proto.set_entry_computation_id(comp_ids_.at(module_.entry()));
  RETURN_IF_ERROR(ExportModuleFields(&proto));
  return proto;
}

absl::Status Exporter::ExportProgramShape(const HloComputation& comp,
                                          xla::ProgramShapeProto* proto) {
  for (int64_t i = 0; i < comp.num_parameters(); ++i) {
    const HloInstruction* p = comp.parameter(i);
    if (p == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(Where(comp), ": parameter ", i, " is missing"));
    }
    ShapeToProto(p->shape(), proto->add_parameters());
    proto->add_parameter_names(p->name());
  }
  if (comp.root() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(Where(comp), ": has no root"));
  }
  ShapeToProto(comp.root()->shape(), proto->mutable_result());
  return absl::OkStatus();
}

absl::Status Exporter::ExportComputation(const HloComputation& comp,
                                         xla::HloComputationProto* proto) {
  proto->set_name(comp.name());
  proto->set_id(comp_ids_.at(&comp));
  proto->set_is_fusion_computation(comp.is_fusion_computation());
  proto->set_execution_thread(comp.execution_thread());
  std::vector<const HloInstruction*> instrs;
  for (const auto& i : comp.instructions()) instrs.push_back(i.get());
  auto deps = [](const HloInstruction* i) {
    std::vector<const HloInstruction*> out(i->operands().begin(), i->operands().end());
    out.insert(out.end(), i->control_predecessors().begin(),
               i->control_predecessors().end());
    return out;
  };
  ASSIGN_OR_RETURN(
      std::vector<const HloInstruction*> order,
      StableTopoOrder<HloInstruction>(instrs, deps, [&](const HloInstruction* i) {
        return absl::StrCat(Where(comp, i), " (through operands and control predecessors)");
      }));
  for (const HloInstruction* i : order) instr_ids_[i] = next_instr_id_++;
  // A scheduled module's order is its schedule (HloScheduleProto), which
  // XLA keeps for every computation but fusion bodies (HloSchedule::Verify
  // refuses a sequence for one).
  if (module_.is_scheduled() && !comp.is_fusion_computation()) {
    auto& seq = (*schedule_->mutable_sequences())[comp_ids_.at(&comp)];
    for (const HloInstruction* i : order) seq.add_instruction_ids(instr_ids_.at(i));
  }
  for (const HloInstruction* i : order) {
    RETURN_IF_ERROR(ExportInstruction(comp, *i, proto->add_instructions()));
  }
  RETURN_IF_ERROR(ExportProgramShape(comp, proto->mutable_program_shape()));
  auto root = instr_ids_.find(comp.root());
  if (root == instr_ids_.end() || comp.root()->parent() != &comp) {
    return absl::FailedPreconditionError(
        absl::StrCat(Where(comp), ": root is not one of its instructions"));
  }
  proto->set_root_id(root->second);
  return absl::OkStatus();
}

absl::Status Exporter::ExportInstruction(const HloComputation& comp,
                                         const HloInstruction& instr,
                                         xla::HloInstructionProto* p) {
  const HloOpcode op = instr.opcode();
  const HloAttributes& a = instr.attrs();
  const std::string where = Where(comp, &instr);
  p->set_name(instr.name());
  p->set_opcode(std::string(HloOpcodeString(op)));
  ShapeToProto(instr.shape(), p->mutable_shape());
  p->set_id(instr_ids_.at(&instr));
  for (const HloInstruction* operand : instr.operands()) {
    p->add_operand_ids(instr_ids_.at(operand));  // in scope: checked by the sort
  }
  for (const HloInstruction* pred : instr.control_predecessors()) {
    p->add_control_predecessor_ids(instr_ids_.at(pred));
  }
  for (const HloComputation* callee : instr.called_computations()) {
    auto it = comp_ids_.find(callee);
    if (it == comp_ids_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": calls a computation outside the module"));
    }
    p->add_called_computation_ids(it->second);
  }
  if (!instr.metadata().empty()) MetadataToProto(instr.metadata(), p->mutable_metadata());
  if (!instr.frontend_attributes().empty()) {
    FrontendAttributesToProto(instr.frontend_attributes(), p->mutable_frontend_attributes());
  }
  if (instr.sharding().has_value()) ShardingToProto(*instr.sharding(), p->mutable_sharding());

  // A constant whose values were elided ({...}) is written without a
  // literal, which XLA's loader also accepts.
  if (op == HloOpcode::kConstant && instr.has_literal()) {
    absl::Status s = LiteralToProto(instr.literal(), instr.shape(), p->mutable_literal());
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
  }
  if (op == HloOpcode::kParameter) p->set_parameter_number(a.parameter_number);
  if (op == HloOpcode::kGetTupleElement) p->set_tuple_index(a.tuple_index);
  if (op == HloOpcode::kFusion) p->set_fusion_kind(std::string(FusionKindString(a.fusion_kind)));
  if (op == HloOpcode::kCompare) {
    p->set_comparison_direction(std::string(ComparisonDirectionString(a.comparison_direction)));
    p->set_comparison_type(a.comparison_type);
  }
  // The remaining attributes are written whenever set, whatever the opcode:
  // each opcode reads only its own, and nothing is lost on a round trip.
  for (int64_t d : a.dimensions) p->add_dimensions(d);
  for (const SliceDimension& s : a.slice) {
    auto* sd = p->add_slice_dimensions();
    sd->set_start(s.start);
    sd->set_limit(s.limit);
    sd->set_stride(s.stride);
  }
  for (int64_t s : a.dynamic_slice_sizes) p->add_dynamic_slice_sizes(s);
  for (const auto& sizes : a.permute_slice_sizes) {
    for (int64_t s : sizes) p->add_dynamic_slice_sizes(s);
  }
  if (a.is_host_transfer) p->set_is_host_transfer(true);
  if (!a.parameter_replication.empty()) {
    for (bool b : a.parameter_replication) {
      p->mutable_parameter_replication()->add_replicated_at_leaf_buffers(b);
    }
  }
  if (a.is_composite) p->set_is_composite(true);
  if (!a.statistics.empty()) {
    auto* s = p->mutable_statistics_viz();
    s->set_stat_index_to_visualize(a.statistics.visualizing_index);
    for (const auto& [name, v] : a.statistics.statistics) {
      auto* st = s->add_statistics();
      st->set_stat_name(name);
      st->set_stat_val(v);
    }
  }
  if (a.result_accuracy.highest) {
    p->mutable_result_accuracy()->set_mode(xla::ResultAccuracy::HIGHEST);
  } else if (a.result_accuracy.has_tolerance) {
    auto* t = p->mutable_result_accuracy()->mutable_tolerance();
    t->set_atol(a.result_accuracy.atol);
    t->set_rtol(a.result_accuracy.rtol);
    t->set_ulps(a.result_accuracy.ulps);
  }
  if (a.cross_program_prefetch_index) {
    p->set_cross_program_prefetch_index(static_cast<int32_t>(*a.cross_program_prefetch_index));
  }
  if (!a.async_execution_thread.empty()) p->set_async_execution_thread(a.async_execution_thread);
  for (const PaddingDimension& pd : a.padding) {
    auto* d = p->mutable_padding_config()->add_dimensions();
    d->set_edge_padding_low(pd.edge_padding_low);
    d->set_edge_padding_high(pd.edge_padding_high);
    d->set_interior_padding(pd.interior_padding);
  }
  for (const WindowDimension& wd : a.window) {
    auto* d = p->mutable_window()->add_dimensions();
    d->set_size(wd.size);
    d->set_stride(wd.stride);
    d->set_padding_low(wd.padding_low);
    d->set_padding_high(wd.padding_high);
    d->set_window_dilation(wd.window_dilation);
    d->set_base_dilation(wd.base_dilation);
    d->set_window_reversal(wd.window_reversal);
  }
  if (op == HloOpcode::kDot || a.dot != DotDimensionNumbers{}) {
    auto* d = p->mutable_dot_dimension_numbers();
    for (int64_t x : a.dot.lhs_contracting_dimensions) d->add_lhs_contracting_dimensions(x);
    for (int64_t x : a.dot.rhs_contracting_dimensions) d->add_rhs_contracting_dimensions(x);
    for (int64_t x : a.dot.lhs_batch_dimensions) d->add_lhs_batch_dimensions(x);
    for (int64_t x : a.dot.rhs_batch_dimensions) d->add_rhs_batch_dimensions(x);
  }
  if (op == HloOpcode::kConvolution) {
    auto* c = p->mutable_convolution_dimension_numbers();
    c->set_input_batch_dimension(a.conv.input_batch_dimension);
    c->set_input_feature_dimension(a.conv.input_feature_dimension);
    for (int64_t x : a.conv.input_spatial_dimensions) c->add_input_spatial_dimensions(x);
    c->set_kernel_input_feature_dimension(a.conv.kernel_input_feature_dimension);
    c->set_kernel_output_feature_dimension(a.conv.kernel_output_feature_dimension);
    for (int64_t x : a.conv.kernel_spatial_dimensions) c->add_kernel_spatial_dimensions(x);
    c->set_output_batch_dimension(a.conv.output_batch_dimension);
    c->set_output_feature_dimension(a.conv.output_feature_dimension);
    for (int64_t x : a.conv.output_spatial_dimensions) c->add_output_spatial_dimensions(x);
    p->set_feature_group_count(a.feature_group_count);
    p->set_batch_group_count(a.batch_group_count);
  }
  if (a.is_stable) p->set_is_stable(true);
  if (op == HloOpcode::kTopK) {
    p->set_k(a.k);
    p->set_largest(a.largest);
  }
  if (op == HloOpcode::kReducePrecision) {
    p->set_exponent_bits(static_cast<int32_t>(a.exponent_bits));
    p->set_mantissa_bits(static_cast<int32_t>(a.mantissa_bits));
  }
  if (a.dot_algorithm != 0) {
    p->mutable_precision_config()->set_algorithm(
        static_cast<xla::PrecisionConfig::Algorithm>(a.dot_algorithm));
  }
  if (!a.operand_precision.empty() || op == HloOpcode::kDot ||
      op == HloOpcode::kConvolution) {
    // XLA's own writer always lists one precision per dot operand.
    auto* pc = p->mutable_precision_config();
    if (a.operand_precision.empty()) {
      for (int64_t i = 0; i < instr.operand_count(); ++i) {
        pc->add_operand_precision(xla::PrecisionConfig::DEFAULT);
      }
    }
    for (const std::string& name : a.operand_precision) {
      auto value = PrecisionFromString(name);
      if (!value.ok()) return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", value.status().message()));
      pc->add_operand_precision(*value);
    }
  }
  if (op == HloOpcode::kGather || a.gather != GatherDimensionNumbers{}) {
    auto* g = p->mutable_gather_dimension_numbers();
    for (int64_t x : a.gather.offset_dims) g->add_offset_dims(x);
    for (int64_t x : a.gather.collapsed_slice_dims) g->add_collapsed_slice_dims(x);
    for (int64_t x : a.gather.start_index_map) g->add_start_index_map(x);
    g->set_index_vector_dim(a.gather.index_vector_dim);
    for (int64_t x : a.gather.operand_batching_dims) g->add_operand_batching_dims(x);
    for (int64_t x : a.gather.start_indices_batching_dims) {
      g->add_start_indices_batching_dims(x);
    }
  }
  for (int64_t s : a.gather_slice_sizes) p->add_gather_slice_sizes(s);
  if (op == HloOpcode::kScatter || a.scatter != ScatterDimensionNumbers{}) {
    auto* s = p->mutable_scatter_dimension_numbers();
    for (int64_t x : a.scatter.update_window_dims) s->add_update_window_dims(x);
    for (int64_t x : a.scatter.inserted_window_dims) s->add_inserted_window_dims(x);
    for (int64_t x : a.scatter.scatter_dims_to_operand_dims) {
      s->add_scatter_dims_to_operand_dims(x);
    }
    s->set_index_vector_dim(a.scatter.index_vector_dim);
    for (int64_t x : a.scatter.input_batching_dims) s->add_input_batching_dims(x);
    for (int64_t x : a.scatter.scatter_indices_batching_dims) {
      s->add_scatter_indices_batching_dims(x);
    }
  }
  p->set_indices_are_sorted(a.indices_are_sorted);
  p->set_unique_indices(a.unique_indices);
  if (a.channel_id.has_value()) p->set_channel_id(*a.channel_id);
  RETURN_IF_ERROR(ReplicaGroupsToProto(a.replica_groups, p));
  p->set_use_global_device_ids(a.use_global_device_ids);
  p->set_constrain_layout(a.constrain_layout);
  for (const auto& [source, target] : a.source_target_pairs) {
    auto* st = p->add_source_target_pairs();
    st->set_source(source);
    st->set_target(target);
  }
  p->set_custom_call_target(a.custom_call_target);
  p->set_backend_config(a.backend_config);
  p->set_custom_call_api_version(
      static_cast<xla::CustomCallApiVersion>(a.custom_call_api_version));
  p->set_custom_call_has_side_effect(a.custom_call_has_side_effect);
  return proto_internal::OpAttributesToProto(instr, p);
}

absl::Status Exporter::ExportModuleFields(xla::HloModuleProto* proto) {
  const HloComputation& entry = *module_.entry();
  // host_program_shape: the entry layout the module declared, else the entry
  // computation's own signature. XLA's loader refuses a module without it.
  xla::ProgramShapeProto* host = proto->mutable_host_program_shape();
  RETURN_IF_ERROR(ExportProgramShape(entry, host));
  const auto& layouts = module_.entry_parameter_layouts();
  if (layouts.has_value() &&
      static_cast<int64_t>(layouts->size()) == entry.num_parameters()) {
    for (int64_t i = 0; i < entry.num_parameters(); ++i) {
      if (!(*layouts)[i].Compatible(entry.parameter(i)->shape())) continue;
      host->mutable_parameters(i)->Clear();
      ShapeToProto((*layouts)[i], host->mutable_parameters(i));
    }
    if (module_.entry_result_layout().Compatible(entry.root()->shape())) {
      host->mutable_result()->Clear();
      ShapeToProto(module_.entry_result_layout(), host->mutable_result());
    }
  }
  for (const InputOutputAlias& alias : module_.input_output_aliases()) {
    auto* e = proto->mutable_input_output_alias()->add_entries();
    for (int64_t x : alias.output_index) e->add_output_shape_index(x);
    e->set_parameter_number(alias.parameter_number);
    for (int64_t x : alias.parameter_index) e->add_parameter_shape_index(x);
    e->set_kind(alias.must_alias ? xla::MUST_ALIAS : xla::MAY_ALIAS);
  }
  if (!module_.frontend_attributes().empty()) {
    FrontendAttributesToProto(module_.frontend_attributes(),
                              proto->mutable_frontend_attributes());
  }
  for (const BufferDonor& d : module_.buffer_donors()) {
    auto* e = proto->mutable_buffer_donor()->add_entries();
    e->set_parameter_number(d.parameter_number);
    for (int64_t x : d.parameter_index) e->add_parameter_shape_index(x);
  }
  const StackFrameIndex& sf = module_.stack_frame_index();
  if (!sf.empty()) {
    auto* s = proto->mutable_stack_frame_index();
    for (const std::string& n : sf.file_names) s->add_file_names(n);
    for (const std::string& n : sf.function_names) s->add_function_names(n);
    for (const auto& l : sf.file_locations) {
      auto* pl = s->add_file_locations();
      pl->set_file_name_id(l.file_name_id);
      pl->set_function_name_id(l.function_name_id);
      pl->set_line(l.line);
      pl->set_end_line(l.end_line);
      pl->set_column(l.column);
      pl->set_end_column(l.end_column);
    }
    for (const auto& f : sf.frames) {
      auto* pf = s->add_stack_frames();
      pf->set_file_location_id(f.file_location_id);
      pf->set_parent_frame_id(f.parent_frame_id);
    }
  }
  // replica_count / num_partitions are compile options in XLA, not module
  // fields. The one module field that carries them is the static device
  // assignment (replica_count x computation_count), which XLA's loader reads
  // into the module config; we write XLA's default placement
  // (device = partition * replicas + replica) only when it says more than 1x1.
  const int64_t replicas = module_.replica_count();
  const int64_t partitions = module_.num_partitions();
  if (replicas < 1 || partitions < 1 || replicas > kMaxDevices / partitions) {
    return absl::FailedPreconditionError(
        absl::StrCat("module '", module_.name(), "': replica_count ", replicas,
                     " x num_partitions ", partitions, " is not a valid device count"));
  }
  if (replicas * partitions > 1) {
    auto* da = proto->mutable_device_assignment();
    da->set_replica_count(static_cast<int32_t>(replicas));
    da->set_computation_count(static_cast<int32_t>(partitions));
    for (int64_t c = 0; c < partitions; ++c) {
      auto* devices = da->add_computation_devices();
      for (int64_t r = 0; r < replicas; ++r) devices->add_replica_device_ids(c * replicas + r);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ModuleToProtoBytes(const HloModule& module) {
  ASSIGN_OR_RETURN(xla::HloModuleProto proto, Exporter(module).Run());
  std::string bytes;
  {
    // Deterministic: map fields (frontend attributes) in key order, so equal
    // modules give equal bytes.
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!proto.SerializeToCodedStream(&coded)) {
      return absl::InternalError(
          absl::StrCat("module '", module.name(), "': HloModuleProto serialization failed"));
    }
  }
  return bytes;
}

absl::StatusOr<std::string> ModuleToProtoJson(const HloModule& module) {
  // Through the deterministic binary form: MessageToJsonString walks map
  // fields (frontend attributes) in hash order, BinaryToJsonString in wire
  // order, which deterministic serialization sorts by key.
  ASSIGN_OR_RETURN(std::string bytes, ModuleToProtoBytes(module));
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  // XLA's hlo.proto warns that its JSON form uses the proto field names.
  options.preserve_proto_field_names = true;
  static google::protobuf::util::TypeResolver* resolver =
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          "type.googleapis.com", google::protobuf::DescriptorPool::generated_pool());
  const std::string type_url =
      absl::StrCat("type.googleapis.com/", xla::HloModuleProto::descriptor()->full_name());
  std::string json;
  auto status = google::protobuf::util::BinaryToJsonString(resolver, type_url, bytes,
                                                           &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("module '", module.name(),
                                            "': JSON conversion failed: ",
                                            std::string(status.message())));
  }
  return RespellNegativeZeros(json);
}

namespace proto_internal {

// See proto_internal.h for why.
std::string RespellNegativeZeros(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    out.push_back(c);
    if (in_string) {
      if (c == '\\' && i + 1 < json.size()) {
        out.push_back(json[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c == '-' && i + 1 < json.size() && json[i + 1] == '0') {
      const char next = i + 2 < json.size() ? json[i + 2] : ',';
      if (next == ',' || next == ']' || next == '}' || next == ' ' || next == '\n' ||
          next == '\r' || next == '\t') {
        out += "0.0";
        ++i;
      }
    }
  }
  return out;
}

}  // namespace proto_internal
}  // namespace tpuoff::hlo
