// Build phase of the text parser: resolves computation and instruction names,
// puts callees before callers and operands before users, infers omitted
// shapes and creates the IR.
#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/shape_inference.h"
#include "hlo/ir/status_macros.h"
#include "hlo/text/text_parser_impl.h"

namespace tpuoff::hlo::text_internal {
namespace {

// Dependency order of n nodes (each after its `deps`), stable with respect
// to the input order. Iterative, so deep chains cannot overflow the stack.
// Returns the node found on a cycle through `*cycle_node` on failure.
bool StableTopologicalOrder(const std::vector<std::vector<int>>& deps,
                            std::vector<int>* order, int* cycle_node) {
  const int n = static_cast<int>(deps.size());
  std::vector<char> state(n, 0);  // 0 new, 1 on the stack, 2 done
  for (int start = 0; start < n; ++start) {
    if (state[start] != 0) continue;
    std::vector<std::pair<int, size_t>> stack = {{start, 0}};
    state[start] = 1;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < deps[node].size()) {
        const int dep = deps[node][next++];
        if (state[dep] == 1) {
          *cycle_node = dep;
          return false;
        }
        if (state[dep] == 0) {
          state[dep] = 1;
          stack.push_back({dep, 0});
        }
      } else {
        state[node] = 2;
        order->push_back(node);
        stack.pop_back();
      }
    }
  }
  return true;
}

// The comparison type XLA assumes when none is given.
std::string DefaultComparisonType(PrimitiveType t) {
  if (IsFloatingPoint(t)) return "FLOAT";
  if (IsSignedInteger(t)) return "SIGNED";
  return "UNSIGNED";
}

int64_t LeafCount(const Shape& shape) {
  if (!shape.IsTuple()) return 1;
  int64_t n = 0;
  for (const Shape& s : shape.tuple_shapes()) n += LeafCount(s);
  return n;
}

// The subshape at `index`, or nullptr if the index is invalid.
const Shape* Subshape(const Shape& shape, const std::vector<int64_t>& index) {
  const Shape* s = &shape;
  for (int64_t i : index) {
    if (!s->IsTuple() || i < 0 || i >= s->tuple_size()) return nullptr;
    s = &s->tuple_shapes(i);
  }
  return s;
}

// Whether `shape` nests at most `max_depth` tuples deep and every array in
// it stays within `max_bytes` (checked without overflowing).
bool WithinLimits(const Shape& shape, int64_t max_bytes, int max_depth) {
  if (shape.IsTuple()) {
    if (max_depth <= 0) return false;
    for (const Shape& s : shape.tuple_shapes()) {
      if (!WithinLimits(s, max_bytes, max_depth - 1)) return false;
    }
    return true;
  }
  if (!shape.IsArray()) return true;
  const int64_t max_elements = max_bytes / ByteWidth(shape.element_type());
  int64_t elements = 1;
  for (int64_t d : shape.dimensions()) {
    if (d < 0) return false;
    if (d == 0) continue;
    if (elements > max_elements / d) return false;
    elements *= d;
  }
  return true;
}

}  // namespace

namespace {

// Resolves one computation; `computations` maps names to built callees.
class ComputationBuilder {
 public:
  ComputationBuilder(const TextParser& parser, const ParsedComputation& pc,
                     const absl::flat_hash_map<std::string, HloComputation*>& computations)
      : parser_(parser), pc_(pc), computations_(computations) {}

  absl::StatusOr<std::unique_ptr<HloComputation>> Build();

 private:
  absl::StatusOr<HloComputation*> Callee(const NameRef& ref) const {
    auto it = computations_.find(ref.name);
    if (it == computations_.end()) {
      return parser_.ErrorAt(ref.loc, absl::StrCat("unknown computation ", ref.name));
    }
    return it->second;
  }
  absl::StatusOr<std::vector<HloComputation*>> CalledComputations(
      const ParsedInstruction& pi, const std::vector<HloInstruction*>& operands) const;
  absl::StatusOr<std::unique_ptr<HloInstruction>> BuildInstruction(
      const ParsedInstruction& pi, std::vector<HloInstruction*> operands) const;
  absl::Status CheckSharding(const ParsedInstruction& pi, const Shape& shape) const;

