// HloModuleProto (binary or JSON) -> IR. The input is untrusted: every id,
// count, index and size is checked before it is used, and errors name the
// computation, the instruction and the field.
#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/json_util.h"
#include "hlo/proto/proto_internal.h"
#include "hlo/proto/proto_io.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo {
namespace {

using proto_internal::FrontendAttributesFromProto;
using proto_internal::LiteralFromProto;
using proto_internal::MetadataFromProto;
using proto_internal::PrecisionToString;
using proto_internal::ReplicaGroupsFromProto;
using proto_internal::RespellNegativeZeros;
using proto_internal::ShapeFromProto;
using proto_internal::ShardingFromProto;
using proto_internal::kMaxDevices;

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// Prefixes a status message with the place it arose in.
absl::Status Annotate(const absl::Status& s, absl::string_view where) {
  return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
}

// Fixed arity and, for variadic opcodes, the minimum from the opcode table;
// and the parity of reduce / reduce-window / scatter operand lists.
absl::Status CheckOperandCount(HloOpcode op, int64_t n, absl::string_view where) {
  const int arity = OpcodeArity(op);
  if (arity != kVariadic) {
    if (n != arity) {
      return Invalid(where, absl::StrCat("opcode ", HloOpcodeString(op), " takes ", arity,
                                         " operands but operand_ids has ", n));
    }
    return absl::OkStatus();
  }
  const int64_t min = OpcodeMinOperands(op);
  if (n < min) {
    return Invalid(where, absl::StrCat("opcode ", HloOpcodeString(op), " needs at least ",
                                       min, " operands but operand_ids has ", n));
  }
  if ((op == HloOpcode::kReduce || op == HloOpcode::kReduceWindow) && n % 2 != 0) {
    return Invalid(where, absl::StrCat(HloOpcodeString(op), " needs as many inits as inputs but "
                                       "operand_ids has ", n, " entries"));
  }
  if (op == HloOpcode::kScatter && n % 2 != 1) {
    return Invalid(where, absl::StrCat("scatter needs (operands, indices, updates) "
                                       "in equal numbers but operand_ids has ", n));
  }
  return absl::OkStatus();
}

absl::Status CheckCalledCount(HloOpcode op, int64_t called, int64_t operands,
                              absl::string_view where) {
  int64_t want = 0;
  switch (op) {
    case HloOpcode::kReduce:
    case HloOpcode::kReduceWindow:
    case HloOpcode::kAllReduce:
    case HloOpcode::kReduceScatter:
    case HloOpcode::kScatter:
    case HloOpcode::kCall:
    case HloOpcode::kFusion:
    case HloOpcode::kSort:
    case HloOpcode::kMap:
    case HloOpcode::kAllReduceStart:
    case HloOpcode::kAsyncStart:
      want = 1;
      break;
    case HloOpcode::kWhile:
    case HloOpcode::kSelectAndScatter:
      want = 2;  // body, condition / select, scatter
      break;
    case HloOpcode::kConditional:
      want = operands - 1;  // one branch per branch operand
      if (want < 1) want = 1;
      break;
    case HloOpcode::kCustomCall:
      return absl::OkStatus();
    case HloOpcode::kAsyncUpdate:
    case HloOpcode::kAsyncDone:
      if (called > 1) want = 1;  // 0 or 1: the async-start's computation
      else return absl::OkStatus();
      break;
    default:
      break;
  }
  if (called != want) {
    return Invalid(where, absl::StrCat("opcode ", HloOpcodeString(op), " needs ", want,
                                       " called_computation_ids but has ", called));
  }
  return absl::OkStatus();
}

// Whether `index` walks a valid path into `shape`.
bool IsValidShapeIndex(const Shape& shape, const std::vector<int64_t>& index) {
  const Shape* s = &shape;
  for (int64_t i : index) {
    if (!s->IsTuple() || i < 0 || i >= s->tuple_size()) return false;
    s = &s->tuple_shapes(i);
  }
  return true;
}

class Importer {
 public:
  absl::StatusOr<std::unique_ptr<HloModule>> Run(const xla::HloModuleProto& proto);

