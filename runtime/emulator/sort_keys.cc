#include "runtime/emulator/sort_keys.h"


#include "absl/container/flat_hash_map.h"
#include "hlo/ir/builder.h"
#include "hlo/ir/opcode.h"
#include "runtime/cpu/elementwise_kernels.h"

namespace tpuoff::runtime {
namespace {

using hlo::ComparisonDirection;
using hlo::HloInstruction;
using hlo::HloOpcode;
using hlo::PrimitiveType;

// Scalar ops a key expression may hold (no called computations, no state).
bool KeyOpcode(HloOpcode op) {
  switch (op) {
    case HloOpcode::kParameter:
    case HloOpcode::kConstant:
    case HloOpcode::kCompare:
    case HloOpcode::kSelect:
    case HloOpcode::kNegate:
    case HloOpcode::kAbs:
    case HloOpcode::kConvert:
    case HloOpcode::kBitcastConvert:
    case HloOpcode::kAdd:
    case HloOpcode::kSubtract:
    case HloOpcode::kMultiply:
    case HloOpcode::kMaximum:
    case HloOpcode::kMinimum:
    case HloOpcode::kAnd:
    case HloOpcode::kOr:
    case HloOpcode::kXor:
    case HloOpcode::kNot:
      return true;
    default:
      return false;
  }
}

// Whether `a` (over parameter 0) and `b` (over parameter 1) are the same
// expression: constants shared or equal, the same ops and attributes the
// ops above use, parameter 0 exactly where parameter 1 is.
bool SameKey(const HloInstruction* a, const HloInstruction* b, int depth) {
  if (depth > 64 || !KeyOpcode(a->opcode()) || a->opcode() != b->opcode() ||
      !a->shape().IsArray() || a->shape().rank() != 0 || !(a->shape() == b->shape()) ||
      a->operand_count() != b->operand_count()) {
    return false;
  }
  switch (a->opcode()) {
    case HloOpcode::kParameter:
      return a->parameter_number() == 0 && b->parameter_number() == 1;
    case HloOpcode::kConstant:
      return a->has_literal() && b->has_literal() && (a == b || a->literal() == b->literal());
    case HloOpcode::kCompare:
      if (a->attrs().comparison_direction != b->attrs().comparison_direction ||
          a->attrs().comparison_type != b->attrs().comparison_type) {
        return false;
      }
      break;
    default:
      break;
  }
  for (int64_t i = 0; i < a->operand_count(); ++i) {
    if (!SameKey(a->operand(i), b->operand(i), depth + 1)) return false;
  }
  return true;
}

// Copies the expression `x` (over parameter 0) into `b`.
hlo::XlaOp CloneKey(hlo::XlaBuilder* b, const HloInstruction* x,
                    absl::flat_hash_map<const HloInstruction*, hlo::XlaOp>* done) {
  if (auto it = done->find(x); it != done->end()) return it->second;
  hlo::XlaOp op;
  if (x->opcode() == HloOpcode::kParameter) {
    op = b->Parameter(0, x->shape(), "x");
  } else if (x->opcode() == HloOpcode::kConstant) {
    op = b->Constant(x->literal());
  } else {
    std::vector<hlo::XlaOp> operands;
    for (const HloInstruction* o : x->operands()) operands.push_back(CloneKey(b, o, done));
    op = b->AddOp(x->opcode(), operands, x->attrs(), {}, &x->shape());
  }
  (*done)[x] = op;
  return op;
}

}  // namespace

std::unique_ptr<SortKeys> SortKeys::Match(const hlo::HloComputation* comparator) {
  const HloInstruction* root = comparator->root();
  if (root == nullptr || root->opcode() != HloOpcode::kCompare) return nullptr;
  const ComparisonDirection dir = root->attrs().comparison_direction;
  if (dir != ComparisonDirection::kLt && dir != ComparisonDirection::kGt) return nullptr;
  const std::string& type = root->attrs().comparison_type;
  const HloInstruction* lhs = root->operand(0);
  const PrimitiveType key_type = lhs->shape().element_type();
  if (!(hlo::IsFloatingPoint(key_type) || hlo::IsInteger(key_type)) ||
      !SameKey(lhs, root->operand(1), 0)) {
    return nullptr;
  }
  // The compare's type must be the one its operands' type implies (XLA's
  // default), or TOTALORDER for floats.
  const bool known =
      hlo::IsFloatingPoint(key_type)
          ? (type.empty() || type == "FLOAT" || type == "TOTALORDER")
          : (type.empty() || type == (hlo::IsUnsignedInteger(key_type) ? "UNSIGNED" : "SIGNED"));
  if (!known) return nullptr;
  auto keys = std::unique_ptr<SortKeys>(new SortKeys());
  hlo::XlaBuilder b("sort_key");
  absl::flat_hash_map<const HloInstruction*, hlo::XlaOp> done;
  hlo::XlaOp key = CloneKey(&b, lhs, &done);
  // f must read its element: a constant key orders nothing (keep the
  // comparator, which is as cheap).
  bool reads = false;
  for (const auto& [x, op] : done) reads |= x->opcode() == HloOpcode::kParameter;
  if (!reads) return nullptr;
  auto module = b.Build(key);
  if (!module.ok()) return nullptr;
  auto eval = ScalarEvaluator::Create((*module)->entry());
  if (!eval.ok()) return nullptr;
  keys->module_ = *std::move(module);
  keys->key_ = *std::move(eval);
  keys->type_ = key_type;
  keys->greater_ = dir == ComparisonDirection::kGt;
  keys->total_order_ = type == "TOTALORDER";
  return keys;
}

bool SortKeys::Keys(const std::vector<ScalarValue>& values, int64_t start, int64_t stride,
                    int64_t length, std::vector<uint64_t>* keys) const {
  keys->resize(length);
  const StoreKernel store = GetStoreKernel(type_);
  const int width = static_cast<int>(hlo::ByteWidth(type_));
  const int bits = 8 * width;
  const uint64_t sign = uint64_t{1} << (bits - 1);
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  const bool floating = hlo::IsFloatingPoint(type_);
  const bool is_signed = hlo::IsSignedInteger(type_);
  // Floats: the exponent field (all ones and a non-zero mantissa: NaN).
  const int mantissa = type_ == PrimitiveType::kF64    ? 52
                       : type_ == PrimitiveType::kF32  ? 23
                       : type_ == PrimitiveType::kBF16 ? 7
                                                       : 10;
  const uint64_t exponent_all = (mask >> 1) & ~((uint64_t{1} << mantissa) - 1);
  ScalarValue key;
  for (int64_t j = 0; j < length; ++j) {
    key_->Eval(absl::MakeConstSpan(&values[start + j * stride], 1), &key);
    uint64_t v = 0;
    store(key.bytes, &v, 1);  // little-endian: the low `width` bytes
    uint64_t k;
    if (floating) {
      const uint64_t magnitude = v & (sign - 1);
      const bool nan = (magnitude & exponent_all) == exponent_all && magnitude != exponent_all;
      if (!total_order_) {
        if (nan) return false;        // compares false both ways: no strict order
        if (magnitude == 0) v = 0;    // -0 == +0
      }
      // IEEE total order as unsigned order: negatives reversed below the
      // positives (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN).
      k = (v & sign) ? (~v & mask) : (v | sign);
    } else if (is_signed) {
      k = v ^ sign;  // two's complement to offset binary
    } else {
      k = v;
    }
    (*keys)[j] = k;
  }
  return true;
}

}  // namespace tpuoff::runtime
