#include "hlo/analysis/loop_fusion.h"

#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_map.h"

namespace tpuoff::hlo {
namespace {

// Collects the reads of a group the way the loop compiler walks it: a
// memoised depth-first walk from the root; non-members and constants are
// loads; index-mapping members load their operand through a strided map.
class ReadCollector {
 public:
  ReadCollector(const absl::flat_hash_set<const HloInstruction*>& members,
                const Shape& loop_shape)
      : members_(members),
        loop_dims_(loop_shape.dimensions()),
        identity_strides_(loop_shape.rank() ? loop_shape.Strides()
                                            : std::vector<int64_t>{}) {}

  // Depth-first from `top`, operands in order (an explicit stack, so fused
  // chains of any length are walked without recursion): the order of the
  // loads is the order in which the walk first reaches them.
  void Visit(const HloInstruction* top) {
    std::vector<const HloInstruction*> stack = {top};
    while (!stack.empty()) {
      const HloInstruction* x = stack.back();
      stack.pop_back();
      if (!visited_.insert(x).second) continue;
      const bool member = members_.contains(x);
      if (!member || x->opcode() == HloOpcode::kConstant) {
        // A constant member is read from its literal, not from a buffer.
        if (member && x->has_literal()) continue;
        // Direct loads read at the iteration index (or splat a scalar).
        AddLoad(x, /*identity=*/x->shape().dimensions() == loop_dims_);
        continue;
      }
      if (IsIndexMappingOp(x->opcode())) {
        const HloInstruction* src = x->operand(0);
        if (x->opcode() == HloOpcode::kDynamicSlice) {
          for (int64_t i = 1; i < x->operand_count(); ++i) VisitScalar(x->operand(i));
        }
        if (members_.contains(src) && src->has_literal()) continue;
        AddLoad(src, MappingIsIdentity(x));
        continue;
      }
      if (x->opcode() == HloOpcode::kIota) continue;
      // Pushed last-first so operand 0 is walked first.
      for (int64_t i = std::min<int64_t>(x->operand_count(), 3) - 1; i >= 0; --i) {
        if (!visited_.contains(x->operand(i))) stack.push_back(x->operand(i));
      }
    }
  }

  // A scalar read once per loop (dynamic-slice starts): from its literal
  // when it is a constant member, else from its buffer.
  void VisitScalar(const HloInstruction* x) {
    if (members_.contains(x) && x->has_literal()) return;
    AddLoad(x, /*identity=*/false);
  }

  void AddLoad(const HloInstruction* x, bool identity) {
    auto [it, inserted] = index_.try_emplace(x, inputs_.size());
    if (inserted) {
      inputs_.push_back(x);
      identity_.push_back(identity);
    } else {
      identity_[it->second] = identity_[it->second] && identity;
    }
  }

  std::vector<const HloInstruction*>& inputs() { return inputs_; }
  const std::vector<bool>& identity() const { return identity_; }

 private:
  // Whether the strided map of broadcast/transpose/slice/reverse `x` over
  // its operand is the identity of the loop's index space.
  bool MappingIsIdentity(const HloInstruction* x) const {
    const Shape& src = x->operand(0)->shape();
    const std::vector<int64_t> src_strides =
        src.rank() ? src.Strides() : std::vector<int64_t>{};
    const int64_t rank = x->shape().rank();
    std::vector<int64_t> strides(rank, 0);
    int64_t offset = 0;
    const std::vector<int64_t>& dims = x->dimensions();
    switch (x->opcode()) {
      case HloOpcode::kBroadcast:
        for (size_t i = 0; i < dims.size() && i < src_strides.size(); ++i) {
          strides[dims[i]] = src_strides[i];
        }
        break;
      case HloOpcode::kTranspose:
        for (int64_t j = 0; j < rank && j < static_cast<int64_t>(dims.size()); ++j) {
          strides[j] = src_strides[dims[j]];
        }
        break;
      case HloOpcode::kSlice:
        for (int64_t j = 0; j < rank && j < static_cast<int64_t>(x->attrs().slice.size());
             ++j) {
          const SliceDimension& s = x->attrs().slice[j];
          offset += s.start * src_strides[j];
          strides[j] = s.stride * src_strides[j];
        }
        break;
      case HloOpcode::kReverse:
        for (int64_t j = 0; j < rank; ++j) strides[j] = src_strides[j];
        for (int64_t d : dims) {
          offset += (src.dimensions(d) - 1) * src_strides[d];
          strides[d] = -src_strides[d];
        }
        break;
      default:
        return false;
    }
    return offset == 0 && strides == identity_strides_;
  }