 private:
  absl::StatusOr<int> FindEntry(const xla::HloModuleProto& proto);
  absl::StatusOr<std::unique_ptr<HloComputation>> ImportComputation(
      const xla::HloModuleProto& module, int index);
  absl::Status ImportAttributes(const xla::HloInstructionProto& p, HloOpcode op,
                                const std::string& where, HloAttributes* a);
  absl::Status ImportModuleFields(const xla::HloModuleProto& proto, HloModule* module);

  // Computations imported so far, by proto id.
  absl::flat_hash_map<int64_t, HloComputation*> computations_;
  // Every computation id in the proto, to tell "later" from "missing".
  absl::flat_hash_set<int64_t> all_comp_ids_;
};

absl::StatusOr<int> Importer::FindEntry(const xla::HloModuleProto& proto) {
  const std::string& name = proto.entry_computation_name();
  for (int i = 0; i < proto.computations_size(); ++i) {
    if (proto.computations(i).id() != proto.entry_computation_id()) continue;
    if (!name.empty() && proto.computations(i).name() != name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "entry_computation_id ", proto.entry_computation_id(), " names computation '",
          proto.computations(i).name(), "' but entry_computation_name is '", name, "'"));
    }
    return i;
  }
  if (proto.entry_computation_id() == 0 && !name.empty()) {
    for (int i = 0; i < proto.computations_size(); ++i) {
      if (proto.computations(i).name() == name) return i;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "module '", proto.name(), "': missing entry computation (entry_computation_id ",
      proto.entry_computation_id(), ", entry_computation_name '", name,
      "' match no computation)"));
}

