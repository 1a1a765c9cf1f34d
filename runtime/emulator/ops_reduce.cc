// General reductions and the scalar evaluator of reducer computations.
#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "runtime/emulator/loop_program.h"
#include "runtime/emulator/plan.h"
#include "runtime/emulator/ops.h"

namespace tpuoff::runtime {

using hlo::HloInstruction;
using hlo::HloOpcode;
using hlo::PrimitiveType;
using hlo::Shape;

absl::StatusOr<std::unique_ptr<ScalarEvaluator>> ScalarEvaluator::Create(
    const hlo::HloComputation* c) {
  auto ev = std::unique_ptr<ScalarEvaluator>(new ScalarEvaluator());
  absl::flat_hash_map<const HloInstruction*, std::vector<int>> slots;
  int next_arg = 0;
  std::vector<int> arg_base(c->num_parameters());
  for (int64_t i = 0; i < c->num_parameters(); ++i) {
    arg_base[i] = next_arg;
    next_arg += static_cast<int>(LeafCount(c->parameter(i)->shape()));
  }
  auto fail = [&](const HloInstruction* x) {
    return absl::UnimplementedError(absl::StrCat(
        "computation ", c->name(), ": %", x->name(), " (",
        hlo::HloOpcodeString(x->opcode()),
        ") is not supported in a scalar reducer/combiner"));
  };
  for (const HloInstruction* x : c->InstructionOrder()) {
    const HloOpcode op = x->opcode();
    if (op == HloOpcode::kTuple) {
      std::vector<int> s;
      for (const HloInstruction* o : x->operands()) {
        s.insert(s.end(), slots[o].begin(), slots[o].end());
      }
      slots[x] = s;
      continue;
    }
    if (op == HloOpcode::kGetTupleElement) {
      const Shape& t = x->operand(0)->shape();
      int64_t start = 0;
      for (int64_t i = 0; i < x->tuple_index(); ++i) start += LeafCount(t.tuple_shapes(i));
      const std::vector<int>& all = slots[x->operand(0)];
      slots[x] = std::vector<int>(all.begin() + start,
                                  all.begin() + start + LeafCount(x->shape()));
      continue;
    }
    if (op == HloOpcode::kParameter) {
      std::vector<int> s;
      for (int64_t k = 0; k < LeafCount(x->shape()); ++k) {
        Node n;
        n.kind = Node::Kind::kArg;
        n.arg = arg_base[x->parameter_number()] + k;
        n.out = ev->num_slots_++;
        s.push_back(n.out);
        ev->nodes_.push_back(n);
      }
      slots[x] = s;
      continue;
    }
    if (!x->shape().IsArray() || x->shape().rank() != 0) return fail(x);
    Node n;
    n.out = ev->num_slots_++;
    const PrimitiveType t = x->shape().element_type();
    for (int64_t i = 0; i < x->operand_count() && i < 3; ++i) {
      n.args[i] = slots[x->operand(i)].empty() ? 0 : slots[x->operand(i)][0];
    }
    if (op == HloOpcode::kConstant) {
      n.kind = Node::Kind::kConst;
      if (!x->has_literal()) return fail(x);
      GetLoadKernel(t)(x->literal().raw(), 0, n.value.bytes, 1);
    } else if (op == HloOpcode::kReal || op == HloOpcode::kImag ||
               (op == HloOpcode::kAbs && hlo::IsComplex(x->operand(0)->shape().element_type()))) {
      // A part of a complex value (jnp.sort / max of complex: comparators
      // order by real, then imaginary part).
      n.kind = Node::Kind::kUnary;
      ASSIGN_OR_RETURN(n.unary,
                       GetComplexPartKernel(op, x->operand(0)->shape().element_type()));
    } else if (op == HloOpcode::kComplex) {
      n.kind = Node::Kind::kBinary;
      ASSIGN_OR_RETURN(n.binary, GetMakeComplexKernel(x->operand(0)->shape().element_type(),
                                                      ScalarOperand::kNone));
    } else if (hlo::IsElementwiseUnary(op)) {
      n.kind = Node::Kind::kUnary;
      ASSIGN_OR_RETURN(n.unary, GetUnaryKernel(op, t));
    } else if (hlo::IsElementwiseBinary(op)) {
      n.kind = Node::Kind::kBinary;
      ASSIGN_OR_RETURN(n.binary, GetBinaryKernel(op, t));
    } else if (op == HloOpcode::kCompare) {
      n.kind = Node::Kind::kBinary;
      ASSIGN_OR_RETURN(n.binary,
                       GetCompareKernel(x->attrs().comparison_direction,
                                        x->operand(0)->shape().element_type(),
                                        x->attrs().comparison_type == "TOTALORDER"));
    } else if (op == HloOpcode::kConvert) {
      n.kind = Node::Kind::kUnary;
      ASSIGN_OR_RETURN(n.unary,
                       GetConvertKernel(x->operand(0)->shape().element_type(), t));
    } else if (op == HloOpcode::kIsFinite) {
      n.kind = Node::Kind::kUnary;
      ASSIGN_OR_RETURN(n.unary, GetIsFiniteKernel(x->operand(0)->shape().element_type()));
    } else if (op == HloOpcode::kSelect) {
      n.kind = Node::Kind::kTernary;
      ASSIGN_OR_RETURN(n.ternary, GetSelectKernel(t));
    } else if (op == HloOpcode::kClamp) {
      n.kind = Node::Kind::kTernary;
      ASSIGN_OR_RETURN(n.ternary, GetClampKernel(t));
    } else if ((op == HloOpcode::kBitcast || op == HloOpcode::kBitcastConvert) &&
               x->operand(0)->shape().IsArray() &&
               hlo::ByteWidth(x->operand(0)->shape().element_type()) == hlo::ByteWidth(t)) {
      n.kind = Node::Kind::kBitcast;
      n.store = GetStoreKernel(x->operand(0)->shape().element_type());
      n.load = GetLoadKernel(t);
      if (n.store == nullptr || n.load == nullptr) return fail(x);
    } else if (op == HloOpcode::kReshape || op == HloOpcode::kCopy) {
      // A copy first: inserting x's entry may rehash the map under a
      // reference to the operand's (an ASan heap-use-after-free before).
      std::vector<int> same = slots[x->operand(0)];
      slots[x] = std::move(same);
      continue;
    } else {
      return fail(x);
    }
    ev->nodes_.push_back(n);
    slots[x] = {n.out};
  }
  ev->root_slots_ = slots[c->root()];
  return ev;
}

void ScalarEvaluator::Eval(absl::Span<const ScalarValue> args,
                           ScalarValue* results) const {
  ScalarValue local[64];
  std::vector<ScalarValue> heap;
  ScalarValue* v = local;
  if (num_slots_ > 64) {
    heap.resize(num_slots_);
    v = heap.data();
  }
  for (const Node& n : nodes_) {
    switch (n.kind) {
      case Node::Kind::kArg: v[n.out] = args[n.arg]; break;
      case Node::Kind::kConst: v[n.out] = n.value; break;
      case Node::Kind::kUnary:
        v[n.out] = ScalarValue();
        n.unary(v[n.args[0]].bytes, v[n.out].bytes, 1);
        break;
      case Node::Kind::kBinary:
        v[n.out] = ScalarValue();
        n.binary(v[n.args[0]].bytes, v[n.args[1]].bytes, v[n.out].bytes, 1);
        break;
      case Node::Kind::kTernary:
        v[n.out] = ScalarValue();
        n.ternary(v[n.args[0]].bytes, v[n.args[1]].bytes, v[n.args[2]].bytes, v[n.out].bytes,
                  1);
        break;
      case Node::Kind::kBitcast: {
        ScalarValue bits;
        n.store(v[n.args[0]].bytes, bits.bytes, 1);
        v[n.out] = ScalarValue();
        n.load(bits.bytes, 1, v[n.out].bytes, 1);
        break;
      }
    }
  }
  for (size_t i = 0; i < root_slots_.size(); ++i) results[i] = v[root_slots_[i]];
}

absl::Status ReduceKernel(const HloInstruction& instr,
                          absl::Span<const void* const> inputs,
                          absl::Span<const void* const> inits,
                          absl::Span<void* const> outs) {
  const int64_t n = static_cast<int64_t>(inputs.size());
  const Shape& in_shape = instr.operand(0)->shape();
  const int64_t rank = in_shape.rank();
  std::vector<bool> reduced(rank, false);
  for (int64_t d : instr.dimensions()) reduced[d] = true;
  std::vector<int64_t> kept_dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) kept_dims.push_back(in_shape.dimensions(d));
  }
  int64_t out_count = 1;
  for (int64_t d : kept_dims) out_count *= d;
  // Stride of each input dim in the output (0 for reduced dims).
  std::vector<int64_t> out_stride(rank, 0);
  for (int64_t d = rank - 1, s = 1; d >= 0; --d) {
    if (!reduced[d]) {
      out_stride[d] = s;
      s *= in_shape.dimensions(d);
    }
  }
  std::vector<PrimitiveType> types(n);
  std::vector<int> widths(n);
  for (int64_t i = 0; i < n; ++i) {
    types[i] = instr.operand(i)->shape().element_type();
    widths[i] = hlo::ByteWidth(types[i]);
  }
  // acc[o * n + i], compute representation.
  std::vector<ScalarValue> acc(out_count * n);
  for (int64_t o = 0; o < out_count; ++o) {
    for (int64_t i = 0; i < n; ++i) {
      GetLoadKernel(types[i])(inits[i], 0, acc[o * n + i].bytes, 1);
    }
  }
  const int64_t total = in_shape.num_elements();
  std::optional<HloOpcode> simple = MatchReducer(instr.to_apply());
  if (total > 0 && n == 1 && simple.has_value() && rank > 0 && !reduced[rank - 1]) {
    // Vectorised rows: every input row combines into one output row.
    ASSIGN_OR_RETURN(BinaryKernel combine, GetBinaryKernel(*simple, types[0]));
    const int w = ComputeWidth(types[0]);
    const int64_t cols = in_shape.dimensions(rank - 1);
    std::vector<ScalarValue> row_acc(out_count);
    // Re-pack acc (stride n == 1) densely in compute width.
    uint8_t* a = row_acc.data()->bytes;
    for (int64_t o = 0; o < out_count; ++o) std::memcpy(a + o * w, acc[o].bytes, w);
    std::vector<ScalarValue> vals(cols + 1);
    const LoadKernel load = GetLoadKernel(types[0]);
    std::vector<int64_t> idx(rank, 0);
    for (int64_t row = 0; row * cols < total; ++row) {
      int64_t off = 0;
      for (int64_t d = 0; d + 1 < rank; ++d) off += idx[d] * out_stride[d];
      load(static_cast<const uint8_t*>(inputs[0]) + row * cols * widths[0], 1,
           vals.data(), cols);
      combine(a + off * w, vals.data(), a + off * w, cols);
      for (int64_t d = rank - 2; d >= 0; --d) {
        if (++idx[d] < in_shape.dimensions(d)) break;
        idx[d] = 0;
      }
    }
    GetStoreKernel(types[0])(a, outs[0], out_count);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ScalarEvaluator> ev,
                   ScalarEvaluator::Create(instr.to_apply()));
  std::vector<ScalarValue> args(2 * n), results(n);
  std::vector<LoadKernel> loads(n);
  for (int64_t i = 0; i < n; ++i) loads[i] = GetLoadKernel(types[i]);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t o = 0;
    for (int64_t d = 0; d < rank; ++d) o += idx[d] * out_stride[d];
    for (int64_t i = 0; i < n; ++i) {
      args[i] = acc[o * n + i];
      args[n + i] = ScalarValue();
      loads[i](static_cast<const uint8_t*>(inputs[i]) + e * widths[i], 1, args[n + i].bytes, 1);
    }
    ev->Eval(args, results.data());
    for (int64_t i = 0; i < n; ++i) acc[o * n + i] = results[i];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < in_shape.dimensions(d)) break;
      idx[d] = 0;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const StoreKernel store = GetStoreKernel(types[i]);
    for (int64_t o = 0; o < out_count; ++o) {
      store(acc[o * n + i].bytes, static_cast<uint8_t*>(outs[i]) + o * widths[i], 1);
    }
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::runtime