  const absl::flat_hash_set<const HloInstruction*>& members_;
  std::vector<int64_t> loop_dims_;
  std::vector<int64_t> identity_strides_;
  absl::flat_hash_set<const HloInstruction*> visited_;
  absl::flat_hash_map<const HloInstruction*, size_t> index_;
  std::vector<const HloInstruction*> inputs_;
  std::vector<bool> identity_;
};

}  // namespace

bool IsIndexMappingOp(HloOpcode op) {
  return op == HloOpcode::kBroadcast || op == HloOpcode::kTranspose ||
         op == HloOpcode::kSlice || op == HloOpcode::kReverse ||
         op == HloOpcode::kDynamicSlice;
}

bool IsDuplicableInLoop(const HloInstruction& instr) {
  const HloOpcode op = instr.opcode();
  return op == HloOpcode::kConvert || op == HloOpcode::kIota ||
         op == HloOpcode::kConstant || IsIndexMappingOp(op);
}

bool IsFusibleUpdate(const HloInstruction& dus) {
  if (dus.opcode() != HloOpcode::kDynamicUpdateSlice || !dus.shape().IsArray()) {
    return false;
  }
  const Shape& update = dus.operand(1)->shape();
  if (!update.IsArray() || update.element_type() != dus.shape().element_type() ||
      update.rank() != dus.shape().rank() ||
      dus.operand_count() != dus.shape().rank() + 2) {
    return false;
  }
  for (int64_t i = 2; i < dus.operand_count(); ++i) {
    if (!dus.operand(i)->shape().IsArray() || dus.operand(i)->shape().rank() != 0) return false;
  }
  return true;
}

bool IsLoopFusible(const HloInstruction& instr) {
  if (!instr.shape().IsArray()) return false;
  const HloOpcode op = instr.opcode();
  // An elided constant ({...}) has no values to fold in: it stays a buffer.
  if (op == HloOpcode::kConstant && !instr.has_literal()) return false;
  if (IsElementwiseUnary(op) || IsElementwiseBinary(op)) return true;
  if (op == HloOpcode::kDynamicSlice) {
    // Scalar starts only (the old single-vector form is not fused).
    if (instr.operand_count() != instr.shape().rank() + 1) return false;
    for (int64_t i = 1; i < instr.operand_count(); ++i) {
      const Shape& s = instr.operand(i)->shape();
      if (!s.IsArray() || s.rank() != 0) return false;
    }
    return true;
  }
  switch (op) {
    case HloOpcode::kReal:
    case HloOpcode::kImag:
    case HloOpcode::kComplex:
    case HloOpcode::kConvert:
    case HloOpcode::kCompare:
    case HloOpcode::kSelect:
    case HloOpcode::kClamp:
    case HloOpcode::kIsFinite:
    case HloOpcode::kIota:
    case HloOpcode::kConstant:
      return true;
    default:
      return IsIndexMappingOp(op);
  }
}

std::optional<HloOpcode> MatchReducer(const HloComputation* reducer) {
  if (reducer == nullptr || reducer->num_parameters() != 2) return std::nullopt;
  // Annotations around the values (jax's `Sharding` custom-calls inside a
  // partial-manual shard_map's psum reducer) change nothing.
  auto through = [](const HloInstruction* x) {
    while (x != nullptr && IsPassThrough(*x)) x = x->operand(0);
    return x;
  };
  const HloInstruction* root = through(reducer->root());
  if (root == nullptr || root->operand_count() != 2 || !root->shape().IsArray()) {
    return std::nullopt;
  }
  const HloInstruction* a = through(root->operand(0));
  const HloInstruction* b = through(root->operand(1));
  if (a->opcode() != HloOpcode::kParameter ||
      b->opcode() != HloOpcode::kParameter || a == b) {
    return std::nullopt;
  }
  switch (root->opcode()) {
    case HloOpcode::kAdd:
    case HloOpcode::kMultiply:
    case HloOpcode::kMaximum:
    case HloOpcode::kMinimum:
    case HloOpcode::kAnd:
    case HloOpcode::kOr:
    case HloOpcode::kXor:
      return root->opcode();
    default:
      return std::nullopt;
  }
}

bool IsStreamingReduce(const HloInstruction& x) {
  if (x.opcode() != HloOpcode::kReduce || x.operand_count() != 2 ||
      !x.shape().IsArray() || x.dimensions().empty()) {
    return false;
  }
  if (!MatchReducer(x.to_apply()).has_value()) return false;
  // Complex sums go through the general reduce (the streaming lanes hold
  // at most 8-byte values).
  if (IsComplex(x.shape().element_type())) return false;
  std::vector<int64_t> dims = x.dimensions();
  std::sort(dims.begin(), dims.end());
  const int64_t rank = x.operand(0)->shape().rank();
  const int64_t k = rank - static_cast<int64_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != k + static_cast<int64_t>(i)) return false;
  }
  return true;
}