absl::Status Importer::ImportAttributes(const xla::HloInstructionProto& p, HloOpcode op,
                                        const std::string& where, HloAttributes* a) {
  a->parameter_number = p.parameter_number();
  a->tuple_index = p.tuple_index();
  a->dimensions.assign(p.dimensions().begin(), p.dimensions().end());
  for (const auto& s : p.slice_dimensions()) {
    a->slice.push_back({s.start(), s.limit(), s.stride()});
  }
  if (op == HloOpcode::kCollectivePermute || op == HloOpcode::kCollectivePermuteStart) {
    // In-place form: the slice sizes of every pair, flattened (XLA's
    // dynamic_slice_sizes); split by the rank of the first input.
    a->permute_slice_sizes.clear();
  } else {
    a->dynamic_slice_sizes.assign(p.dynamic_slice_sizes().begin(),
                                  p.dynamic_slice_sizes().end());
  }
  a->is_host_transfer = p.is_host_transfer();
  a->parameter_replication.assign(p.parameter_replication().replicated_at_leaf_buffers().begin(),
                                  p.parameter_replication().replicated_at_leaf_buffers().end());
  a->is_composite = p.is_composite();
  a->statistics.visualizing_index = p.statistics_viz().stat_index_to_visualize();
  for (const auto& st : p.statistics_viz().statistics()) {
    a->statistics.statistics.emplace_back(st.stat_name(), st.stat_val());
  }
  if (p.has_result_accuracy()) {
    const auto& r = p.result_accuracy();
    if (r.has_tolerance()) {
      const auto& t = r.tolerance();
      if (!(t.atol() >= 0) || !(t.rtol() >= 0) || t.ulps() < 0) {
        return Invalid(where, "result_accuracy tolerances must be >= 0");
      }
      a->result_accuracy.has_tolerance = true;
      a->result_accuracy.atol = t.atol();
      a->result_accuracy.rtol = t.rtol();
      a->result_accuracy.ulps = t.ulps();
    } else if (r.mode() == xla::ResultAccuracy::HIGHEST) {
      a->result_accuracy.highest = true;
    } else if (r.mode() != xla::ResultAccuracy::DEFAULT) {
      return Invalid(where, "unknown result_accuracy mode");
    }
    if (!a->result_accuracy.IsDefault() && !OpcodeTakesResultAccuracy(op)) {
      return Invalid(where, "result_accuracy on an op that takes none");
    }
  }
  if (p.optional_cross_program_prefetch_index_case() ==
      xla::HloInstructionProto::kCrossProgramPrefetchIndex) {
    a->cross_program_prefetch_index = p.cross_program_prefetch_index();
  }
  a->async_execution_thread = p.async_execution_thread() == "main" ? "" : p.async_execution_thread();
  for (const auto& d : p.padding_config().dimensions()) {
    a->padding.push_back({d.edge_padding_low(), d.edge_padding_high(), d.interior_padding()});
  }
  for (const auto& d : p.window().dimensions()) {
    a->window.push_back({d.size(), d.stride(), d.padding_low(), d.padding_high(),
                         d.window_dilation(), d.base_dilation(), d.window_reversal()});
  }
  if (op == HloOpcode::kCompare) {
    if (p.comparison_direction().empty()) {
      return Invalid(where, "compare has no comparison_direction");
    }
    auto dir = ParseComparisonDirection(p.comparison_direction());
    if (!dir.ok()) return Annotate(dir.status(), absl::StrCat(where, ": comparison_direction"));
    a->comparison_direction = *dir;
    const std::string& type = p.comparison_type();
    if (!type.empty() && type != "FLOAT" && type != "TOTALORDER" && type != "SIGNED" &&
        type != "UNSIGNED") {
      return Invalid(where, absl::StrCat("unknown comparison_type '", type, "'"));
    }
    a->comparison_type = type;
  }
  const auto& dd = p.dot_dimension_numbers();
  a->dot.lhs_contracting_dimensions.assign(dd.lhs_contracting_dimensions().begin(),
                                           dd.lhs_contracting_dimensions().end());
  a->dot.rhs_contracting_dimensions.assign(dd.rhs_contracting_dimensions().begin(),
                                           dd.rhs_contracting_dimensions().end());
  a->dot.lhs_batch_dimensions.assign(dd.lhs_batch_dimensions().begin(),
                                     dd.lhs_batch_dimensions().end());
  a->dot.rhs_batch_dimensions.assign(dd.rhs_batch_dimensions().begin(),
                                     dd.rhs_batch_dimensions().end());
  bool all_default = true;
  for (int i = 0; i < p.precision_config().operand_precision_size(); ++i) {
    const int value = p.precision_config().operand_precision(i);
    ASSIGN_OR_RETURN(std::string name,
                     PrecisionToString(value, absl::StrCat(where, ": precision_config")));
    all_default = all_default && value == xla::PrecisionConfig::DEFAULT;
    a->operand_precision.push_back(std::move(name));
  }
  // All-DEFAULT is what XLA writes for "unspecified"; the IR says that with
  // an empty list.
  if (all_default) a->operand_precision.clear();
  a->dot_algorithm = static_cast<int>(p.precision_config().algorithm());
  if (a->dot_algorithm < 0 || a->dot_algorithm >= kNumDotAlgorithms) {
    return Invalid(where, absl::StrCat("unknown precision_config.algorithm ", a->dot_algorithm));
  }
  if (op == HloOpcode::kConvolution) {
    const auto& c = p.convolution_dimension_numbers();
    a->conv.input_batch_dimension = c.input_batch_dimension();
    a->conv.input_feature_dimension = c.input_feature_dimension();
    a->conv.input_spatial_dimensions.assign(c.input_spatial_dimensions().begin(),
                                            c.input_spatial_dimensions().end());
    a->conv.kernel_input_feature_dimension = c.kernel_input_feature_dimension();
    a->conv.kernel_output_feature_dimension = c.kernel_output_feature_dimension();
    a->conv.kernel_spatial_dimensions.assign(c.kernel_spatial_dimensions().begin(),
                                             c.kernel_spatial_dimensions().end());
    a->conv.output_batch_dimension = c.output_batch_dimension();
    a->conv.output_feature_dimension = c.output_feature_dimension();
    a->conv.output_spatial_dimensions.assign(c.output_spatial_dimensions().begin(),
                                             c.output_spatial_dimensions().end());
    // Zero means "unset" in XLA's proto: one group.
    a->feature_group_count = std::max<int64_t>(p.feature_group_count(), 1);
    a->batch_group_count = std::max<int64_t>(p.batch_group_count(), 1);
  }
  a->is_stable = p.is_stable();
  a->k = p.k();
  a->largest = op == HloOpcode::kTopK ? p.largest() : true;
  a->exponent_bits = p.exponent_bits();
  a->mantissa_bits = p.mantissa_bits();
  const auto& g = p.gather_dimension_numbers();
  a->gather.offset_dims.assign(g.offset_dims().begin(), g.offset_dims().end());
  a->gather.collapsed_slice_dims.assign(g.collapsed_slice_dims().begin(),
                                        g.collapsed_slice_dims().end());
  a->gather.start_index_map.assign(g.start_index_map().begin(), g.start_index_map().end());
  a->gather.index_vector_dim = g.index_vector_dim();
  a->gather.operand_batching_dims.assign(g.operand_batching_dims().begin(),
                                         g.operand_batching_dims().end());
  a->gather.start_indices_batching_dims.assign(g.start_indices_batching_dims().begin(),
                                               g.start_indices_batching_dims().end());
  a->gather_slice_sizes.assign(p.gather_slice_sizes().begin(), p.gather_slice_sizes().end());
  const auto& s = p.scatter_dimension_numbers();
  a->scatter.update_window_dims.assign(s.update_window_dims().begin(),
                                       s.update_window_dims().end());
  a->scatter.inserted_window_dims.assign(s.inserted_window_dims().begin(),
                                         s.inserted_window_dims().end());
  a->scatter.scatter_dims_to_operand_dims.assign(s.scatter_dims_to_operand_dims().begin(),
                                                 s.scatter_dims_to_operand_dims().end());
  a->scatter.index_vector_dim = s.index_vector_dim();
  a->scatter.input_batching_dims.assign(s.input_batching_dims().begin(),
                                        s.input_batching_dims().end());
  a->scatter.scatter_indices_batching_dims.assign(s.scatter_indices_batching_dims().begin(),
                                                  s.scatter_indices_batching_dims().end());
  a->indices_are_sorted = p.indices_are_sorted();
  a->unique_indices = p.unique_indices();
  // Non-positive channel ids mean "none", as in XLA.
  if (p.channel_id() > 0) a->channel_id = p.channel_id();
  ASSIGN_OR_RETURN(a->replica_groups, ReplicaGroupsFromProto(p, where));
  a->use_global_device_ids = p.use_global_device_ids();
  a->constrain_layout = p.constrain_layout();
  for (const auto& st : p.source_target_pairs()) {
    a->source_target_pairs.emplace_back(st.source(), st.target());
  }
  a->custom_call_target = p.custom_call_target();
  a->backend_config = p.backend_config();
  if (!xla::CustomCallApiVersion_IsValid(p.custom_call_api_version())) {
    return Invalid(where, absl::StrCat("unknown custom_call_api_version ",
                                       static_cast<int>(p.custom_call_api_version())));
  }
  a->custom_call_api_version = p.custom_call_api_version();
  a->custom_call_has_side_effect = p.custom_call_has_side_effect();
  if (op == HloOpcode::kFusion) {
    auto kind = ParseFusionKind(p.fusion_kind());
    if (!kind.ok()) return Annotate(kind.status(), absl::StrCat(where, ": fusion_kind"));
    a->fusion_kind = *kind;
  }
  return proto_internal::OpAttributesFromProto(p, op, where, a);
}

