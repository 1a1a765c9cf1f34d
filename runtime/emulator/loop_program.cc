#include "runtime/emulator/loop_program.h"


#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/status_macros.h"
#include "runtime/emulator/ops.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/parallel.h"
#include "runtime/cpu/simd_math.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::HloOpcode;
using hlo::PrimitiveType;

// Converts whose compute representation is unchanged (bf16/f16 -> f32 are
// exact in float; same-type converts) are aliases of their operand.
bool IsNoOpConvert(PrimitiveType from, PrimitiveType to) {
  if (from == to) return true;
  const bool float_in = from == PrimitiveType::kBF16 || from == PrimitiveType::kF16 ||
                        from == PrimitiveType::kF32;
  return float_in && to == PrimitiveType::kF32;
}

class Builder {
 public:
  Builder(LoopProgram* p,
          const absl::flat_hash_set<const HloInstruction*>& members)
      : p_(p), members_(members) {}

  // The node computing `top`, its operands first. An explicit stack walks
  // the group depth-first (operands in order, each built once), so fused
  // chains of any length build without recursion; nodes come out in the
  // order a recursive walk would create them.
  absl::StatusOr<int> Build(const HloInstruction* top) {
    std::vector<const HloInstruction*> stack = {top};
    while (!stack.empty()) {
      const HloInstruction* x = stack.back();
      if (memo_.contains(x)) {
        stack.pop_back();
        continue;
      }
      bool operands_ready = true;
      if (ExpandsOperands(x)) {
        for (int64_t i = std::min<int64_t>(x->operand_count(), 3) - 1; i >= 0; --i) {
          if (!memo_.contains(x->operand(i))) {
            stack.push_back(x->operand(i));
            operands_ready = false;
          }
        }
      }
      if (!operands_ready) continue;
      ASSIGN_OR_RETURN(int node, BuildUncached(x));
      memo_[x] = node;
      stack.pop_back();
    }
    return memo_.at(top);
  }

  // A program input for a scalar operand: its literal when it is a constant
  // member, else its buffer.
  int ScalarInput(const HloInstruction* x) {
    const bool literal = members_.contains(x) && x->has_literal();
    return InputIndex(literal ? nullptr : x, literal ? &x->literal() : nullptr);
  }

 private:
  int AddNode(LoopNode n) {
    const int64_t rank = p_->shape.rank();
    switch (n.kind) {
      case LoopNode::Kind::kLoad:
        n.invariant = rank == 0 || n.strides[rank - 1] == 0;
        break;
      case LoopNode::Kind::kIota:
        n.invariant = rank == 0 || n.iota_dim != rank - 1;
        break;
      case LoopNode::Kind::kIotaEq:
        n.invariant = false;
        break;
      default:
        n.invariant = true;
        for (int a : n.args) {
          if (a >= 0 && !p_->nodes[a].invariant) n.invariant = false;
        }
    }
    p_->nodes.push_back(std::move(n));
    return static_cast<int>(p_->nodes.size()) - 1;
  }

  bool Invariant(int node) const { return p_->nodes[node].invariant; }

  int InputIndex(const HloInstruction* instr, const hlo::Literal* literal) {
    auto [it, inserted] =
        input_index_.try_emplace({instr, literal}, static_cast<int>(p_->inputs.size()));
    if (inserted) {
      p_->inputs.push_back(instr);
      p_->literals.push_back(literal);
    }
    return it->second;
  }

  // A load of `source` (an external instruction, or a constant member read
  // from its literal) through strides over the iteration space.
  int AddLoad(const HloInstruction* source, int64_t offset,
              std::vector<int64_t> strides, std::vector<DynamicStart> dynamic = {}) {
    const bool literal = members_.contains(source) && source->has_literal();
    LoopNode n;
    n.kind = LoopNode::Kind::kLoad;
    n.type = source->shape().element_type();
    n.input = InputIndex(literal ? nullptr : source,
                         literal ? &source->literal() : nullptr);
    n.offset = offset;
    n.strides = std::move(strides);
    n.dynamic = std::move(dynamic);
    n.load = GetLoadKernel(n.type);
    // Storage equals compute representation except for 16-bit floats.
    n.direct = n.type != PrimitiveType::kBF16 && n.type != PrimitiveType::kF16 &&
               hlo::ByteWidth(n.type) == ComputeWidth(n.type);
    return AddNode(std::move(n));
  }

  // Strides reading `source` at the iteration index (same dims) or
  // splatting it (scalar).
  absl::StatusOr<std::vector<int64_t>> IdentityStrides(
      const HloInstruction* source) {
    const hlo::Shape& s = source->shape();
    if (s.rank() == 0) return std::vector<int64_t>(p_->shape.rank(), 0);
    if (s.dimensions() != p_->shape.dimensions()) {
      return absl::InternalError(absl::StrCat(
          "loop fusion: %", source->name(), " has shape ", s.ToString(),
          ", expected the loop's ", p_->shape.ToString()));
    }
    return s.Strides();
  }

  static ScalarOperand Which(bool first, bool second) {
    if (second) return ScalarOperand::kSecond;
    if (first) return ScalarOperand::kFirst;
    return ScalarOperand::kNone;
  }

  // Whether BuildUncached(x) uses the nodes of x's operands (elementwise
  // members); loads, mappings and iota do not.
  bool ExpandsOperands(const HloInstruction* x) const {
    return members_.contains(x) && x->opcode() != HloOpcode::kConstant &&
           !hlo::IsIndexMappingOp(x->opcode()) && x->opcode() != HloOpcode::kIota;
  }

  absl::StatusOr<int> BuildUncached(const HloInstruction* x) {
    const PrimitiveType type = x->shape().element_type();
    if (!members_.contains(x) || x->opcode() == HloOpcode::kConstant) {
      ASSIGN_OR_RETURN(std::vector<int64_t> strides, IdentityStrides(x));
      return AddLoad(x, 0, std::move(strides));
    }
    const HloOpcode op = x->opcode();
    LoopNode n;
    n.type = type;
    if (hlo::IsIndexMappingOp(op)) return BuildMapping(x);
    if (op == HloOpcode::kIota) {
      n.kind = LoopNode::Kind::kIota;
      n.iota_dim = x->dimensions().empty() ? 0 : x->dimensions()[0];
      return AddNode(std::move(n));
    }
    for (int64_t i = 0; i < x->operand_count() && i < 3; ++i) {
      n.args[i] = memo_.at(x->operand(i));  // built first by Build
    }
    // With exactly the non-invariant operands as blocks, scalar variants
    // avoid splatting invariant ones (the node itself then varies).
    const bool s0 = n.args[0] >= 0 && Invariant(n.args[0]);
    const bool s1 = n.args[1] >= 0 && Invariant(n.args[1]);
    const bool s2 = n.args[2] >= 0 && Invariant(n.args[2]);
    n.opcode = op;
    const PrimitiveType in0 =
        x->operand_count() > 0 ? x->operand(0)->shape().element_type() : type;
    if (op == HloOpcode::kReal || op == HloOpcode::kImag ||
        (op == HloOpcode::kAbs && hlo::IsComplex(in0))) {
      // A part of a complex value: a unary kernel that changes the type.
      n.kind = LoopNode::Kind::kConvert;
      ASSIGN_OR_RETURN(n.unary, GetComplexPartKernel(op, in0));
    } else if (op == HloOpcode::kComplex) {
      n.kind = LoopNode::Kind::kBinary;
      ASSIGN_OR_RETURN(n.binary, GetMakeComplexKernel(in0));
      if (s0 != s1) {
        ASSIGN_OR_RETURN(BinaryKernel k, GetMakeComplexKernel(in0, Which(s0, s1)));
        (s1 ? n.binary_vs : n.binary_sv) = k;
      }
    } else if (hlo::IsElementwiseUnary(op)) {
      n.kind = LoopNode::Kind::kUnary;
      ASSIGN_OR_RETURN(n.unary, GetUnaryKernel(op, type));
    } else if (hlo::IsElementwiseBinary(op)) {
      n.kind = LoopNode::Kind::kBinary;
      ASSIGN_OR_RETURN(n.binary, GetBinaryKernel(op, type));
      if (s0 != s1) {
        ASSIGN_OR_RETURN(BinaryKernel k, GetBinaryKernel(op, type, Which(s0, s1)));
        (s1 ? n.binary_vs : n.binary_sv) = k;
      }
    } else if (op == HloOpcode::kCompare && IsOneHot(x, n.args[0], n.args[1])) {
      const bool iota_first = !Invariant(n.args[0]);
      const int value = iota_first ? n.args[1] : n.args[0];
      n.kind = LoopNode::Kind::kIotaEq;
      n.iota_dim = p_->shape.rank() - 1;
      n.iota_type = x->operand(0)->shape().element_type();
      n.negate = x->attrs().comparison_direction == hlo::ComparisonDirection::kNe;
      n.args[0] = value;
      n.args[1] = -1;
    } else if (op == HloOpcode::kCompare) {
      n.kind = LoopNode::Kind::kCompare;
      const PrimitiveType in = x->operand(0)->shape().element_type();
      const bool total = x->attrs().comparison_type == "TOTALORDER";
      n.direction = x->attrs().comparison_direction;
      n.total_order = total;
      ASSIGN_OR_RETURN(n.binary,
                       GetCompareKernel(x->attrs().comparison_direction, in, total));
      if (s0 != s1) {
        ASSIGN_OR_RETURN(BinaryKernel k, GetCompareKernel(x->attrs().comparison_direction,
                                                          in, total, Which(s0, s1)));
        (s1 ? n.binary_vs : n.binary_sv) = k;
      }
    } else if (op == HloOpcode::kConvert) {
      const PrimitiveType from = x->operand(0)->shape().element_type();
      if (IsNoOpConvert(from, type)) return n.args[0];
      n.kind = LoopNode::Kind::kConvert;
      ASSIGN_OR_RETURN(n.unary, GetConvertKernel(from, type));
    } else if (op == HloOpcode::kIsFinite) {
      n.kind = LoopNode::Kind::kIsFinite;
      ASSIGN_OR_RETURN(n.unary,
                       GetIsFiniteKernel(x->operand(0)->shape().element_type()));
    } else if (op == HloOpcode::kSelect) {
      n.kind = LoopNode::Kind::kSelect;
      ASSIGN_OR_RETURN(n.ternary, GetSelectKernel(type));
      if (!s0 && s1 != s2) {
        ASSIGN_OR_RETURN(TernaryKernel k, GetSelectKernel(type, Which(s1, s2)));
        (s2 ? n.ternary_vvs : n.ternary_vsv) = k;
      }
    } else if (op == HloOpcode::kClamp) {
      n.kind = LoopNode::Kind::kClamp;
      ASSIGN_OR_RETURN(n.ternary, GetClampKernel(type));
    } else {
      return absl::InternalError(absl::StrCat("loop fusion cannot express %",
                                              x->name()));
    }
    return AddNode(std::move(n));
  }

