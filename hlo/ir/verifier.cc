#include "hlo/ir/verifier.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "hlo/ir/limits.h"
#include "hlo/ir/primitive_type.h"
#include "hlo/ir/shape_inference.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo {
namespace {

absl::Status At(const HloComputation& comp, const HloInstruction* instr,
                absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(
      "computation ", comp.name(), instr ? absl::StrCat(", instruction ", instr->name()) : "",
      ": ", msg));
}

// The subshape of `shape` at `index`, or null when the index is not in it.
const Shape* Subshape(const Shape& shape, const std::vector<int64_t>& index) {
  const Shape* s = &shape;
  for (int64_t i : index) {
    if (!s->IsTuple() || i < 0 || i >= s->tuple_size()) return nullptr;
    s = &s->tuple_shapes(i);
  }
  return s;
}

// origin=, operand_layout_constraints and output_to_operand_aliasing.
absl::Status CheckAnnotations(const HloComputation& comp, const HloInstruction& instr) {
  const HloAttributes& a = instr.attrs();
  for (const OriginalValueLeaf& l : a.original_value.leaves) {
    const Shape* s = Subshape(instr.shape(), l.leaf_index);
    if (s == nullptr || s->IsTuple()) {
      return At(comp, &instr, "origin= does not match the tuple structure of the result");
    }
  }
  if (a.operand_layout_constraints.has_value()) {
    const auto& c = *a.operand_layout_constraints;
    if (static_cast<int64_t>(c.size()) != instr.operand_count()) {
      return At(comp, &instr, absl::StrCat("operand_layout_constraints has ", c.size(),
                                           " shapes for ", instr.operand_count(), " operands"));
    }
    for (size_t i = 0; i < c.size(); ++i) {
      if (!c[i].Compatible(instr.operand(i)->shape())) {
        return At(comp, &instr, absl::StrCat("operand layout constraint ", c[i].ToString(true),
                                             " is not compatible with operand ", i, " ",
                                             instr.operand(i)->shape().ToString()));
      }
    }
  }
  for (const OutputOperandAlias& al : a.output_to_operand_aliasing) {
    const Shape* out = Subshape(instr.shape(), al.output_index);
    const Shape* in = al.operand < instr.operand_count()
                          ? Subshape(instr.operand(al.operand)->shape(), al.operand_index)
                          : nullptr;
    if (out == nullptr || in == nullptr || !out->Compatible(*in)) {
      return At(comp, &instr, absl::StrCat("output_to_operand_aliasing: output ",
                                           out ? out->ToString() : "(no such index)",
                                           " and operand ", al.operand, " ",
                                           in ? in->ToString() : "(no such operand or index)",
                                           " do not match"));
    }
  }
  return absl::OkStatus();
}