  const TextParser& parser_;
  const ParsedComputation& pc_;
  const absl::flat_hash_map<std::string, HloComputation*>& computations_;
};

absl::StatusOr<std::vector<HloComputation*>> ComputationBuilder::CalledComputations(
    const ParsedInstruction& pi, const std::vector<HloInstruction*>& operands) const {
  std::vector<HloComputation*> called;
  auto add = [&](const NameRef& ref) -> absl::Status {
    ASSIGN_OR_RETURN(HloComputation * c, Callee(ref));
    called.push_back(c);
    return absl::OkStatus();
  };
  switch (pi.opcode) {
    case HloOpcode::kWhile:
      RETURN_IF_ERROR(add(*pi.body));
      RETURN_IF_ERROR(add(*pi.condition));
      break;
    case HloOpcode::kFusion:
      RETURN_IF_ERROR(add(*pi.calls));
      break;
    case HloOpcode::kSelectAndScatter:
      RETURN_IF_ERROR(add(*pi.select));
      RETURN_IF_ERROR(add(*pi.scatter));
      break;
    case HloOpcode::kConditional: {
      if (operands.empty() || operands[0]->shape().rank() != 0 ||
          (operands[0]->shape().element_type() != PrimitiveType::kPred &&
           operands[0]->shape().element_type() != PrimitiveType::kS32)) {
        return parser_.ErrorAt(pi.operands_loc,
                               "conditional needs a pred[] or s32[] selector first");
      }
      if (operands[0]->shape().element_type() == PrimitiveType::kPred) {
        if (!pi.true_computation || !pi.false_computation || !pi.branch_computations.empty()) {
          return parser_.ErrorAt(pi.opcode_loc,
                                 "a pred conditional takes true_computation and "
                                 "false_computation");
        }
        RETURN_IF_ERROR(add(*pi.true_computation));
        RETURN_IF_ERROR(add(*pi.false_computation));
      } else {
        if (pi.branch_computations.empty() || pi.true_computation || pi.false_computation) {
          return parser_.ErrorAt(pi.opcode_loc,
                                 "an s32 conditional takes branch_computations");
        }
        for (const NameRef& ref : pi.branch_computations) RETURN_IF_ERROR(add(ref));
      }
      break;
    }
    case HloOpcode::kAsyncUpdate:
    case HloOpcode::kAsyncDone: {
      // The computation of the async-start (or -update) this continues.
      const HloInstruction* prev = operands.size() == 1 ? operands[0] : nullptr;
      if (prev == nullptr || (prev->opcode() != HloOpcode::kAsyncStart &&
                              prev->opcode() != HloOpcode::kAsyncUpdate) ||
          prev->called_computations().size() != 1) {
        return parser_.ErrorAt(pi.operands_loc,
                               absl::StrCat(HloOpcodeString(pi.opcode),
                                            " takes the async-start or async-update it "
                                            "continues as its one operand"));
      }
      HloComputation* wrapped = prev->called_computations()[0];
      if (pi.calls) {
        ASSIGN_OR_RETURN(HloComputation * c, Callee(*pi.calls));
        if (c != wrapped) {
          return parser_.ErrorAt(pi.calls->loc,
                                 absl::StrCat("calls=", c->name(), " differs from ",
                                              wrapped->name(), " of its async-start"));
        }
      }
      if (pi.async_sugar != ParsedInstruction::AsyncSugar::kNone &&
          wrapped->root()->opcode() != pi.async_wrapped_opcode) {
        return parser_.ErrorAt(pi.opcode_loc,
                               absl::StrCat("the async op it continues wraps ",
                                            HloOpcodeString(wrapped->root()->opcode()), ", not ",
                                            HloOpcodeString(pi.async_wrapped_opcode)));
      }
      if (pi.seen_attrs.count("async_execution_thread") &&
          pi.attrs.async_execution_thread != prev->attrs().async_execution_thread) {
        return parser_.ErrorAt(pi.opcode_loc,
                               "async_execution_thread differs from its async-start's");
      }
      called.push_back(wrapped);
      break;
    }
    default:
      if (pi.to_apply) RETURN_IF_ERROR(add(*pi.to_apply));
      if (pi.calls) RETURN_IF_ERROR(add(*pi.calls));
      for (const NameRef& ref : pi.called_computations) RETURN_IF_ERROR(add(ref));
      break;
  }
  return called;
}

absl::Status ComputationBuilder::CheckSharding(const ParsedInstruction& pi,
                                               const Shape& shape) const {
  if (!pi.sharding.has_value()) return absl::OkStatus();
  const HloSharding& s = *pi.sharding;
  if (s.type == HloSharding::Type::kTuple) {
    // XLA's rule (HloSharding::RequiredLeaves): one element per leaf, and
    // one for a tuple without leaves (jax.debug.print's `()` results).
    if (!shape.IsTuple() || static_cast<int64_t>(s.tuple_shardings.size()) !=
                                std::max<int64_t>(1, LeafCount(shape))) {
      return parser_.ErrorAt(pi.name_loc,
                             absl::StrCat("tuple sharding has ", s.tuple_shardings.size(),
                                          " elements for shape ", shape.ToString()));
    }
    return absl::OkStatus();
  }
  if (s.type == HloSharding::Type::kTiled && shape.IsArray()) {
    const int64_t subgroups = s.replicate_on_last_tile_dim + s.last_tile_dims.size();
    if (static_cast<int64_t>(s.tile_assignment_dims.size()) != shape.rank() + subgroups) {
      return parser_.ErrorAt(pi.name_loc,
                             absl::StrCat("sharding tiles ", s.tile_assignment_dims.size(),
                                          " dimensions of the rank-", shape.rank(), " shape ",
                                          shape.ToString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HloInstruction>> ComputationBuilder::BuildInstruction(
    const ParsedInstruction& pi, std::vector<HloInstruction*> operands) const {
  for (size_t i = 0; i < operands.size(); ++i) {
    const OperandRef& ref = pi.operands[i];
    if (ref.shape.has_value() && !ref.shape->Compatible(operands[i]->shape())) {
      return parser_.ErrorAt(ref.loc, absl::StrCat("operand ", ref.name, " has shape ",
                                                   operands[i]->shape().ToString(),
                                                   ", not the declared ",
                                                   ref.shape->ToString()));
    }
  }
  const int arity = OpcodeArity(pi.opcode);
  if (arity != kVariadic && static_cast<int>(operands.size()) != arity) {
    return parser_.ErrorAt(pi.operands_loc,
                           absl::StrCat(HloOpcodeString(pi.opcode), " takes ", arity,
                                        " operands, got ", operands.size()));
  }
  ASSIGN_OR_RETURN(std::vector<HloComputation*> called, CalledComputations(pi, operands));
  HloAttributes attrs = pi.attrs;
  if (pi.opcode == HloOpcode::kAsyncUpdate || pi.opcode == HloOpcode::kAsyncDone) {
    attrs.async_execution_thread = operands[0]->attrs().async_execution_thread;
  }
  if (pi.opcode == HloOpcode::kBroadcast && !pi.seen_attrs.count("dimensions") &&
      operands[0]->shape().rank() != 0) {
    return parser_.ErrorAt(pi.opcode_loc, "broadcast of a non-scalar requires dimensions");
  }
  if (pi.opcode == HloOpcode::kCompare && operands[0]->shape().IsArray() &&
      attrs.comparison_type == DefaultComparisonType(operands[0]->shape().element_type())) {
    attrs.comparison_type.clear();  // XLA prints only non-default types
  }
  Shape shape;
  if (pi.shape.has_value()) {
    shape = *pi.shape;
  } else {
    std::vector<const Shape*> operand_shapes;
    for (const HloInstruction* op : operands) operand_shapes.push_back(&op->shape());
    auto inferred = InferShape(pi.opcode, operand_shapes, attrs, called, nullptr);
    if (!inferred.ok()) {
      return parser_.ErrorAt(pi.opcode_loc,
                             absl::StrCat("cannot infer the shape (write it out): ",
                                          inferred.status().message()));
    }
    shape = *std::move(inferred);
    if (!WithinLimits(shape, parser_.options_.max_array_bytes,
                      parser_.options_.max_nesting_depth)) {
      return parser_.ErrorAt(pi.opcode_loc, absl::StrCat("inferred shape ", shape.ToString(),
                                                         " is too large or too deeply nested"));
    }
  }
  RETURN_IF_ERROR(CheckSharding(pi, shape));
  if (!attrs.parameter_replication.empty() &&
      static_cast<int64_t>(attrs.parameter_replication.size()) != LeafCount(shape)) {
    return parser_.ErrorAt(pi.opcode_loc,
                           absl::StrCat("parameter_replication has ",
                                        attrs.parameter_replication.size(),
                                        " entries but the parameter has ", LeafCount(shape),
                                        " leaf buffers"));
  }

  std::unique_ptr<HloInstruction> instr;
  switch (pi.opcode) {
    case HloOpcode::kParameter:
      instr = HloInstruction::CreateParameter(attrs.parameter_number, shape, pi.name);
      break;
    case HloOpcode::kConstant:
      if (pi.literal.has_value()) {
        instr = HloInstruction::CreateConstant(*pi.literal);
      } else {  // elided: values unknown
        instr = HloInstruction::Create(HloOpcode::kConstant, shape, {});
      }
      break;
    default:
      instr = HloInstruction::Create(pi.opcode, shape, std::move(operands), attrs,
                                     std::move(called));
  }
  *instr->mutable_attrs() = std::move(attrs);
  instr->set_name(pi.name);
  *instr->mutable_metadata() = pi.metadata;
  // XLA keeps a stack_frame_id only when the module's index has that frame.
  const int64_t frames = static_cast<int64_t>(parser_.module_.stack_frames.frames.size());
  if (pi.metadata.stack_frame_id < 0 || pi.metadata.stack_frame_id > frames) {
    instr->mutable_metadata()->stack_frame_id = 0;
  }
  *instr->mutable_frontend_attributes() = pi.frontend_attributes;
  instr->set_sharding(pi.sharding);
  return instr;
}

absl::StatusOr<std::unique_ptr<HloComputation>> ComputationBuilder::Build() {
  const auto& instrs = pc_.instructions;
  const int n = static_cast<int>(instrs.size());
  absl::flat_hash_map<std::string, int> index;
  int root = n - 1;  // XLA: the last instruction unless one is marked ROOT
  int roots = 0;
  int64_t num_params = 0;
  for (int i = 0; i < n; ++i) {
    if (!index.emplace(instrs[i].name, i).second) {
      return parser_.ErrorAt(instrs[i].name_loc,
                             absl::StrCat("instruction ", instrs[i].name,
                                          " is defined twice in ", pc_.name));
    }
    if (instrs[i].is_root) {
      if (++roots > 1) return parser_.ErrorAt(instrs[i].name_loc, "more than one ROOT");
      root = i;
    }
    num_params += instrs[i].opcode == HloOpcode::kParameter;
  }
  std::vector<std::vector<int>> deps(n);
  auto resolve = [&](int i, const std::string& name, size_t loc) -> absl::Status {
    auto it = index.find(name);
    if (it == index.end()) {
      return parser_.ErrorAt(loc, absl::StrCat("unknown instruction ", name, " in ", pc_.name));
    }
    deps[i].push_back(it->second);
    return absl::OkStatus();
  };
  std::vector<bool> param_seen(num_params, false);
  for (int i = 0; i < n; ++i) {
    for (const OperandRef& op : instrs[i].operands) RETURN_IF_ERROR(resolve(i, op.name, op.loc));
    for (const NameRef& p : instrs[i].control_predecessors) {
      RETURN_IF_ERROR(resolve(i, p.name, p.loc));
    }
    if (instrs[i].opcode == HloOpcode::kParameter) {
      const int64_t number = instrs[i].attrs.parameter_number;
      if (number >= num_params || param_seen[number]) {
        return parser_.ErrorAt(instrs[i].opcode_loc,
                               absl::StrCat("parameter numbers of ", pc_.name,
                                            " must be 0..", num_params - 1,
                                            ", each once; got ", number));
      }
      param_seen[number] = true;
    }
  }
  std::vector<int> order;
  int cycle_node = 0;
  if (!StableTopologicalOrder(deps, &order, &cycle_node)) {
    return parser_.ErrorAt(instrs[cycle_node].name_loc,
                           absl::StrCat("instruction ", instrs[cycle_node].name,
                                        " depends on itself"));
  }
  auto comp = std::make_unique<HloComputation>(pc_.name);
  comp->set_execution_thread(pc_.execution_thread);
  std::vector<HloInstruction*> built(n, nullptr);
  for (int i : order) {
    const ParsedInstruction& pi = instrs[i];
    std::vector<HloInstruction*> operands;
    for (size_t k = 0; k < pi.operands.size(); ++k) operands.push_back(built[deps[i][k]]);
    ASSIGN_OR_RETURN(std::unique_ptr<HloInstruction> instr,
                     BuildInstruction(pi, std::move(operands)));
    built[i] = comp->AddInstruction(std::move(instr));
    for (size_t k = pi.operands.size(); k < deps[i].size(); ++k) {
      built[i]->AddControlPredecessor(built[deps[i][k]]);
    }
  }
  comp->set_root(built[root]);
  if (pc_.declared_result.has_value() &&
      !pc_.declared_result->Compatible(built[root]->shape())) {
    return parser_.ErrorAt(pc_.result_loc,
                           absl::StrCat(pc_.name, " declares result ",
                                        pc_.declared_result->ToString(), " but its root is ",
                                        built[root]->shape().ToString()));
  }
  return comp;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HloModule>> TextParser::Build() {
  const auto& comps = module_.computations;
  const int n = static_cast<int>(comps.size());
  absl::flat_hash_map<std::string, int> index;
  int entry = -1;
  for (int i = 0; i < n; ++i) {
    if (!index.emplace(comps[i].name, i).second) {
      return ErrorAt(comps[i].name_loc,
                     absl::StrCat("computation ", comps[i].name, " is defined twice"));
    }
    if (comps[i].is_entry) {
      if (entry >= 0) return ErrorAt(comps[i].name_loc, "more than one ENTRY computation");
      entry = i;
    }
  }
  if (entry < 0) entry = n - 1;  // XLA: the last computation is the entry
  // Callees first, whatever the order of definition.
  std::vector<std::vector<int>> callees(n);
  for (int i = 0; i < n; ++i) {
    for (const ParsedInstruction& pi : comps[i].instructions) {
      std::vector<const NameRef*> refs;
      for (const auto* r : {&pi.to_apply, &pi.condition, &pi.body, &pi.calls,
                            &pi.true_computation, &pi.false_computation, &pi.select,
                            &pi.scatter}) {
        if (r->has_value()) refs.push_back(&**r);
      }
      for (const NameRef& r : pi.branch_computations) refs.push_back(&r);
      for (const NameRef& r : pi.called_computations) refs.push_back(&r);
      for (const NameRef* r : refs) {
        auto it = index.find(r->name);
        if (it == index.end()) {
          return ErrorAt(r->loc, absl::StrCat("unknown computation ", r->name));
        }
        if (it->second == entry) {
          return ErrorAt(r->loc, "the entry computation cannot be called");
        }
        callees[i].push_back(it->second);
      }
    }
  }
  std::vector<int> order;
  int cycle_node = 0;
  if (!StableTopologicalOrder(callees, &order, &cycle_node)) {
    return ErrorAt(comps[cycle_node].name_loc,
                   absl::StrCat("computation ", comps[cycle_node].name,
                                " calls itself (directly or indirectly)"));
  }
  auto module = std::make_unique<HloModule>(module_.name);
  absl::flat_hash_map<std::string, HloComputation*> built;
  for (int i : order) {
    ComputationBuilder builder(*this, comps[i], built);
    ASSIGN_OR_RETURN(std::unique_ptr<HloComputation> comp, builder.Build());
    built[comps[i].name] = module->AddComputation(std::move(comp), i == entry);
  }
  for (const auto& comp : module->computations()) {
    for (const auto& instr : comp->instructions()) {
      if (instr->opcode() == HloOpcode::kFusion) {
        instr->called_computations()[0]->set_is_fusion_computation(true);
      }
    }
  }
  // Header facts that refer to the entry computation.
  const HloComputation& entry_comp = *module->entry();
  const Shape& result = entry_comp.root()->shape();
  if (module_.entry_param_layouts.has_value()) {
    const auto& params = *module_.entry_param_layouts;
    bool ok = static_cast<int64_t>(params.size()) == entry_comp.num_parameters() &&
              module_.entry_result_layout.Compatible(result);
    for (size_t i = 0; ok && i < params.size(); ++i) {
      ok = params[i].Compatible(entry_comp.parameter(i)->shape());
    }
    if (!ok) {
      return ErrorAt(module_.entry_layout_loc,
                     "entry_computation_layout does not match the entry computation");
    }
    module->set_entry_layout(params, module_.entry_result_layout);
  }
  for (const ParsedAlias& a : module_.aliases) {
    const InputOutputAlias& alias = a.alias;
    if (Subshape(result, alias.output_index) == nullptr ||
        alias.parameter_number < 0 || alias.parameter_number >= entry_comp.num_parameters() ||
        Subshape(entry_comp.parameter(alias.parameter_number)->shape(),
                 alias.parameter_index) == nullptr) {
      return ErrorAt(a.loc, "input_output_alias names a missing output or parameter");
    }
    module->mutable_input_output_aliases()->push_back(alias);
  }
  for (const BufferDonor& d : module_.buffer_donors) {
    if (d.parameter_number < 0 || d.parameter_number >= entry_comp.num_parameters() ||
        Subshape(entry_comp.parameter(d.parameter_number)->shape(), d.parameter_index) ==
            nullptr) {
      return ErrorAt(module_.buffer_donor_loc, "buffer_donor names a missing parameter buffer");
    }
  }
  *module->mutable_buffer_donors() = module_.buffer_donors;
  module->set_is_scheduled(module_.is_scheduled);
  {  // Every id of the stack-frame index points into its table (0: none).
    const StackFrameIndex& s = module_.stack_frames;
    auto in = [](int32_t id, size_t n) { return id >= 0 && static_cast<size_t>(id) <= n; };
    bool ok = true;
    for (const auto& l : s.file_locations) {
      ok &= in(l.file_name_id, s.file_names.size()) &&
            in(l.function_name_id, s.function_names.size());
    }
    for (const auto& f : s.frames) {
      ok &= in(f.file_location_id, s.file_locations.size()) &&
            in(f.parent_frame_id, s.frames.size());
    }
    if (!ok) return ErrorAt(module_.stack_frames_loc, "stack-frame index id out of range");
    *module->mutable_stack_frame_index() = s;
  }
  *module->mutable_frontend_attributes() = module_.frontend_attributes;
  module->set_num_partitions(module_.num_partitions);
  module->set_replica_count(module_.replica_count);
  module->UniquifyInstructionNames();
  return module;
}

}  // namespace tpuoff::hlo::text_internal