  // compare(iota over the minor dim, invariant) with EQ/NE on integers.
  bool IsOneHot(const HloInstruction* x, int a, int b) const {
    const hlo::ComparisonDirection dir = x->attrs().comparison_direction;
    const PrimitiveType t = x->operand(0)->shape().element_type();
    if (dir != hlo::ComparisonDirection::kEq && dir != hlo::ComparisonDirection::kNe) {
      return false;
    }
    // Wide integers only: narrower iotas wrap, which the mask does not model.
    const int64_t rank = p_->shape.rank();
    if ((t != PrimitiveType::kS32 && t != PrimitiveType::kS64 && t != PrimitiveType::kU32 &&
         t != PrimitiveType::kU64) ||
        rank == 0 || p_->shape.dimensions(rank - 1) >= (int64_t{1} << 31)) {
      return false;
    }
    auto minor_iota = [&](int node) {
      const LoopNode& n = p_->nodes[node];
      return n.kind == LoopNode::Kind::kIota && n.iota_dim == p_->shape.rank() - 1;
    };
    return (minor_iota(a) && Invariant(b)) || (minor_iota(b) && Invariant(a));
  }

  // broadcast / transpose / slice / reverse / dynamic-slice of an operand
  // that is read directly: fold the index map into the load's strides.
  absl::StatusOr<int> BuildMapping(const HloInstruction* x) {
    const HloInstruction* src = x->operand(0);
    const std::vector<int64_t> src_strides =
        src->shape().rank() ? src->shape().Strides() : std::vector<int64_t>{};
    const int64_t rank = x->shape().rank();
    std::vector<int64_t> strides(rank, 0);
    std::vector<DynamicStart> dynamic;
    int64_t offset = 0;
    const auto& dims = x->dimensions();
    switch (x->opcode()) {
      case HloOpcode::kBroadcast:
        for (size_t i = 0; i < dims.size(); ++i) strides[dims[i]] = src_strides[i];
        break;
      case HloOpcode::kTranspose:
        for (int64_t j = 0; j < rank; ++j) strides[j] = src_strides[dims[j]];
        break;
      case HloOpcode::kSlice:
        for (int64_t j = 0; j < rank; ++j) {
          const hlo::SliceDimension& s = x->attrs().slice[j];
          offset += s.start * src_strides[j];
          strides[j] = s.stride * src_strides[j];
        }
        break;
      case HloOpcode::kReverse:
        for (int64_t j = 0; j < rank; ++j) strides[j] = src_strides[j];
        for (int64_t d : dims) {
          offset += (src->shape().dimensions(d) - 1) * src_strides[d];
          strides[d] = -src_strides[d];
        }
        break;
      case HloOpcode::kDynamicSlice:
        for (int64_t j = 0; j < rank; ++j) {
          strides[j] = src_strides[j];
          const int64_t max_start = src->shape().dimensions(j) - x->shape().dimensions(j);
          if (max_start <= 0) continue;  // the start clamps to 0
          const HloInstruction* start = x->operand(j + 1);
          dynamic.push_back({ScalarInput(start), start->shape().element_type(),
                             src_strides[j], max_start});
        }
        break;
      default:
        break;
    }
    // The map is relative to x's shape, which is the iteration space.
    if (x->shape().dimensions() != p_->shape.dimensions()) {
      return absl::InternalError(absl::StrCat(
          "loop fusion: %", x->name(), " does not span the loop's shape"));
    }
    return AddLoad(src, offset, std::move(strides), std::move(dynamic));
  }

  LoopProgram* p_;
  const absl::flat_hash_set<const HloInstruction*>& members_;
  absl::flat_hash_map<const HloInstruction*, int> memo_;
  absl::flat_hash_map<std::pair<const HloInstruction*, const hlo::Literal*>, int> input_index_;
};

void FindIdentityInputs(LoopProgram* p) {
  const std::vector<int64_t> identity =
      p->shape.rank() ? p->shape.Strides() : std::vector<int64_t>{};
  // One pass over the loads: whether each input is read, and only at the
  // iteration index.
  std::vector<char> read(p->inputs.size(), 0), ok(p->inputs.size(), 1);
  for (const LoopNode& n : p->nodes) {
    if (n.kind != LoopNode::Kind::kLoad || n.input < 0) continue;
    read[n.input] = 1;
    if (n.offset != 0 || n.strides != identity || !n.dynamic.empty()) ok[n.input] = 0;
  }
  for (size_t i = 0; i < p->inputs.size(); ++i) {
    const HloInstruction* in = p->inputs[i];
    if (in == nullptr || in->shape().element_type() != p->out_type ||
        in->shape().dimensions() != p->shape.dimensions()) {
      continue;
    }
    if (read[i] && ok[i]) p->identity_inputs.push_back(static_cast<int>(i));
  }
}

// Uses of each node: by other nodes, the root and reduce outputs.
std::vector<int> UseCounts(const LoopProgram& p) {
  std::vector<int> uses(p.nodes.size(), 0);
  for (const LoopNode& n : p.nodes) {
    for (int a : n.args) {
      if (a >= 0) ++uses[a];
    }
  }
  if (p.root >= 0) ++uses[p.root];
  for (const LoopReduceOutput& o : p.reduce_outputs) {
    if (o.node >= 0) ++uses[o.node];
    for (int a : o.args) {
      if (a >= 0) ++uses[a];
    }
  }
  return uses;
}