absl::StatusOr<std::unique_ptr<HloComputation>> Importer::ImportComputation(
    const xla::HloModuleProto& module, int index) {
  const xla::HloComputationProto& cp = module.computations(index);
  const std::string cwhere =
      absl::StrCat("computation '", cp.name(), "' (computations[", index, "])");
  if (cp.instructions_size() == 0) return Invalid(cwhere, "has no instructions");
  auto comp = std::make_unique<HloComputation>(cp.name());
  comp->set_is_fusion_computation(cp.is_fusion_computation());
  comp->set_execution_thread(cp.execution_thread());

  // Pre-pass: all ids (to tell "later" from "missing") and the parameter count.
  absl::flat_hash_set<int64_t> all_ids;
  int64_t num_params = 0;
  for (const auto& ip : cp.instructions()) {
    if (!all_ids.insert(ip.id()).second) {
      return Invalid(cwhere, absl::StrCat("duplicate instruction id ", ip.id(),
                                          " (instruction '", ip.name(), "')"));
    }
    if (ip.opcode() == "parameter") ++num_params;
  }
  absl::flat_hash_map<int64_t, HloInstruction*> defined;
  std::vector<bool> param_seen(num_params, false);
  auto resolve = [&](int64_t id, const std::string& where,
                     absl::string_view field) -> absl::StatusOr<HloInstruction*> {
    auto it = defined.find(id);
    if (it != defined.end()) return it->second;
    if (all_ids.contains(id)) {
      return Invalid(where, absl::StrCat(field, " = ", id, " names a later instruction or "
                                         "itself (operands must come before users)"));
    }
    return Invalid(where, absl::StrCat(field, " = ", id, " names no instruction in ",
                                       "computation '", cp.name(), "'"));
  };

  for (int k = 0; k < cp.instructions_size(); ++k) {
    const xla::HloInstructionProto& ip = cp.instructions(k);
    const std::string where = absl::StrCat("computation '", cp.name(), "', instruction '",
                                           ip.name(), "' (id ", ip.id(), ")");
    std::optional<HloOpcode> op = StringToHloOpcode(ip.opcode());
    if (!op.has_value()) {
      return absl::UnimplementedError(
          absl::StrCat(where, ": unknown opcode '", ip.opcode(), "'"));
    }
    if (!ip.has_shape()) return Invalid(where, "shape is missing");
    ASSIGN_OR_RETURN(Shape shape, ShapeFromProto(ip.shape(), absl::StrCat(where, ": shape")));

    std::vector<HloInstruction*> operands;
    for (int i = 0; i < ip.operand_ids_size(); ++i) {
      ASSIGN_OR_RETURN(HloInstruction * operand,
                       resolve(ip.operand_ids(i), where, absl::StrCat("operand_ids[", i, "]")));
      operands.push_back(operand);
    }
    RETURN_IF_ERROR(CheckOperandCount(*op, ip.operand_ids_size(), where));

    std::vector<HloComputation*> called;
    for (int i = 0; i < ip.called_computation_ids_size(); ++i) {
      const int64_t id = ip.called_computation_ids(i);
      auto it = computations_.find(id);
      if (it == computations_.end()) {
        return Invalid(where, absl::StrCat(
            "called_computation_ids[", i, "] = ", id,
            all_comp_ids_.contains(id)
                ? " names this or a later computation (callees must come before "
                  "callers; recursion is not allowed)"
                : " names no computation"));
      }
      called.push_back(it->second);
    }
    RETURN_IF_ERROR(CheckCalledCount(*op, ip.called_computation_ids_size(),
                                     ip.operand_ids_size(), where));
    // async-update/-done continue their operand's wrapped computation.
    if ((*op == HloOpcode::kAsyncUpdate || *op == HloOpcode::kAsyncDone) &&
        operands.size() == 1 && IsAsyncOpcode(operands[0]->opcode()) &&
        operands[0]->opcode() != HloOpcode::kAsyncDone) {
      if (called.empty()) called = operands[0]->called_computations();
      if (called != operands[0]->called_computations()) {
        return Invalid(where, "calls another computation than the async-start it continues");
      }
    }

    HloAttributes attrs;
    RETURN_IF_ERROR(ImportAttributes(ip, *op, where, &attrs));
    if ((*op == HloOpcode::kCollectivePermute || *op == HloOpcode::kCollectivePermuteStart) &&
        ip.dynamic_slice_sizes_size() > 0 && !operands.empty()) {
      const Shape& in = operands[0]->shape();
      const int64_t rank = in.IsTuple() && in.tuple_size() > 0 ? in.tuple_shapes(0).rank()
                                                               : in.rank();
      if (rank < 1 || ip.dynamic_slice_sizes_size() % rank != 0) {
        return Invalid(where, "dynamic_slice_sizes is not a list of slices of the input's rank");
      }
      for (int i = 0; i < ip.dynamic_slice_sizes_size(); i += rank) {
        attrs.permute_slice_sizes.emplace_back(ip.dynamic_slice_sizes().begin() + i,
                                               ip.dynamic_slice_sizes().begin() + i + rank);
      }
    }
    // XLA writes the comparison type always but prints it only when it is
    // not the default for the operand type; the IR keeps only non-defaults.
    if (*op == HloOpcode::kCompare && !operands.empty() && operands[0]->shape().IsArray()) {
      const PrimitiveType t = operands[0]->shape().element_type();
      const char* def = IsFloatingPoint(t) ? "FLOAT" : IsSignedInteger(t) ? "SIGNED" : "UNSIGNED";
      if (attrs.comparison_type == def) attrs.comparison_type.clear();
    }
    if (*op == HloOpcode::kParameter) {
      const int64_t n = ip.parameter_number();
      if (n < 0 || n >= num_params) {
        return Invalid(where, absl::StrCat("parameter_number ", n, " is outside 0..",
                                           num_params - 1));
      }
      if (param_seen[n]) {
        return Invalid(where, absl::StrCat("parameter_number ", n, " is used twice"));
      }
      param_seen[n] = true;
    }
    if (*op == HloOpcode::kGetTupleElement) {
      const Shape& tuple = operands[0]->shape();
      if (!tuple.IsTuple() || ip.tuple_index() < 0 || ip.tuple_index() >= tuple.tuple_size()) {
        return Invalid(where, absl::StrCat("tuple_index ", ip.tuple_index(),
                                           " is out of range for operand shape ",
                                           tuple.ToString()));
      }
    }
    std::optional<Literal> literal;
    // A constant without a literal has unknown values (elided; `run`
    // refuses it), as XLA's loader allows.
    if (*op == HloOpcode::kConstant && ip.has_literal()) {
      ASSIGN_OR_RETURN(literal, LiteralFromProto(ip.literal(), where));
      if (!literal->shape().Compatible(shape)) {
        return Invalid(where, absl::StrCat("literal shape ", literal->shape().ToString(),
                                           " differs from the instruction shape ",
                                           shape.ToString()));
      }
    }
    std::optional<HloSharding> sharding;
    if (ip.has_sharding()) {
      ASSIGN_OR_RETURN(sharding, ShardingFromProto(ip.sharding(),
                                                   absl::StrCat(where, ": sharding")));
    }
    std::vector<HloInstruction*> control;
    for (int i = 0; i < ip.control_predecessor_ids_size(); ++i) {
      ASSIGN_OR_RETURN(HloInstruction * pred,
                       resolve(ip.control_predecessor_ids(i), where,
                               absl::StrCat("control_predecessor_ids[", i, "]")));
      control.push_back(pred);
    }

    auto instr = HloInstruction::Create(*op, std::move(shape), std::move(operands),
                                        std::move(attrs), std::move(called));
    instr->set_name(ip.name());
    if (literal.has_value()) instr->set_literal(*std::move(literal));
    if (ip.has_metadata()) *instr->mutable_metadata() = MetadataFromProto(ip.metadata());
    if (ip.has_frontend_attributes()) {
      *instr->mutable_frontend_attributes() =
          FrontendAttributesFromProto(ip.frontend_attributes());
    }
    instr->set_sharding(std::move(sharding));
    for (HloInstruction* pred : control) instr->AddControlPredecessor(pred);
    defined[ip.id()] = comp->AddInstruction(std::move(instr));
  }
  auto root = defined.find(cp.root_id());
  if (root == defined.end()) {
    return Invalid(cwhere, absl::StrCat("root_id ", cp.root_id(), " names no instruction"));
  }
  comp->set_root(root->second);
  return comp;
}