LoopGroupReads AnalyzeLoopGroup(
    const HloInstruction* root,
    const absl::flat_hash_set<const HloInstruction*>& members, bool reduce) {
  const HloInstruction* roots[] = {root};
  return AnalyzeLoopGroup(roots, members,
                          reduce ? LoopGroupKind::kReduce : LoopGroupKind::kElementwise);
}

LoopGroupReads AnalyzeLoopGroup(
    absl::Span<const HloInstruction* const> roots,
    const absl::flat_hash_set<const HloInstruction*>& members, LoopGroupKind kind) {
  LoopGroupReads out;
  if (roots.empty()) return out;
  const HloInstruction* root = roots.back();
  if (kind == LoopGroupKind::kReduce) {
    ReadCollector reads(members, root->operand(0)->shape());
    for (const HloInstruction* r : roots) reads.Visit(r->operand(0));
    out.inputs = std::move(reads.inputs());
    for (const HloInstruction* r : roots) out.inputs.push_back(r->operand(1));  // inits
    return out;
  }
  if (kind == LoopGroupKind::kUpdate) {
    ReadCollector reads(members, root->operand(1)->shape());
    reads.Visit(root->operand(1));
    out.inputs = std::move(reads.inputs());
    for (int64_t i = 0; i < root->operand_count(); ++i) {
      if (i == 1) continue;
      const HloInstruction* o = root->operand(i);
      if (i >= 2 && members.contains(o) && o->has_literal()) continue;
      if (std::find(out.inputs.begin(), out.inputs.end(), o) == out.inputs.end()) {
        out.inputs.push_back(o);
      }
    }
    return out;
  }
  const HloInstruction* top = root;
  ReadCollector reads(members, top->shape());
  reads.Visit(top);
  for (size_t i = 0; i < reads.inputs().size(); ++i) {
    const HloInstruction* in = reads.inputs()[i];
    if (reads.identity()[i] &&
        in->shape().element_type() == root->shape().element_type() &&
        in->shape().dimensions() == root->shape().dimensions()) {
      out.identity_inputs.push_back(in);
    }
  }
  out.inputs = std::move(reads.inputs());
  return out;
}

}  // namespace tpuoff::hlo