// Single-use producers computed inside their consumer's pass (bit for bit
// what the separate passes give): exp(x - s) and reduced selects / f32
// products. The producers become dead and are pruned.
void FuseIntoConsumers(LoopProgram* p) {
  const std::vector<int> uses = UseCounts(*p);
  for (LoopNode& n : p->nodes) {
    if (n.kind != LoopNode::Kind::kUnary || n.opcode != HloOpcode::kExp ||
        n.type != PrimitiveType::kF32 || n.invariant) {
      continue;
    }
    const LoopNode& d = p->nodes[n.args[0]];
    if (d.kind != LoopNode::Kind::kBinary || d.type != PrimitiveType::kF32 ||
        uses[n.args[0]] != 1 || d.invariant) {
      continue;
    }
    const bool sub = d.opcode == HloOpcode::kSubtract && d.binary_vs != nullptr;
    const bool add_rhs = d.opcode == HloOpcode::kAdd && d.binary_vs != nullptr;
    const bool add_lhs = d.opcode == HloOpcode::kAdd && d.binary_sv != nullptr;
    if (!sub && !add_rhs && !add_lhs) continue;
    const int x = add_lhs ? d.args[1] : d.args[0];
    const int sh = add_lhs ? d.args[0] : d.args[1];
    n.kind = LoopNode::Kind::kExpShift;
    n.negate = !sub;  // exp(x + s) == exp(x - (-s)) exactly
    n.args[0] = x;
    n.args[1] = sh;
  }
  for (LoopReduceOutput& o : p->reduce_outputs) {
    if (o.fold == nullptr || uses[o.node] != 1) continue;
    const LoopNode& v = p->nodes[o.node];
    if (v.invariant) continue;
    const auto inv = [&](int a) { return p->nodes[a].invariant; };
    if (v.kind == LoopNode::Kind::kSelect && !inv(v.args[0]) && !inv(v.args[1]) &&
        inv(v.args[2])) {
      o.fold_select = GetFoldSelectKernel(o.op, o.type);
      if (o.fold_select == nullptr) continue;
    } else if (v.kind == LoopNode::Kind::kBinary && v.opcode == HloOpcode::kMultiply &&
               !inv(v.args[0]) && !inv(v.args[1])) {
      o.fold_product = GetFoldProductKernel(o.op, o.type);
      if (o.fold_product == nullptr) continue;
    } else {
      continue;
    }
    for (int k = 0; k < 3; ++k) o.args[k] = v.args[k];
    o.node = -1;
  }
}

// A narrowing float convert at the root is what the store does anyway
// (round to nearest even), so the store reads the f32 value directly.
void DropRootConvert(LoopProgram* p) {
  if (p->root < 0) return;
  const LoopNode& n = p->nodes[p->root];
  if (n.kind != LoopNode::Kind::kConvert || n.type != p->out_type ||
      (n.type != PrimitiveType::kBF16 && n.type != PrimitiveType::kF16) ||
      p->nodes[n.args[0]].type != PrimitiveType::kF32) {
    return;
  }
  p->root = n.args[0];
}

// Drops nodes no result depends on (e.g. an iota folded into kIotaEq).
void PruneDeadNodes(LoopProgram* p) {
  const int n = static_cast<int>(p->nodes.size());
  std::vector<bool> live(n, false);
  if (p->root >= 0) live[p->root] = true;
  for (const LoopReduceOutput& o : p->reduce_outputs) {
    if (o.node >= 0) live[o.node] = true;
    for (int a : o.args) {
      if (a >= 0) live[a] = true;
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    if (!live[i]) continue;
    for (int a : p->nodes[i].args) {
      if (a >= 0) live[a] = true;
    }
  }
  std::vector<int> remap(n, -1);
  std::vector<LoopNode> kept;
  for (int i = 0; i < n; ++i) {
    if (!live[i]) continue;
    remap[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(p->nodes[i]));
  }
  for (LoopNode& node : kept) {
    for (int& a : node.args) {
      if (a >= 0) a = remap[a];
    }
  }
  p->nodes = std::move(kept);
  if (p->root >= 0) p->root = remap[p->root];
  for (LoopReduceOutput& o : p->reduce_outputs) {
    if (o.node >= 0) o.node = remap[o.node];
    for (int& a : o.args) {
      if (a >= 0) a = remap[a];
    }
  }
}

// Marks invariant values some consumer needs as a whole block.
void MarkSplats(LoopProgram* p) {
  for (LoopNode& n : p->nodes) {
    if (n.invariant) continue;
    for (int k = 0; k < 3; ++k) {
      const int a = n.args[k];
      if (a < 0 || !p->nodes[a].invariant) continue;
      const bool scalar = n.kind == LoopNode::Kind::kIotaEq ||
                          (n.kind == LoopNode::Kind::kExpShift && k == 1) ||
                          (k == 1 && (n.binary_vs || n.ternary_vsv)) ||
                          (k == 0 && n.binary_sv) || (k == 2 && n.ternary_vvs);
      if (!scalar) p->nodes[a].splat = true;
    }
  }
  if (p->root >= 0 && p->nodes[p->root].invariant) p->nodes[p->root].splat = true;
  for (const LoopReduceOutput& o : p->reduce_outputs) {
    if (o.node >= 0 && p->nodes[o.node].invariant) p->nodes[o.node].splat = true;
  }
}

// Lays out the per-thread scratch: invariant, unsplatted nodes get one
// element each; blocks are reused once their last reader has run (never by
// that reader itself, so kernels need not alias across element widths).
// Results (roots) stay live to the end. Blocks are as wide as the widest
// compute type, so a typical f32 program keeps its blocks in L1.
void AssignScratch(LoopProgram* p) {
  const int n = static_cast<int>(p->nodes.size());
  int width = 1;
  for (const LoopNode& node : p->nodes) width = std::max(width, ComputeWidth(node.type));
  const int64_t block_bytes = kLoopBlock * width;
  std::vector<int> last_use(n, -1);
  for (int i = 0; i < n; ++i) {
    for (int a : p->nodes[i].args) {
      if (a >= 0) last_use[a] = std::max(last_use[a], i);
    }
  }
  if (p->root >= 0) last_use[p->root] = n;
  for (const LoopReduceOutput& o : p->reduce_outputs) {
    if (o.node >= 0) last_use[o.node] = n;
    for (int a : o.args) {
      if (a >= 0) last_use[a] = n;
    }
  }
  std::vector<int> free_slots, slot(n, -1);
  std::vector<std::vector<int>> dies_after(n + 1);
  int blocks = 0, scalars = 0;
  for (int i = 0; i < n; ++i) {
    if (i > 0) {
      for (int d : dies_after[i - 1]) free_slots.push_back(slot[d]);
    }
    LoopNode& node = p->nodes[i];
    if (node.invariant && !node.splat) {
      node.scratch_offset = -(++scalars);  // resolved below
      continue;
    }
    if (!free_slots.empty()) {
      slot[i] = free_slots.back();
      free_slots.pop_back();
    } else {
      slot[i] = blocks++;
    }
    node.scratch_offset = slot[i] * block_bytes;
    const int lu = last_use[i] < 0 ? i : last_use[i];
    if (lu < n) dies_after[lu].push_back(i);
  }
  for (LoopNode& node : p->nodes) {
    if (node.scratch_offset < 0) {
      node.scratch_offset =
          blocks * block_bytes + (-node.scratch_offset - 1) * kMaxComputeWidth;
    }
  }
  p->scratch_bytes = blocks * block_bytes + scalars * kMaxComputeWidth + 64;
}

// Splats element 0 of a block over n elements of width w.
void Splat(uint8_t* block, int w, int64_t n) {
  switch (w) {
    case 1: std::memset(block + 1, block[0], n - 1); return;
    case 2: {
      uint16_t v;
      std::memcpy(&v, block, 2);
      std::fill_n(reinterpret_cast<uint16_t*>(block) + 1, n - 1, v);
      return;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, block, 4);
      std::fill_n(reinterpret_cast<uint32_t*>(block) + 1, n - 1, v);
      return;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, block, 8);
      std::fill_n(reinterpret_cast<uint64_t*>(block) + 1, n - 1, v);
      return;
    }
    default:  // 16 (c128)
      for (int64_t i = 1; i < n; ++i) std::memcpy(block + i * w, block, w);
  }
}

constexpr int64_t kPrefetchRows = 8;
constexpr int64_t kMinPrefetchLines = 4;