// XLA's HloSharding::Validate against the module's partitions: a tile
// assignment or maximal device names devices 0..num_partitions-1, each once.
// Only when the module declares partitions: JAX's pre-partitioning (global
// SPMD) programs carry the mesh's shardings with num_partitions unset.
absl::Status CheckSharding(const HloModule& module, const HloComputation& comp,
                           const HloInstruction& instr, const HloSharding& s) {
  if (s.type == HloSharding::Type::kTuple) {
    for (const HloSharding& t : s.tuple_shardings) RETURN_IF_ERROR(CheckSharding(module, comp, instr, t));
    return absl::OkStatus();
  }
  if (s.type != HloSharding::Type::kTiled && s.type != HloSharding::Type::kMaximal) {
    return absl::OkStatus();
  }
  const int64_t n = module.num_partitions();
  std::set<int64_t> seen;
  for (int64_t d : s.devices) {
    if (d < 0 || d >= n) {
      return At(comp, &instr, absl::StrCat("sharding names device ", d, " but the module has ",
                                           "num_partitions=", n, " (devices 0..", n - 1, ")"));
    }
    if (!seen.insert(d).second) {
      return At(comp, &instr, absl::StrCat("sharding names device ", d, " twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckArraySizes(const HloComputation& comp, const HloInstruction& instr,
                             const Shape& shape) {
  if (shape.IsTuple()) {
    for (const Shape& s : shape.tuple_shapes()) RETURN_IF_ERROR(CheckArraySizes(comp, instr, s));
    return absl::OkStatus();
  }
  const int64_t width = std::max<int64_t>(1, ByteWidth(shape.element_type()));
  if (shape.IsArray() && shape.num_elements() > kMaxArrayBytes / width) {
    return At(comp, &instr, absl::StrCat("shape ", shape.ToString(), " needs ",
                                         shape.num_elements(), " x ", width, " bytes, more than ",
                                         "the limit of ", kMaxArrayBytes, " bytes per array"));
  }
  return absl::OkStatus();
}

absl::Status CheckAttributes(const HloModule& module, const HloComputation& comp,
                             const HloInstruction& instr) {
  RETURN_IF_ERROR(CheckAnnotations(comp, instr));
  if (instr.sharding().has_value() && module.num_partitions() > 1) {
    RETURN_IF_ERROR(CheckSharding(module, comp, instr, *instr.sharding()));
  }
  const HloAttributes& a = instr.attrs();
  // Devices a collective may name: replicas x partitions of the module.
  const int64_t devices = std::max<int64_t>(1, module.replica_count()) *
                          std::max<int64_t>(1, module.num_partitions());
  // A module that declares one device may still name more: JAX's
  // pre-partitioning (global SPMD) programs carry the mesh's replica groups
  // with num_partitions unset (hlo/spmd/global_program.cc sets it). Such
  // groups are checked against the real device count when the module runs
  // (runtime/device/collectives.cc).
  const bool declares_devices = module.replica_count() > 1 || module.num_partitions() > 1;
  auto no_such_device = [&](int64_t d, const char* where) {
    return At(comp, &instr, absl::StrCat(where, " name device ", d, " but the module has ",
                                         devices, devices == 1 ? " device" : " devices",
                                         " (replica_count=", module.replica_count(),
                                         ", num_partitions=", module.num_partitions(), ")"));
  };
  switch (instr.opcode()) {
    case HloOpcode::kConstant:
      // Without a literal the values are unknown (XLA's elided `{...}`).
      if (instr.has_literal() && !instr.literal().shape().Compatible(instr.shape())) {
        return At(comp, &instr, absl::StrCat("literal shape ", instr.literal().shape().ToString(),
                                             " differs from ", instr.shape().ToString()));
      }
      break;
    case HloOpcode::kAllReduce:
    case HloOpcode::kAllGather:
    case HloOpcode::kReduceScatter:
    case HloOpcode::kAllToAll: {
      std::set<int64_t> seen;
      size_t size = a.replica_groups.groups.empty() ? 0 : a.replica_groups.groups[0].size();
      for (const auto& group : a.replica_groups.groups) {
        if (group.size() != size) {
          return At(comp, &instr, "replica groups must all have the same size");
        }
        for (int64_t d : group) {
          if (d < 0 || !seen.insert(d).second) {
            return At(comp, &instr, absl::StrCat("device ", d, " repeated or negative in replica_groups"));
          }
          if (declares_devices && d >= devices) return no_such_device(d, "replica_groups");
        }
      }
      if (a.use_global_device_ids && !a.channel_id.has_value()) {
        return At(comp, &instr, "use_global_device_ids needs a channel_id");
      }
      break;
    }
    case HloOpcode::kAsyncUpdate:
    case HloOpcode::kAsyncDone:
      if (instr.operand(0)->opcode() != HloOpcode::kAsyncStart &&
          instr.operand(0)->opcode() != HloOpcode::kAsyncUpdate) {
        return At(comp, &instr, "must continue an async-start or async-update");
      }
      if (instr.called_computations() != instr.operand(0)->called_computations()) {
        return At(comp, &instr, "wraps another computation than the async op it continues");
      }
      break;
    case HloOpcode::kCollectivePermuteStart:
    case HloOpcode::kCollectivePermute: {
      std::set<int64_t> sources, targets;
      for (const auto& [s, t] : a.source_target_pairs) {
        if (s < 0 || t < 0 || !sources.insert(s).second || !targets.insert(t).second) {
          return At(comp, &instr, "source_target_pairs must not repeat a source or a target");
        }
        if (declares_devices && std::max(s, t) >= devices) {
          return no_such_device(std::max(s, t), "source_target_pairs");
        }
      }
      break;
    }
    default:
      break;
  }
  return absl::OkStatus();
}

absl::Status VerifyComputation(const HloModule& module, const HloComputation& comp,
                               const std::unordered_set<const HloComputation*>& earlier,
                               std::unordered_set<std::string>* names) {
  if (comp.root() == nullptr) return At(comp, nullptr, "has no root instruction");
  for (int64_t i = 0; i < comp.num_parameters(); ++i) {
    if (comp.parameter(i) == nullptr) {
      return At(comp, nullptr, absl::StrCat("parameter numbers must be 0..n-1; ", i, " is missing"));
    }
  }
  std::unordered_set<const HloInstruction*> defined;
  std::set<int64_t> param_numbers;
  for (const auto& owned : comp.instructions()) {
    const HloInstruction* instr = owned.get();
    if (instr->name().empty()) return At(comp, instr, "instruction has no name");
    if (!names->insert(instr->name()).second) {
      return At(comp, instr, "instruction name is not unique in the module");
    }
    if (instr->opcode() == HloOpcode::kParameter &&
        !param_numbers.insert(instr->parameter_number()).second) {
      return At(comp, instr, absl::StrCat("parameter number ", instr->parameter_number(),
                                          " used twice"));
    }
    for (const HloInstruction* op : instr->operands()) {
      if (op->parent() != &comp) {
        return At(comp, instr, absl::StrCat("operand ", op->name(), " is in another computation"));
      }
      if (!defined.count(op)) {
        return At(comp, instr, absl::StrCat("operand ", op->name(), " is used before it is defined"));
      }
    }
    for (const HloComputation* callee : instr->called_computations()) {
      if (callee == nullptr || callee->parent() != &module) {
        return At(comp, instr, "calls a computation outside the module");
      }
      if (!earlier.count(callee)) {
        return At(comp, instr, absl::StrCat("calls ", callee->name(),
                                            " which must come before its caller"));
      }
    }
    std::vector<const Shape*> operand_shapes;
    for (const HloInstruction* op : instr->operands()) operand_shapes.push_back(&op->shape());
    auto inferred = InferShape(instr->opcode(), operand_shapes, instr->attrs(),
                               instr->called_computations(), &instr->shape());
    if (!inferred.ok()) return At(comp, instr, inferred.status().message());
    if (!inferred->Compatible(instr->shape())) {
      return At(comp, instr, absl::StrCat("shape ", instr->shape().ToString(),
                                          " differs from the inferred ", inferred->ToString()));
    }
    RETURN_IF_ERROR(CheckAttributes(module, comp, *instr));
    defined.insert(instr);
  }
  if (!defined.count(comp.root())) return At(comp, comp.root(), "root is not in the computation");
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyReadable(const HloModule& module) {
  for (const auto& comp : module.computations()) {
    for (const auto& instr : comp->instructions()) {
      RETURN_IF_ERROR(CheckArraySizes(*comp, *instr, instr->shape()));
    }
  }
  return absl::OkStatus();
}

absl::Status VerifyModule(const HloModule& module) {
  if (module.entry() == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("module ", module.name(), " has no entry computation"));
  }
  std::unordered_set<std::string> comp_names;
  std::unordered_set<std::string> instr_names;
  std::unordered_set<const HloComputation*> earlier;
  // An async computation belongs to one async-start (XLA's rule).
  std::unordered_map<const HloComputation*, const HloInstruction*> async_owner;
  for (const auto& comp : module.computations()) {
    for (const auto& x : comp->instructions()) {
      if (x->opcode() != HloOpcode::kAsyncStart || x->called_computations().size() != 1) continue;
      auto [it, fresh] = async_owner.emplace(x->called_computations()[0], x.get());
      if (!fresh) {
        return At(*comp, x.get(), absl::StrCat("computation ", x->called_computations()[0]->name(),
                                               " is already wrapped by async-start ",
                                               it->second->name()));
      }
    }
  }
  for (const auto& comp : module.computations()) {
    if (!comp_names.insert(comp->name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("computation name ", comp->name(), " is not unique"));
    }
    RETURN_IF_ERROR(VerifyComputation(module, *comp, earlier, &instr_names));
    earlier.insert(comp.get());
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::hlo
