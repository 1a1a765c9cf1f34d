#include "hlo/analysis/trip_count.h"

#include <string>

#include "absl/strings/numbers.h"
#include "hlo/ir/computation.h"

namespace tpuoff::hlo {
namespace {

// A scalar integer constant, looking through copies, converts, reshapes and
// bitcasts.
std::optional<int64_t> ScalarConstant(const HloInstruction* x) {
  while (x->opcode() == HloOpcode::kCopy || x->opcode() == HloOpcode::kConvert ||
         x->opcode() == HloOpcode::kReshape || x->opcode() == HloOpcode::kBitcast) {
    x = x->operand(0);
  }
  if (x->opcode() != HloOpcode::kConstant || !x->has_literal()) return std::nullopt;
  if (!x->shape().IsArray() || x->shape().num_elements() != 1 ||
      !IsInteger(x->shape().element_type())) {
    return std::nullopt;
  }
  return x->literal().GetAsInt64(0);
}

// Whether `x` is element `index` of the parameter of `c` (through copies).
bool IsStateElement(const HloInstruction* x, int64_t* index) {
  while (x->opcode() == HloOpcode::kCopy) x = x->operand(0);
  if (x->opcode() != HloOpcode::kGetTupleElement) return false;
  if (x->operand(0)->opcode() != HloOpcode::kParameter) return false;
  *index = x->tuple_index();
  return true;
}

// The `known_trip_count` XLA writes into a while's backend_config:
// {"known_trip_count":{"n":"74"}}.
std::optional<int64_t> KnownTripCount(const std::string& config) {
  const size_t key = config.find("known_trip_count");
  if (key == std::string::npos) return std::nullopt;
  const size_t n = config.find("\"n\"", key);
  if (n == std::string::npos) return std::nullopt;
  size_t i = config.find(':', n);
  if (i == std::string::npos) return std::nullopt;
  ++i;
  while (i < config.size() && (config[i] == ' ' || config[i] == '"')) ++i;
  size_t j = i;
  while (j < config.size() && config[j] >= '0' && config[j] <= '9') ++j;
  int64_t v = 0;
  if (j == i || !absl::SimpleAtoi(config.substr(i, j - i), &v)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<int64_t> WhileTripCount(const HloInstruction& loop) {
  if (loop.opcode() != HloOpcode::kWhile) return std::nullopt;
  if (auto known = KnownTripCount(loop.attrs().backend_config)) return known;
  const HloComputation* cond = loop.while_condition();
  const HloComputation* body = loop.while_body();
  const HloInstruction* init = loop.operand(0);
  const HloInstruction* pred = cond->root();
  if (pred == nullptr || pred->opcode() != HloOpcode::kCompare) return std::nullopt;
  if (init->opcode() != HloOpcode::kTuple) return std::nullopt;
  const HloInstruction* body_root = body->root();
  if (body_root == nullptr || body_root->opcode() != HloOpcode::kTuple) return std::nullopt;

  // i <dir> limit, with the induction variable on either side.
  int64_t k = -1;
  std::optional<int64_t> limit;
  ComparisonDirection dir = pred->attrs().comparison_direction;
  if (IsStateElement(pred->operand(0), &k)) {
    limit = ScalarConstant(pred->operand(1));
  } else if (IsStateElement(pred->operand(1), &k)) {
    limit = ScalarConstant(pred->operand(0));
    switch (dir) {  // limit <dir> i  ==  i <flipped> limit
      case ComparisonDirection::kLt: dir = ComparisonDirection::kGt; break;
      case ComparisonDirection::kLe: dir = ComparisonDirection::kGe; break;
      case ComparisonDirection::kGt: dir = ComparisonDirection::kLt; break;
      case ComparisonDirection::kGe: dir = ComparisonDirection::kLe; break;
      default: break;
    }
  }
  if (!limit || k < 0 || k >= init->operand_count() || k >= body_root->operand_count()) {
    return std::nullopt;
  }
  const std::optional<int64_t> start = ScalarConstant(init->operand(k));
  if (!start) return std::nullopt;
  // next = i + step (either order) or i - step.
  const HloInstruction* next = body_root->operand(k);
  std::optional<int64_t> step;
  int64_t j = -1;
  if (next->opcode() == HloOpcode::kAdd) {
    if (IsStateElement(next->operand(0), &j) && j == k) step = ScalarConstant(next->operand(1));
    else if (IsStateElement(next->operand(1), &j) && j == k) step = ScalarConstant(next->operand(0));
  } else if (next->opcode() == HloOpcode::kSubtract) {
    if (IsStateElement(next->operand(0), &j) && j == k) {
      if (auto s = ScalarConstant(next->operand(1))) step = -*s;
    }
  }
  if (!step || *step == 0) return std::nullopt;
  const int64_t s = *step;
  const int64_t lo = *start;
  const int64_t hi = *limit;
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };  // a >= 0, b > 0
  switch (dir) {
    case ComparisonDirection::kLt:
      if (s < 0) return std::nullopt;
      return lo >= hi ? 0 : ceil_div(hi - lo, s);
    case ComparisonDirection::kLe:
      if (s < 0) return std::nullopt;
      return lo > hi ? 0 : (hi - lo) / s + 1;
    case ComparisonDirection::kGt:
      if (s > 0) return std::nullopt;
      return lo <= hi ? 0 : ceil_div(lo - hi, -s);
    case ComparisonDirection::kGe:
      if (s > 0) return std::nullopt;
      return lo < hi ? 0 : (lo - hi) / -s + 1;
    case ComparisonDirection::kNe:
      if ((hi - lo) % s != 0 || (hi - lo) / s < 0) return std::nullopt;
      return (hi - lo) / s;
    default:
      return std::nullopt;
  }
}

}  // namespace tpuoff::hlo