// Cache lines still to prefetch for a later block, `step` at a time, into
// L2 (prefetcht1), not L1: the rows are needed a few blocks later, and L1
// prefetches hold the core's line-fill buffers longer. Measured at the seed
// shape (grpo_tiled fwd_bwd bf16, best of 4, three alternating pairs): 8
// rows ahead into L2 0.661 s mean vs 4 rows into L1 0.699 s; 16 rows ahead
// and non-temporal prefetches were slower.
struct Prefetcher {
  const uint8_t* next = nullptr;
  const uint8_t* end = nullptr;
  int64_t step = 0;
  void Some() {
    for (int64_t k = 0; k < step && next < end; ++k, next += 64) __builtin_prefetch(next, 0, 2);
  }
  void Flush() {
    for (; next < end; next += 64) __builtin_prefetch(next, 0, 2);
  }
};
constexpr int64_t kStreamingStoreBytes = int64_t{256} << 20;

}  // namespace

bool UsesStreamingStores(const LoopProgram& p) {
  return p.update && p.output_bytes >= kStreamingStoreBytes;
}

// Slots of a row index (RowIndex): one per dimension (at least one) and
// the row it holds.
int64_t IndexSlots(int64_t rank) { return std::max<int64_t>(rank, 1) + 1; }

// A fresh row index for a program of `rank`.
std::vector<int64_t> NewIndex(int64_t rank) {
  std::vector<int64_t> idx(IndexSlots(rank), 0);
  idx.back() = -1;
  return idx;
}

// Whether an array accessed with `strides` over iteration space `space`
// advances by one fixed step (*step elements) from each row to the next
// (rows: the dimensions but the minor one, row-major): its strides over the
// row dimensions of extent > 1 collapse to one.
bool RowLinear(const hlo::Shape& space, absl::Span<const int64_t> strides, int64_t* step) {
  const int64_t rank = space.rank();
  *step = 0;
  int64_t rows_below = 1;  // rows one step along dimension d spans
  bool set = false;
  for (int64_t d = rank - 2; d >= 0; --d) {
    const int64_t extent = space.dimensions(d);
    if (extent > 1) {
      if (!set) {
        *step = strides[d];
        set = true;
      } else if (strides[d] != *step * rows_below) {
        return false;
      }
    }
    rows_below *= extent;
  }
  return true;
}

// Per-run state: the program, input pointers and dynamic offsets.
struct Evaluator {
  const LoopProgram& p;
  absl::Span<const void* const> inputs;
  int64_t rank;
  std::vector<int64_t> row_dims;   // dims except the minor one
  std::vector<int64_t> offsets;    // per node: static + dynamic offset

  // A load of a compiled program: where an item's first element is.
  struct JitLoad {
    const uint8_t* base;  // the element of iteration index 0
    const int64_t* strides;
    int width;
    int64_t minor;
    int64_t prefetch_bytes;  // ahead of the load (0: none)
    int input;               // the program input it reads
  };
  std::vector<JitLoad> jit_loads;  // in node order
  std::vector<int64_t> jit_row_steps;  // per load: bytes from one row to the next
  // Whether a compiled program's items of consecutive rows can go in one
  // call (JitItem::rows): every load advances by a fixed step per row (its
  // strides over the row dimensions collapse to one), and the program does
  // not read the row's multi-index (no iota along a row dimension).
  bool jit_rows_linear = false;
  // Compiled loads prefetch the bytes that follow the item's run in its row
  // (the next vocab tile of a rows-outer tile loop) instead of the run
  // kPrefetchRows rows ahead (LoopExecution::PrefetchNextRun); loads of
  // inputs not in `next_run_inputs` then prefetch nothing new (the lines of
  // their own run).
  bool prefetch_next_run = false;
  std::vector<bool> next_run_inputs;

  Evaluator(const LoopProgram& program, absl::Span<const void* const> in)
      : p(program), inputs(in), rank(program.shape.rank()) {
    for (int64_t d = 0; d + 1 < rank; ++d) row_dims.push_back(p.shape.dimensions(d));
    offsets.resize(p.nodes.size());
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      offsets[i] = p.nodes[i].offset + DynamicOffset(p.nodes[i].dynamic);
    }
    if (p.jit == nullptr) return;
    jit_rows_linear = true;
    for (const LoopNode& n : p.nodes) {
      if (n.kind == LoopNode::Kind::kIota && n.iota_dim < rank - 1) jit_rows_linear = false;
    }
    for (const LoopReduceOutput& o : p.reduce_outputs) {
      jit_inits.push_back(static_cast<const uint8_t*>(inputs[o.init_input]));
    }
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      const LoopNode& n = p.nodes[i];
      if (n.kind != LoopNode::Kind::kLoad) continue;
      JitLoad l;
      l.width = hlo::ByteWidth(n.type);
      l.base = static_cast<const uint8_t*>(inputs[n.input]) + offsets[i] * l.width;
      l.strides = n.strides.data();
      l.input = n.input;
      l.minor = rank ? n.strides[rank - 1] : 0;
      // As Eval: contiguous rows kPrefetchRows rows ahead.
      l.prefetch_bytes = !n.invariant && l.minor == 1 && rank >= 2
                             ? kPrefetchRows * n.strides[rank - 2] * l.width
                             : 0;
      jit_loads.push_back(l);
      int64_t step = 0;
      if (!RowLinear(p.shape, n.strides, &step)) jit_rows_linear = false;
      jit_row_steps.push_back(step * l.width);
    }
  }

  // idx[0..rank-2] = the multi-index of `row`. idx[IndexSlots() - 1]
  // remembers the row it holds (-1: none, as NewIndex leaves it): the same
  // row again costs nothing and the next one steps the index (items run in
  // row order; short rows such as NHWC channels would otherwise pay a
  // division per dimension per few elements).
  void RowIndex(int64_t row, int64_t* idx) const {
    int64_t& held = idx[IndexSlots(rank) - 1];
    if (row == held) return;
    if (held >= 0 && row == held + 1) {
      for (int64_t d = rank - 2; d >= 0; --d) {
        if (++idx[d] < row_dims[d]) break;
        idx[d] = 0;
      }
    } else {
      for (int64_t d = rank - 2, r = row; d >= 0; --d) {
        idx[d] = r % row_dims[d];
        r /= row_dims[d];
      }
    }
    held = row;
  }

  // One item of the compiled program (reduce programs: `flags`, `partials`
  // and `results` as JitItem describes), or with `rows` > 1 (only when
  // jit_rows_linear) the same item of `rows` consecutive rows from `row`
  // on, `out` advancing by `out_row_step` bytes per row.
  void RunJit(int64_t row, int64_t c0, int64_t n, int64_t* idx, uint8_t* out,
              int64_t flags = 0, uint8_t* partials = nullptr,
              uint8_t* const* results = nullptr, int64_t rows = 1,
              int64_t out_row_step = 0) const {
    RowIndex(row, idx);
    thread_local std::vector<const uint8_t*> ptrs;
    const size_t nl = jit_loads.size();
    ptrs.resize(2 * nl + 1);
    for (size_t k = 0; k < nl; ++k) {
      const JitLoad& l = jit_loads[k];
      int64_t off = c0 * l.minor;
      for (int64_t d = 0; d + 1 < rank; ++d) off += idx[d] * l.strides[d];
      ptrs[k] = l.base + off * l.width;
      int64_t ahead = l.prefetch_bytes;
      if (prefetch_next_run && ahead != 0) ahead = next_run_inputs[l.input] ? n * l.width : 0;
      ptrs[nl + k] = ptrs[k] + ahead;
    }
    JitItem item;
    item.loads = ptrs.data();
    item.prefetch = ptrs.data() + nl;
    item.idx = idx;
    item.c0 = c0;
    item.n = n;
    item.out = out;
    item.flags = flags;
    item.partials = partials;
    item.inits = jit_inits.data();
    item.results = results;
    item.rows = rows;
    item.row_steps = jit_row_steps.data();
    item.out_row_step = out_row_step;
    p.jit(&item);
  }
  std::vector<const uint8_t*> jit_inits;  // reduce programs: per output

  int64_t DynamicOffset(const std::vector<DynamicStart>& starts) const {
    int64_t off = 0;
    for (const DynamicStart& s : starts) {
      const int64_t v = ReadIndex(s.type, inputs[s.input]);
      off += std::clamp<int64_t>(v, 0, s.max_start) * s.stride;
    }
    return off;
  }

  uint8_t* Slot(uint8_t* scratch, int node) const {
    return scratch + p.nodes[node].scratch_offset;
  }

  // Evaluates every node for elements [c0, c0+n) of row `row`; vals[i] is
  // then node i's block (in scratch, or in the input array itself for a
  // contiguous load whose storage is its compute representation).
  void Eval(int64_t row, int64_t c0, int64_t n, uint8_t* scratch, int64_t* idx,
            uint8_t** vals) const {
    RowIndex(row, idx);
    Prefetcher prefetch;
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      prefetch.Some();
      const LoopNode& node = p.nodes[i];
      uint8_t* block = Slot(scratch, static_cast<int>(i));
      vals[i] = block;
      const int64_t m = node.invariant ? 1 : n;
      auto arg = [&](int k) { return vals[node.args[k]]; };
      switch (node.kind) {
        case LoopNode::Kind::kLoad: {
          int64_t base = offsets[i];
          for (int64_t d = 0; d + 1 < rank; ++d) base += idx[d] * node.strides[d];
          const int64_t minor = rank ? node.strides[rank - 1] : 0;
          base += c0 * minor;
          const int width = hlo::ByteWidth(node.type);
          const uint8_t* src = static_cast<const uint8_t*>(inputs[node.input]) +
                               base * width;
          if (node.direct && minor == 1) {
            vals[i] = const_cast<uint8_t*>(src);  // read only: never a kernel's output
          } else {
            node.load(src, minor, block, m);
          }
          // Rows of a tile are short runs far apart (e.g. 4 KiB of a 300 KiB
          // logits row): hardware prefetchers stop at each page, so fetch
          // the run kPrefetchRows rows ahead while this block is computed
          // (none at all is 40% slower).
          // The lines are requested a few at a time between the following
          // nodes, not in one burst: a burst fills the core's miss buffers
          // and stalls it (measured: ~5% of the seed shape's fwd_bwd).
          if (m > 1 && minor == 1 && rank >= 2) {
            prefetch.Flush();
            prefetch.next = src + kPrefetchRows * node.strides[rank - 2] * width;
            prefetch.end = prefetch.next + m * width;
            const int64_t lines = (m * width + 63) / 64;
            const int64_t later = static_cast<int64_t>(p.nodes.size() - i);
            prefetch.step = std::max<int64_t>(kMinPrefetchLines, (lines + later - 1) / later);
          }
          break;
        }
        case LoopNode::Kind::kIota:
          if (rank == 0) {
            FillIota(node.type, 0, block, 1);
          } else if (node.iota_dim == rank - 1) {
            FillIota(node.type, c0, block, m);
          } else {
            FillIota(node.type, idx[node.iota_dim], block, 1);
          }
          break;
        case LoopNode::Kind::kUnary:
        case LoopNode::Kind::kConvert:
        case LoopNode::Kind::kIsFinite:
          node.unary(arg(0), block, m);
          break;
        case LoopNode::Kind::kBinary:
        case LoopNode::Kind::kCompare: {
          BinaryKernel k = node.binary;
          if (!node.invariant) {
            if (node.binary_vs && p.nodes[node.args[1]].invariant) k = node.binary_vs;
            if (node.binary_sv && p.nodes[node.args[0]].invariant) k = node.binary_sv;
          }
          k(arg(0), arg(1), block, m);
          break;
        }
        case LoopNode::Kind::kSelect:
        case LoopNode::Kind::kClamp: {
          TernaryKernel k = node.ternary;
          if (!node.invariant) {
            if (node.ternary_vvs && p.nodes[node.args[2]].invariant) k = node.ternary_vvs;
            if (node.ternary_vsv && p.nodes[node.args[1]].invariant) k = node.ternary_vsv;
          }
          k(arg(0), arg(1), arg(2), block, m);
          break;
        }
        case LoopNode::Kind::kExpShift: {
          const float s = *reinterpret_cast<const float*>(arg(1));
          simd::ExpShifted(reinterpret_cast<const float*>(arg(0)), node.negate ? -s : s,
                           reinterpret_cast<float*>(block), m);
          break;
        }
        case LoopNode::Kind::kIotaEq: {
          const int64_t at = ReadIndex(p.nodes[node.args[0]].type, arg(0)) - c0;
          std::memset(block, node.negate ? 1 : 0, m);
          if (at >= 0 && at < m) block[at] = node.negate ? 0 : 1;
          break;
        }
      }
      if (node.splat && n > 1) Splat(block, ComputeWidth(node.type), n);
    }
    prefetch.Flush();
  }
};