absl::Status Importer::ImportModuleFields(const xla::HloModuleProto& proto,
                                          HloModule* module) {
  const HloComputation& entry = *module->entry();
  if (proto.has_host_program_shape()) {
    const xla::ProgramShapeProto& host = proto.host_program_shape();
    if (host.parameters_size() != entry.num_parameters()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "host_program_shape has ", host.parameters_size(), " parameters but entry '",
          entry.name(), "' has ", entry.num_parameters()));
    }
    std::vector<Shape> params;
    bool differs = false;
    for (int i = 0; i < host.parameters_size(); ++i) {
      ASSIGN_OR_RETURN(Shape s, ShapeFromProto(host.parameters(i),
                                               absl::StrCat("host_program_shape.parameters[",
                                                            i, "]")));
      if (!s.Compatible(entry.parameter(i)->shape())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "host_program_shape.parameters[", i, "] ", s.ToString(),
            " differs from entry parameter ", entry.parameter(i)->shape().ToString()));
      }
      differs = differs || s != entry.parameter(i)->shape();
      params.push_back(std::move(s));
    }
    ASSIGN_OR_RETURN(Shape result,
                     ShapeFromProto(host.result(), "host_program_shape.result"));
    if (!result.Compatible(entry.root()->shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "host_program_shape.result ", result.ToString(), " differs from entry root ",
          entry.root()->shape().ToString()));
    }
    differs = differs || result != entry.root()->shape();
    // Only a layout that says something the entry does not is kept.
    if (differs) module->set_entry_layout(std::move(params), std::move(result));
  }
  for (int i = 0; i < proto.input_output_alias().entries_size(); ++i) {
    const auto& e = proto.input_output_alias().entries(i);
    const std::string where = absl::StrCat("input_output_alias.entries[", i, "]");
    InputOutputAlias alias;
    alias.output_index.assign(e.output_shape_index().begin(), e.output_shape_index().end());
    alias.parameter_number = e.parameter_number();
    alias.parameter_index.assign(e.parameter_shape_index().begin(),
                                 e.parameter_shape_index().end());
    alias.must_alias = e.kind() == xla::MUST_ALIAS;
    if (alias.parameter_number < 0 || alias.parameter_number >= entry.num_parameters()) {
      return Invalid(where, absl::StrCat("parameter_number ", alias.parameter_number,
                                         " is not an entry parameter"));
    }
    if (!IsValidShapeIndex(entry.root()->shape(), alias.output_index)) {
      return Invalid(where, absl::StrCat("output_shape_index {",
                                         absl::StrJoin(alias.output_index, ","),
                                         "} is not in the entry result shape"));
    }
    if (!IsValidShapeIndex(entry.parameter(alias.parameter_number)->shape(),
                           alias.parameter_index)) {
      return Invalid(where, absl::StrCat("parameter_shape_index {",
                                         absl::StrJoin(alias.parameter_index, ","),
                                         "} is not in the parameter shape"));
    }
    module->mutable_input_output_aliases()->push_back(std::move(alias));
  }
  if (proto.has_frontend_attributes()) {
    *module->mutable_frontend_attributes() =
        FrontendAttributesFromProto(proto.frontend_attributes());
  }
  // The instruction order imported is the proto's, which for XLA's
  // scheduled modules is the schedule's.
  module->set_is_scheduled(proto.has_schedule());
  for (int i = 0; i < proto.buffer_donor().entries_size(); ++i) {
    const auto& e = proto.buffer_donor().entries(i);
    BufferDonor d;
    d.parameter_number = e.parameter_number();
    d.parameter_index.assign(e.parameter_shape_index().begin(), e.parameter_shape_index().end());
    if (d.parameter_number < 0 || d.parameter_number >= entry.num_parameters() ||
        !IsValidShapeIndex(entry.parameter(d.parameter_number)->shape(), d.parameter_index)) {
      return Invalid(absl::StrCat("buffer_donor.entries[", i, "]"),
                     "names a missing entry parameter buffer");
    }
    module->mutable_buffer_donors()->push_back(std::move(d));
  }
  if (proto.has_stack_frame_index()) {
    const auto& s = proto.stack_frame_index();
    StackFrameIndex sf;
    sf.file_names.assign(s.file_names().begin(), s.file_names().end());
    sf.function_names.assign(s.function_names().begin(), s.function_names().end());
    auto in = [](int32_t id, int n) { return id >= 0 && id <= n; };
    bool ok = true;
    for (const auto& l : s.file_locations()) {
      sf.file_locations.push_back({l.file_name_id(), l.function_name_id(), l.line(),
                                   l.end_line(), l.column(), l.end_column()});
      ok &= in(l.file_name_id(), s.file_names_size()) &&
            in(l.function_name_id(), s.function_names_size());
    }
    for (const auto& f : s.stack_frames()) {
      sf.frames.push_back({f.file_location_id(), f.parent_frame_id()});
      ok &= in(f.file_location_id(), s.file_locations_size()) &&
            in(f.parent_frame_id(), s.stack_frames_size());
    }
    if (!ok) return Invalid("stack_frame_index", "an id points outside its table");
    *module->mutable_stack_frame_index() = std::move(sf);
  }
  // As XLA's text form: a stack_frame_id without its frame is dropped.
  const int64_t frames = static_cast<int64_t>(module->stack_frame_index().frames.size());
  for (const auto& c : module->computations()) {
    for (const auto& x : c->instructions()) {
      const int32_t id = x->metadata().stack_frame_id;
      if (id < 0 || id > frames) x->mutable_metadata()->stack_frame_id = 0;
    }
  }
  // See proto_export.cc: the static device assignment carries the replica and
  // partition counts. Its placement itself is not kept.
  if (proto.has_device_assignment()) {
    const auto& da = proto.device_assignment();
    const int64_t replicas = da.replica_count();
    const int64_t partitions = da.computation_count();
    if (replicas < 1 || partitions < 1 || replicas > kMaxDevices / partitions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device_assignment: replica_count ", replicas, " x computation_count ",
          partitions, " is not a valid device count"));
    }
    if (da.computation_devices_size() != partitions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device_assignment: computation_devices has ", da.computation_devices_size(),
          " entries for computation_count ", partitions));
    }
    for (int c = 0; c < da.computation_devices_size(); ++c) {
      const auto& ids = da.computation_devices(c).replica_device_ids();
      if (ids.size() != replicas) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device_assignment: computation_devices[", c, "] has ", ids.size(),
            " replica_device_ids for replica_count ", replicas));
      }
      for (int64_t id : ids) {
        if (id < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "device_assignment: negative device id ", id));
        }
      }
    }
    module->set_replica_count(replicas);
    module->set_num_partitions(partitions);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HloModule>> Importer::Run(const xla::HloModuleProto& proto) {
  if (proto.computations_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("module '", proto.name(), "' has no computations"));
  }
  for (int i = 0; i < proto.computations_size(); ++i) {
    if (!all_comp_ids_.insert(proto.computations(i).id()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "computation '", proto.computations(i).name(), "' (computations[", i,
          "]): duplicate computation id ", proto.computations(i).id()));
    }
  }
  ASSIGN_OR_RETURN(int entry_index, FindEntry(proto));
  auto module = std::make_unique<HloModule>(proto.name());
  for (int i = 0; i < proto.computations_size(); ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<HloComputation> comp, ImportComputation(proto, i));
    computations_[proto.computations(i).id()] =
        module->AddComputation(std::move(comp), /*is_entry=*/i == entry_index);
  }
  RETURN_IF_ERROR(ImportModuleFields(proto, module.get()));
  module->UniquifyInstructionNames();
  return module;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HloModule>> ModuleFromProtoBytes(absl::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError("HloModuleProto bytes exceed 2 GiB");
  }
  xla::HloModuleProto proto;
  bool ok;
  {
    google::protobuf::LogSilencer quiet;  // a failed first try is expected for HloProto
    ok = proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  }
  if (!ok) {
    // XLA's dumps (*.hlo.pb) hold an HloProto wrapping the module.
    xla::HloProto wrapper;
    if (wrapper.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
        wrapper.has_hlo_module()) {
      return Importer().Run(wrapper.hlo_module());
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "bytes are not a valid serialized HloModuleProto or HloProto (truncated or corrupt; ",
        bytes.size(), " bytes)"));
  }
  return Importer().Run(proto);
}

absl::StatusOr<std::unique_ptr<HloModule>> ModuleFromProtoJson(absl::string_view json) {
  xla::HloModuleProto proto;
  google::protobuf::util::JsonParseOptions options;
  // Like the binary parser (and XLA), skip fields this subset does not model.
  options.ignore_unknown_fields = true;
  const std::string text = RespellNegativeZeros(std::string(json));
  auto status = google::protobuf::util::JsonStringToMessage(text, &proto, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "text is not a valid HloModuleProto in JSON: ", std::string(status.message())));
  }
  return Importer().Run(proto);
}

}  // namespace tpuoff::hlo