namespace {

// Whether node `i` has the same value at every element of the iteration
// space: built from constants and loads that ignore the index.
// Whether node `i` has the same value at every element. Nodes are in
// topological order, so one forward pass decides every node (no recursion:
// fused chains can be hundreds of thousands of nodes long).
bool IsUniform(const LoopProgram& p, int i) {
  std::vector<char> uniform(static_cast<size_t>(i) + 1, 0);
  for (int k = 0; k <= i; ++k) {
    const LoopNode& n = p.nodes[k];
    switch (n.kind) {
      case LoopNode::Kind::kLoad:
        uniform[k] = n.dynamic.empty() && std::all_of(n.strides.begin(), n.strides.end(),
                                                      [](int64_t s) { return s == 0; });
        break;
      case LoopNode::Kind::kIota:
      case LoopNode::Kind::kIotaEq:
        uniform[k] = 0;
        break;
      default:
        uniform[k] = 1;
        for (int a : n.args) {
          if (a >= 0 && !uniform[a]) uniform[k] = 0;
        }
    }
  }
  return uniform[i];
}

// Per-thread scratch, reused across loops (a few KB per slot).
uint8_t* ThreadScratch(size_t bytes) {
  thread_local std::vector<uint64_t> scratch;
  if (scratch.size() < bytes / 8 + 1) scratch.resize(bytes / 8 + 1);
  return reinterpret_cast<uint8_t*>(scratch.data());
}

int ThreadsFor(int64_t elements, int num_threads) {
  // Below ~32K elements a parallel loop costs more than it saves.
  if (elements < (1 << 15)) return 1;
  return std::max(1, num_threads);
}

absl::StatusOr<LoopProgram> FinishProgram(LoopProgram p) {
  DropRootConvert(&p);
  FuseIntoConsumers(&p);
  PruneDeadNodes(&p);
  MarkSplats(&p);
  AssignScratch(&p);
  return p;
}

}  // namespace

absl::StatusOr<LoopProgram> BuildLoopProgram(
    const HloInstruction* root,
    const absl::flat_hash_set<const HloInstruction*>& members) {
  LoopProgram p;
  p.shape = hlo::Shape(root->shape().element_type(), root->shape().dimensions());
  p.out_type = root->shape().element_type();
  p.store = GetStoreKernel(p.out_type);
  p.stream_store = GetStreamingStoreKernel(p.out_type);
  p.output_bytes = root->shape().byte_size();
  Builder b(&p, members);
  ASSIGN_OR_RETURN(p.root, b.Build(root));
  FindIdentityInputs(&p);
  return FinishProgram(std::move(p));
}

absl::StatusOr<LoopProgram> BuildLoopMultiReduceProgram(
    absl::Span<const HloInstruction* const> reduces,
    const absl::flat_hash_set<const HloInstruction*>& members) {
  if (reduces.empty()) return absl::InternalError("loop fusion: no reduce roots");
  const HloInstruction* first = reduces.front();
  LoopProgram p;
  p.shape = hlo::Shape(first->operand(0)->shape().element_type(),
                       first->operand(0)->shape().dimensions());
  p.reduce = true;
  const int64_t rank = p.shape.rank();
  std::vector<int64_t> dims = first->dimensions();
  std::sort(dims.begin(), dims.end());
  const int64_t k = rank - static_cast<int64_t>(dims.size());
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (dims[i] != k + i) {
      return absl::InternalError(absl::StrCat(
          "%", first->name(), " does not reduce trailing dimensions"));
    }
  }
  p.num_kept_dims = k;
  Builder b(&p, members);
  for (const HloInstruction* reduce : reduces) {
    std::optional<HloOpcode> op = MatchReducer(reduce->to_apply());
    std::vector<int64_t> rd = reduce->dimensions();
    std::sort(rd.begin(), rd.end());
    if (reduce->operand_count() != 2 || !op.has_value() || rd != dims ||
        reduce->operand(0)->shape().dimensions() != p.shape.dimensions()) {
      return absl::InternalError(absl::StrCat("%", reduce->name(),
                                              " is not a streaming reduce of this loop"));
    }
    LoopReduceOutput out;
    out.op = *op;
    ASSIGN_OR_RETURN(out.node, b.Build(reduce->operand(0)));
    out.type = reduce->shape().element_type();
    out.store = GetStoreKernel(out.type);
    ASSIGN_OR_RETURN(out.combine, GetBinaryKernel(*op, out.type));
    out.fold = GetFoldKernel(*op, out.type);
    uint64_t identity = 0;
    if (!ReducerIdentity(*op, out.type, &identity)) out.fold = nullptr;
    const int w = ComputeWidth(out.type);
    out.identity_lanes.resize(kFoldLanes * w);
    for (int l = 0; l < kFoldLanes; ++l) std::memcpy(&out.identity_lanes[l * w], &identity, w);
    p.reduce_outputs.push_back(out);
  }
  // Init values are inputs like any other (loaded once per segment); a
  // constant fused into the group (e.g. also feeding a broadcast) has no
  // buffer and is read from its literal.
  for (size_t i = 0; i < reduces.size(); ++i) {
    p.reduce_outputs[i].init_input = b.ScalarInput(reduces[i]->operand(1));
  }
  p.out_type = p.reduce_outputs.back().type;
  return FinishProgram(std::move(p));
}

absl::StatusOr<LoopProgram> BuildLoopReduceProgram(
    const HloInstruction* reduce,
    const absl::flat_hash_set<const HloInstruction*>& members) {
  const HloInstruction* roots[] = {reduce};
  return BuildLoopMultiReduceProgram(roots, members);
}

absl::StatusOr<LoopProgram> BuildLoopUpdateProgram(
    const HloInstruction* dus,
    const absl::flat_hash_set<const HloInstruction*>& members) {
  if (!hlo::IsFusibleUpdate(*dus)) {
    return absl::InternalError(absl::StrCat("%", dus->name(), " is not a fusible update"));
  }
  const HloInstruction* update = dus->operand(1);
  LoopProgram p;
  p.shape = hlo::Shape(update->shape().element_type(), update->shape().dimensions());
  p.update = true;
  p.out_type = dus->shape().element_type();
  p.store = GetStoreKernel(p.out_type);
  p.stream_store = GetStreamingStoreKernel(p.out_type);
  p.output_bytes = dus->shape().byte_size();
  p.out_strides = dus->shape().rank() ? dus->shape().Strides() : std::vector<int64_t>{};
  Builder b(&p, members);
  ASSIGN_OR_RETURN(p.root, b.Build(update));
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (p.inputs[i] == dus->operand(0)) p.update_base_input = static_cast<int>(i);
  }
  for (int64_t d = 0; d < dus->shape().rank(); ++d) {
    const int64_t max_start = dus->shape().dimensions(d) - update->shape().dimensions(d);
    if (max_start <= 0) continue;
    const HloInstruction* start = dus->operand(d + 2);
    p.out_starts.push_back({b.ScalarInput(start), start->shape().element_type(),
                            p.out_strides[d], max_start});
  }
  return FinishProgram(std::move(p));
}

std::string LoopProgramToString(const LoopProgram& p) {
  static const char* const kKinds[] = {"load",    "iota",      "unary",  "binary",
                                       "compare", "convert",   "is-finite", "select",
                                       "clamp",   "iota-eq",   "exp-shift"};
  std::string out;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const LoopNode& n = p.nodes[i];
    absl::StrAppend(&out, "n", i, " = ", kKinds[static_cast<int>(n.kind)], "(");
    for (int k = 0; k < 3 && n.args[k] >= 0; ++k) {
      absl::StrAppend(&out, k ? ", " : "", "n", n.args[k],
                      p.nodes[n.args[k]].invariant && !n.invariant ? "*" : "");
    }
    if (n.kind == LoopNode::Kind::kLoad) {
      absl::StrAppend(&out, "in", n.input, n.direct ? " direct" : "",
                      n.dynamic.empty() ? "" : " dynamic");
    }
    absl::StrAppend(&out, ") ", hlo::PrimitiveTypeName(n.type),
                    n.invariant ? (n.splat ? " invariant splat" : " invariant") : "", "\n");
  }
  if (p.root >= 0) absl::StrAppend(&out, "root n", p.root, p.update ? " (update)" : "", "\n");
  for (const LoopReduceOutput& o : p.reduce_outputs) {
    if (o.node >= 0) {
      absl::StrAppend(&out, "reduce n", o.node, "\n");
    } else {
      absl::StrAppend(&out, "reduce ", o.fold_select ? "select" : "product", "(n", o.args[0],
                      ", n", o.args[1], o.fold_select ? absl::StrCat(", n", o.args[2]) : "",
                      ")\n");
    }
  }
  return out;
}

LoopExecution::LoopExecution(const LoopProgram& program, absl::Span<const void* const> inputs,
                             absl::Span<void* const> outputs)
    : p_(program), outputs_(outputs.begin(), outputs.end()) {
  const int64_t rank = p_.shape.rank();
  cols_ = rank ? p_.shape.dimensions(rank - 1) : 1;
  for (int64_t d = 0; d + 1 < rank; ++d) rows_ *= p_.shape.dimensions(d);
  bpr_ = (cols_ + kLoopBlock - 1) / kLoopBlock;
  eval_ = std::make_unique<Evaluator>(p_, inputs);
  if (!p_.reduce) {
    // Update programs store rows of the update into the larger array.
    out_row_strides_.resize(std::max<int64_t>(rank - 1, 0));
    if (p_.update) {
      for (int64_t d = 0; d + 1 < rank; ++d) out_row_strides_[d] = p_.out_strides[d];
      out_base_ = eval_->DynamicOffset(p_.out_starts);
    }
    // An update of an array far beyond the last-level cache (dlogits of a
    // [B,T,V] tile loop) streams its stores past the cache: no
    // read-for-ownership of lines it overwrites whole. (Measured ~5% on the
    // seed shape's backward; plain elementwise outputs lose with it, as a
    // following step usually reads them back.)
    store_ = UsesStreamingStores(p_) ? p_.stream_store : p_.store;
    uniform_ = !p_.update && p_.root >= 0 && IsUniform(p_, p_.root);
    int64_t out_step = cols_;
    batch_rows_ = p_.jit != nullptr && eval_->jit_rows_linear && bpr_ == 1 &&
                  (!p_.update || RowLinear(p_.shape, out_row_strides_, &out_step));
    out_row_step_ = out_step * hlo::ByteWidth(p_.out_type);
    return;
  }
  // Streaming reductions over dims [k, rank): segment s covers rows
  // [s*seg_rows, (s+1)*seg_rows). Each chunk of kReduceChunkBlocks row-blocks
  // folds into kFoldLanes lanes per output (from the reducer's identity; a
  // block-wide accumulator when there is no fold kernel), lanes fold
  // pairwise into a partial, and the partials of a segment combine left to
  // right after init.
  const int64_t k = p_.num_kept_dims;
  for (int64_t d = 0; d < k; ++d) segments_ *= p_.shape.dimensions(d);
  seg_rows_ = k >= rank ? 1 : rows_ / std::max<int64_t>(segments_, 1);
  seg_items_ = (k >= rank || rows_ == 0) ? 0 : seg_rows_ * bpr_;
  chunks_ = (seg_items_ + kReduceChunkBlocks - 1) / kReduceChunkBlocks;
  // Every segment one row of at most one block: consecutive segments run as
  // one compiled call.
  batch_rows_ = p_.jit != nullptr && eval_->jit_rows_linear && seg_items_ == 1;
}

LoopExecution::~LoopExecution() = default;
LoopExecution::LoopExecution(LoopExecution&&) = default;

void LoopExecution::PrefetchNextRun(const std::vector<bool>& inputs) {
  eval_->prefetch_next_run = true;
  eval_->next_run_inputs = inputs;
  eval_->next_run_inputs.resize(p_.inputs.size(), false);
}

void LoopExecution::EvalStore(int64_t row, int64_t c0, int64_t n, uint8_t* scratch,
                              int64_t* idx, uint8_t** vals) const {
  if (p_.jit != nullptr) {
    eval_->RowIndex(row, idx);
  } else {
    eval_->Eval(row, c0, n, scratch, idx, vals);
  }
  uint8_t* out = OutAt(row, c0, idx);
  if (p_.jit != nullptr) {
    eval_->RunJit(row, c0, n, idx, out);
    return;
  }
  store_(vals[p_.root], out, n);
}

uint8_t* LoopExecution::OutAt(int64_t row, int64_t c0, const int64_t* idx) const {
  int64_t pos = row * cols_ + c0;
  if (p_.update) {
    pos = out_base_ + c0;
    for (int64_t d = 0; d + 1 < p_.shape.rank(); ++d) pos += idx[d] * out_row_strides_[d];
  }
  return static_cast<uint8_t*>(outputs_[0]) + pos * hlo::ByteWidth(p_.out_type);
}

void LoopExecution::StoreRows(int64_t first, int64_t end, int64_t* idx) const {
  eval_->RowIndex(first, idx);
  eval_->RunJit(first, 0, cols_, idx, OutAt(first, 0, idx), 0, nullptr, nullptr, end - first,
                out_row_step_);
}

void LoopExecution::ReduceRows(int64_t first, int64_t end, uint8_t* scratch,
                               int64_t* idx) const {
  thread_local std::vector<uint64_t> partials;
  partials.resize(p_.reduce_outputs.size());
  eval_->RunJit(first, 0, cols_, idx, scratch + p_.scratch_bytes,
                kJitInitLanes | kJitFinishChunk | kJitFinishSegment,
                reinterpret_cast<uint8_t*>(partials.data()), ResultSlots(first), end - first);
}

uint8_t** LoopExecution::ResultSlots(int64_t segment) const {
  thread_local std::vector<uint8_t*> results;
  results.resize(p_.reduce_outputs.size());
  for (size_t o = 0; o < results.size(); ++o) {
    results[o] = static_cast<uint8_t*>(outputs_[o]) +
                 segment * hlo::ByteWidth(p_.reduce_outputs[o].type);
  }
  return results.data();
}

// Folds chunk `c` of segment `s` into `partial` (one word per output).
void LoopExecution::ReduceChunk(int64_t s, int64_t c, uint8_t* scratch, int64_t* idx,
                                uint8_t** node_vals, uint64_t* partial) const {
  uint8_t* acc_base = scratch + p_.scratch_bytes;
  const size_t nout = p_.reduce_outputs.size();
  if (p_.jit != nullptr) {
    // The compiled program starts, folds and finishes the lanes itself,
    // and with one chunk per segment stores the segment's results too.
    const int64_t first = c * kReduceChunkBlocks;
    const int64_t end = std::min(seg_items_, first + kReduceChunkBlocks);
    uint8_t** results = ResultSlots(s);
    for (int64_t item = first; item < end; ++item) {
      const int64_t row = s * seg_rows_ + item / bpr_;
      const int64_t c0 = (item % bpr_) * kLoopBlock;
      int64_t flags = item == first ? kJitInitLanes : 0;
      if (item + 1 == end) flags |= kJitFinishChunk | (chunks_ == 1 ? kJitFinishSegment : 0);
      eval_->RunJit(row, c0, std::min(kLoopBlock, cols_ - c0), idx, acc_base, flags,
                    reinterpret_cast<uint8_t*>(partial), results);
    }
    return;
  }
  for (size_t o = 0; o < nout; ++o) {  // identity lanes
    const LoopReduceOutput& ro = p_.reduce_outputs[o];
    if (ro.fold == nullptr) continue;
    std::memcpy(acc_base + o * kLoopBlock * 8, ro.identity_lanes.data(),
                ro.identity_lanes.size());
  }
  int64_t filled = 0;  // block-wide accumulators (no fold kernel)
  const int64_t last = std::min(seg_items_, (c + 1) * kReduceChunkBlocks);
  for (int64_t item = c * kReduceChunkBlocks; item < last; ++item) {
    const int64_t row = s * seg_rows_ + item / bpr_;
    const int64_t c0 = (item % bpr_) * kLoopBlock;
    const int64_t n = std::min(kLoopBlock, cols_ - c0);
    eval_->Eval(row, c0, n, scratch, idx, node_vals);
    const int64_t common = std::min(filled, n);
    for (size_t o = 0; o < nout; ++o) {
      const LoopReduceOutput& ro = p_.reduce_outputs[o];
      uint8_t* acc = acc_base + o * kLoopBlock * 8;
      if (ro.fold_select != nullptr) {
        ro.fold_select(acc, node_vals[ro.args[0]], node_vals[ro.args[1]],
                       node_vals[ro.args[2]], n);
        continue;
      }
      if (ro.fold_product != nullptr) {
        ro.fold_product(acc, node_vals[ro.args[0]], node_vals[ro.args[1]], n);
        continue;
      }
      const uint8_t* vals = node_vals[ro.node];
      if (ro.fold != nullptr) {
        ro.fold(acc, vals, n);
        continue;
      }
      const int w = ComputeWidth(ro.type);
      if (common > 0) ro.combine(acc, vals, acc, common);
      if (n > filled) std::memcpy(acc + filled * w, vals + filled * w, (n - filled) * w);
    }
    filled = std::max(filled, n);
  }
  for (size_t o = 0; o < nout; ++o) {
    const LoopReduceOutput& ro = p_.reduce_outputs[o];
    const int w = ComputeWidth(ro.type);
    uint8_t* acc = acc_base + o * kLoopBlock * 8;
    for (int64_t f = ro.fold != nullptr ? kFoldLanes : filled; f > 1;) {
      const int64_t half = (f + 1) / 2;
      ro.combine(acc, acc + half * w, acc, f - half);
      f = half;
    }
    // An empty chunk of a block-wide accumulator leaves it unset; chunks
    // are never empty (chunks = ceil(items / kReduceChunkBlocks)).
    std::memcpy(&partial[o], acc, w);
  }
}

// Combines segment s's partials (chunk-major, one word per output) after
// the init value, left to right, and stores the results.
void LoopExecution::FinishSegment(int64_t s, const uint64_t* partials) const {
  if (p_.jit != nullptr && chunks_ == 1) return;  // the compiled program stored them
  const size_t nout = p_.reduce_outputs.size();
  for (size_t o = 0; o < nout; ++o) {
    const LoopReduceOutput& ro = p_.reduce_outputs[o];
    const uint8_t* init_src = static_cast<const uint8_t*>(eval_->inputs[ro.init_input]);
    uint64_t acc = 0;
    GetLoadKernel(ro.type)(init_src, 0, &acc, 1);
    for (int64_t c = 0; c < chunks_; ++c) ro.combine(&acc, &partials[c * nout + o], &acc, 1);
    ro.store(&acc, static_cast<uint8_t*>(outputs_[o]) + s * hlo::ByteWidth(ro.type), 1);
  }
}

size_t LoopExecution::ScratchBytes() const {
  return static_cast<size_t>(p_.scratch_bytes) +
         (p_.reduce ? p_.reduce_outputs.size() * kLoopBlock * 8 : 0);
}

void LoopExecution::Run(int num_threads) const {
  if (rows_ * cols_ == 0 && !p_.reduce) return;
  if (p_.reduce && segments_ == 0) return;
  const int threads = ThreadsFor(rows_ * cols_, num_threads);
  if (uniform_) {
    // Every element is the same value (a broadcast constant, e.g. the zero
    // dlogits a tile loop then overwrites): one element is computed and
    // stored, then copied over the output, streamed past the caches when
    // the output is far larger than them.
    uint8_t* scratch = ThreadScratch(ScratchBytes());
    std::vector<int64_t> idx = NewIndex(p_.shape.rank());
    std::vector<uint8_t*> vals(p_.nodes.size());
    eval_->Eval(0, 0, 1, scratch, idx.data(), vals.data());
    alignas(16) uint8_t value[kMaxComputeWidth] = {};
    p_.store(vals[p_.root], value, 1);
    const int width = hlo::ByteWidth(p_.out_type);
    const int64_t total = rows_ * cols_ * width;
    // Zeros into memory fresh from the system (the first run's dlogits,
    // 1.24 GB at the seed shape) are already there.
    if (std::all_of(value, value + width, [](uint8_t b) { return b == 0; }) &&
        HostTakeZeroed(outputs_[0])) {
      return;
    }
    const bool streaming = p_.output_bytes >= kStreamingStoreBytes;
    constexpr int64_t kPiece = int64_t{1} << 20;  // bytes, a multiple of any width
    uint8_t* out = static_cast<uint8_t*>(outputs_[0]);
    ParallelFor(threads, (total + kPiece - 1) / kPiece, [&](int64_t begin, int64_t end) {
      const int64_t b0 = begin * kPiece, b1 = std::min(total, end * kPiece);
      FillElements(out + b0, b1 - b0, value, width, streaming);
    });
    return;
  }
  if (!p_.reduce) {
    ParallelFor(threads, rows_ * bpr_, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> idx = NewIndex(p_.shape.rank());
      if (batch_rows_) {  // items are rows
        StoreRows(begin, end, idx.data());
        return;
      }
      uint8_t* scratch = ThreadScratch(ScratchBytes());
      std::vector<uint8_t*> vals(p_.nodes.size());
      for (int64_t item = begin; item < end; ++item) {
        const int64_t c0 = (item % bpr_) * kLoopBlock;
        EvalStore(item / bpr_, c0, std::min(kLoopBlock, cols_ - c0), scratch, idx.data(),
                  vals.data());
      }
    });
    return;
  }
  const size_t nout = p_.reduce_outputs.size();
  std::vector<uint64_t> partials(std::max<int64_t>(segments_ * chunks_, 1) * nout);
  ParallelFor(threads, segments_ * chunks_, [&](int64_t begin, int64_t end) {
    uint8_t* scratch = ThreadScratch(ScratchBytes());
    std::vector<int64_t> idx = NewIndex(p_.shape.rank());
    if (batch_rows_) {  // tasks are segments, each one row
      ReduceRows(begin, end, scratch, idx.data());
      return;
    }
    std::vector<uint8_t*> vals(p_.nodes.size());
    for (int64_t task = begin; task < end; ++task) {
      ReduceChunk(task / chunks_, task % chunks_, scratch, idx.data(), vals.data(),
                  &partials[task * nout]);
    }
  });
  for (int64_t s = 0; s < segments_; ++s) FinishSegment(s, &partials[s * chunks_ * nout]);
}

void LoopExecution::RunUnits(int64_t begin, int64_t end) const {
  // Called many times per run (once per chunk of rows of a row chain): the
  // per-call arrays are thread-local, not allocated each time.
  thread_local std::vector<int64_t> idx;
  thread_local std::vector<uint8_t*> vals;
  thread_local std::vector<uint64_t> partials;
  idx.assign(IndexSlots(p_.shape.rank()), 0);  // as NewIndex, without allocating
  idx.back() = -1;
  vals.resize(p_.nodes.size());
  uint8_t* scratch = ThreadScratch(ScratchBytes());
  if (batch_rows_ && !p_.reduce && begin % cols_ == 0 && end % cols_ == 0) {
    if (end > begin) StoreRows(begin / cols_, end / cols_, idx.data());
    return;
  }
  if (batch_rows_ && p_.reduce) {
    if (end > begin) ReduceRows(begin, end, scratch, idx.data());
    return;
  }
  if (!p_.reduce) {
    for (int64_t e = begin; e < end;) {
      const int64_t row = e / cols_, c0 = e % cols_;
      const int64_t n = std::min({kLoopBlock, cols_ - c0, end - e});
      EvalStore(row, c0, n, scratch, idx.data(), vals.data());
      e += n;
    }
    return;
  }
  const size_t nout = p_.reduce_outputs.size();
  partials.resize(std::max<int64_t>(chunks_, 1) * nout);
  for (int64_t s = begin; s < end; ++s) {
    for (int64_t c = 0; c < chunks_; ++c) {
      ReduceChunk(s, c, scratch, idx.data(), vals.data(), &partials[c * nout]);
    }
    FinishSegment(s, partials.data());
  }
}

namespace {

int64_t DimProduct(const hlo::Shape& s, int64_t from, int64_t to) {
  int64_t p = 1;
  for (int64_t d = from; d < to; ++d) p *= s.dimensions(d);
  return p;
}

}  // namespace

bool AccessesOwnRow(const hlo::Shape& space, int64_t row_dims, absl::Span<const int64_t> strides,
                    int64_t offset, int64_t row_length) {
  const int64_t rank = space.rank();
  if (offset < 0 || static_cast<int64_t>(strides.size()) < rank) return false;
  for (int64_t d = 0; d < row_dims; ++d) {
    if (space.dimensions(d) > 1 && strides[d] != row_length * DimProduct(space, d + 1, row_dims)) {
      return false;
    }
  }
  int64_t span = offset;
  for (int64_t d = row_dims; d < rank; ++d) {
    if (space.dimensions(d) <= 1) continue;
    if (strides[d] < 0) return false;
    span += (space.dimensions(d) - 1) * strides[d];
  }
  return span < row_length;
}

int64_t LoopExecution::SplitRows(int64_t rows, absl::Span<const int64_t> input_elements,
                                 std::vector<bool>* own_row) const {
  own_row->assign(p_.inputs.size(), false);
  const hlo::Shape& space = p_.shape;
  const int64_t rank = space.rank();
  if (rows < 1) return 0;
  int64_t row_dims = -1;
  int64_t units = 0;
  if (p_.reduce) {
    if (DimProduct(space, 0, p_.num_kept_dims) != rows) return 0;
    row_dims = p_.num_kept_dims;
    units = 1;
  } else {
    for (int64_t k = 0; k <= rank; ++k) {
      if (DimProduct(space, 0, k) == rows) {
        row_dims = k;
        units = DimProduct(space, k, rank);
        break;
      }
    }
    if (row_dims < 0) return 0;
    if (p_.update) {
      const int64_t out_elements = p_.output_bytes / std::max<int64_t>(1, hlo::ByteWidth(p_.out_type));
      if (out_elements % rows != 0 ||
          !AccessesOwnRow(space, row_dims, p_.out_strides, out_base_, out_elements / rows)) {
        return 0;
      }
    }
  }
  std::vector<bool> shared(p_.inputs.size(), false);
  for (size_t i = 0; i < p_.nodes.size(); ++i) {
    const LoopNode& n = p_.nodes[i];
    for (const DynamicStart& d : n.dynamic) shared[d.input] = true;
    if (n.kind != LoopNode::Kind::kLoad) continue;
    const int64_t elements = n.input < static_cast<int64_t>(input_elements.size())
                                 ? input_elements[n.input]
                                 : -1;
    if (elements <= 0 || elements % rows != 0 ||
        !AccessesOwnRow(space, row_dims, n.strides, eval_->offsets[i], elements / rows)) {
      shared[n.input] = true;
    } else {
      (*own_row)[n.input] = true;
    }
  }
  for (const DynamicStart& d : p_.out_starts) shared[d.input] = true;
  for (const LoopReduceOutput& o : p_.reduce_outputs) {
    if (o.init_input >= 0) shared[o.init_input] = true;
  }
  for (size_t i = 0; i < shared.size(); ++i) {
    if (shared[i]) (*own_row)[i] = false;
  }
  return units;
}

bool LoopExecution::UpdateRowSpan(int64_t rows, int64_t* begin, int64_t* end) const {
  if (!p_.update || rows < 1) return false;
  const hlo::Shape& space = p_.shape;
  const int64_t rank = space.rank();
  if (rank == 0 || DimProduct(space, 0, rank - 1) != rows) return false;
  const int64_t out_elements = p_.output_bytes / std::max<int64_t>(1, hlo::ByteWidth(p_.out_type));
  if (out_elements % rows != 0) return false;
  const int64_t row_length = out_elements / rows;
  if (!AccessesOwnRow(space, rank - 1, p_.out_strides, out_base_, row_length)) return false;
  const int64_t minor = space.dimensions(rank - 1);
  if (minor > 1 && p_.out_strides[rank - 1] != 1) return false;
  *begin = out_base_;
  *end = out_base_ + minor;
  return true;
}

void RunLoopProgram(const LoopProgram& p, absl::Span<const void* const> inputs,
                    absl::Span<void* const> outputs, int num_threads) {
  LoopExecution(p, inputs, outputs).Run(num_threads);
}

}  // namespace tpuoff::runtime
