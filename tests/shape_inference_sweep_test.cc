// The shape rules must refuse, never crash on, any operand list and any
// attributes: a module from a proto or from text reaches them with whatever
// counts and dimension numbers its author wrote (the fuzzers found a
// dynamic-update-slice with one operand and convolution dimension numbers
// out of range). Every opcode is tried with 0-4 operands drawn from a pool
// of shapes, default and random hostile attributes, no or some called
// computations; the sanitizer build runs this too. The oracle is that the
// call returns (a status or a shape); accepted shapes must be valid.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/module.h"
#include "hlo/ir/shape_inference.h"
#include "hlo/ir/verifier.h"
#include "hlo/text/text_parser.h"

namespace tpuoff::hlo {
namespace {

#define TPUOFF_COUNT_OPCODE(enum_name, text, arity, min_operands, kind) +1
constexpr int kNumOpcodes = 0 TPUOFF_HLO_OPCODE_LIST(TPUOFF_COUNT_OPCODE);
#undef TPUOFF_COUNT_OPCODE

std::vector<Shape> ShapePool() {
  using P = PrimitiveType;
  return {Shape::Scalar(P::kS32),
          Shape::Scalar(P::kF32),
          Shape::Scalar(P::kPred),
          Shape(P::kF32, {4, 8}),
          Shape(P::kF32, {2, 3, 4}),
          Shape(P::kS32, {2}),
          Shape(P::kF32, {0, 5}),
          Shape::Tuple({Shape::Scalar(P::kS32), Shape(P::kF32, {4, 8})}),
          Shape::Tuple({})};
}

// Values an attribute list may hold: in range, off by one, negative, huge.
// Mostly small values (in range for the pool's ranks and sizes, so the rules
// get past their first checks), sometimes hostile ones.
int64_t Pick(std::mt19937_64& rng) {
  static constexpr int64_t kHostile[] = {4, 5, 8, 9, -1, -2, int64_t{1} << 40,
                                         -(int64_t{1} << 40), INT64_MAX, INT64_MIN};
  if (rng() % 4 != 0) return static_cast<int64_t>(rng() % 4);
  return kHostile[rng() % (sizeof(kHostile) / sizeof(kHostile[0]))];
}
std::vector<int64_t> PickList(std::mt19937_64& rng) {
  std::vector<int64_t> v(rng() % 4);
  for (int64_t& x : v) x = Pick(rng);
  return v;
}

HloAttributes RandomAttributes(std::mt19937_64& rng) {
  HloAttributes a;
  a.parameter_number = Pick(rng);
  a.tuple_index = Pick(rng);
  a.dimensions = PickList(rng);
  for (size_t i = rng() % 4; i > 0; --i) a.slice.push_back({Pick(rng), Pick(rng), Pick(rng)});
  a.dynamic_slice_sizes = PickList(rng);
  for (size_t i = rng() % 4; i > 0; --i) a.padding.push_back({Pick(rng), Pick(rng), Pick(rng)});
  for (size_t i = rng() % 4; i > 0; --i) {
    WindowDimension w;
    w.size = Pick(rng);
    w.stride = Pick(rng);
    w.padding_low = Pick(rng);
    w.padding_high = Pick(rng);
    w.window_dilation = Pick(rng);
    w.base_dilation = Pick(rng);
    a.window.push_back(w);
  }
  a.dot = {PickList(rng), PickList(rng), PickList(rng), PickList(rng)};
  a.gather = {PickList(rng), PickList(rng), PickList(rng), Pick(rng), PickList(rng),
              PickList(rng)};
  a.gather_slice_sizes = PickList(rng);
  a.scatter = {PickList(rng), PickList(rng), PickList(rng), Pick(rng), PickList(rng),
               PickList(rng)};
  a.conv = {Pick(rng), Pick(rng), PickList(rng), Pick(rng), Pick(rng),
            PickList(rng), Pick(rng), Pick(rng), PickList(rng)};
  a.feature_group_count = Pick(rng);
  a.batch_group_count = Pick(rng);
  a.k = Pick(rng);
  a.exponent_bits = Pick(rng);
  a.mantissa_bits = Pick(rng);
  a.fft_length = PickList(rng);
  a.feature_index = Pick(rng);
  a.delta = Pick(rng);
  for (size_t i = rng() % 3; i > 0; --i) a.source_target_pairs.push_back({Pick(rng), Pick(rng)});
  for (size_t i = rng() % 3; i > 0; --i) a.replica_groups.groups.push_back(PickList(rng));
  for (size_t i = rng() % 3; i > 0; --i) a.permute_slice_sizes.push_back(PickList(rng));
  return a;
}

class ShapeRuleSweep : public ::testing::Test {
 protected:
  void SetUp() override {
    // Computations for the called list: a binary f32 reducer, a comparator,
    // a one-parameter tuple body and a predicate.
    auto parsed = ParseHloText(R"(HloModule callees
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT l = pred[] compare(a, b), direction=LT
}
body {
  t = (s32[], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  v = f32[4,8] get-tuple-element(t), index=1
  ROOT r = (s32[], f32[4,8]) tuple(i, v)
}
cond {
  t = (s32[], f32[4,8]) parameter(0)
  ROOT p = pred[] constant(false)
}
ENTRY main {
  ROOT x = f32[] parameter(0)
})", "callees");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    module_ = std::move(*parsed);
    for (const auto& c : module_->computations()) {
      if (c.get() != module_->entry()) callees_.push_back(c.get());
    }
    ASSERT_EQ(callees_.size(), 4u);
  }

  std::vector<std::vector<HloComputation*>> CalledLists() const {
    return {{}, {callees_[0]}, {callees_[1]}, {callees_[2], callees_[3]},
            {callees_[3], callees_[2]}, {callees_[0], callees_[0], callees_[0]}};
  }

  std::unique_ptr<HloModule> module_;
  std::vector<HloComputation*> callees_;
};

// Every list of n operands drawn from the pool (pool.size()^n lists).
std::vector<std::vector<const Shape*>> OperandLists(const std::vector<Shape>& pool, int n) {
  int total = 1;
  for (int i = 0; i < n; ++i) total *= static_cast<int>(pool.size());
  std::vector<std::vector<const Shape*>> lists(total);
  for (int code = 0; code < total; ++code) {
    for (int i = 0, c = code; i < n; ++i, c /= static_cast<int>(pool.size())) {
      lists[code].push_back(&pool[c % pool.size()]);
    }
  }
  return lists;
}

void Check(HloOpcode op, const std::vector<const Shape*>& operands, const HloAttributes& attrs,
           const std::vector<HloComputation*>& called, const Shape* declared) {
  absl::StatusOr<Shape> shape = InferShape(op, operands, attrs, called, declared);
  if (shape.ok()) {
    EXPECT_TRUE(shape->IsValid()) << HloOpcodeString(op) << " accepted and gave "
                                  << shape->ToString();
  } else {
    EXPECT_FALSE(shape.status().message().empty()) << HloOpcodeString(op);
  }
}

TEST_F(ShapeRuleSweep, EveryOperandCountWithDefaultAttributes) {
  const std::vector<Shape> pool = ShapePool();
  const HloAttributes attrs;
  int calls = 0;
  for (int o = 0; o < kNumOpcodes; ++o) {
    const HloOpcode op = static_cast<HloOpcode>(o);
    // Every list of up to 3 operands from the pool (1 + 9 + 81 + 729).
    for (int n = 0; n <= 3; ++n) {
      int code = 0;
      for (const std::vector<const Shape*>& operands : OperandLists(pool, n)) {
        for (const auto& called : CalledLists()) {
          Check(op, operands, attrs, called, nullptr);
          ++calls;
        }
        Check(op, operands, attrs, {}, &pool[code++ % pool.size()]);
      }
    }
  }
  EXPECT_GT(calls, kNumOpcodes * 800 * 6);
}

TEST_F(ShapeRuleSweep, RandomHostileAttributes) {
  const std::vector<Shape> pool = ShapePool();
  // A fixed seed; TPUOFF_SWEEP_SEED explores others.
  const char* seed = std::getenv("TPUOFF_SWEEP_SEED");
  std::mt19937_64 rng(seed != nullptr ? std::strtoull(seed, nullptr, 10) : 20261129);
  const auto called_lists = CalledLists();
  for (int o = 0; o < kNumOpcodes; ++o) {
    const HloOpcode op = static_cast<HloOpcode>(o);
    for (int trial = 0; trial < 4000; ++trial) {
      const HloAttributes attrs = RandomAttributes(rng);
      std::vector<const Shape*> operands(rng() % 5);
      for (const Shape*& s : operands) s = &pool[rng() % pool.size()];
      const Shape* declared = rng() % 3 == 0 ? nullptr : &pool[rng() % pool.size()];
      Check(op, operands, attrs, called_lists[rng() % called_lists.size()], declared);
    }
  }
}

// The opcode table's minimum operand count is checked before any rule runs:
// every list one operand short is refused with that message, whatever the
// operands, attributes, called computations or declared shape.
TEST_F(ShapeRuleSweep, OneOperandShortOfTheTableMinimumIsRefused) {
  const std::vector<Shape> pool = ShapePool();
  const HloAttributes attrs;
  int variadic_with_minimum = 0;
  for (int o = 0; o < kNumOpcodes; ++o) {
    const HloOpcode op = static_cast<HloOpcode>(o);
    const int min = OpcodeMinOperands(op);
    if (OpcodeArity(op) != kVariadic) {
      EXPECT_EQ(min, OpcodeArity(op)) << HloOpcodeString(op);
      continue;
    }
    if (min == 0) continue;
    ++variadic_with_minimum;
    const int n = min - 1;
    for (const std::vector<const Shape*>& operands : OperandLists(pool, n)) {
      for (const auto& called : CalledLists()) {
        for (const Shape* declared : {static_cast<const Shape*>(nullptr), &pool[3]}) {
          absl::StatusOr<Shape> shape = InferShape(op, operands, attrs, called, declared);
          ASSERT_FALSE(shape.ok()) << HloOpcodeString(op) << " accepted " << n << " operands";
          EXPECT_NE(shape.status().message().find(absl::StrCat("at least ", min, " operands")),
                    std::string::npos)
              << HloOpcodeString(op) << ": " << shape.status().message();
        }
      }
    }
  }
  // dynamic-slice, dynamic-update-slice, concatenate, reduce, reduce-window,
  // convolution, scatter, sort, conditional, rng and five collectives.
  EXPECT_EQ(variadic_with_minimum, 15);
}

// From HLO text, as the module_run fuzzer wrote it: the verifier names the
// instruction and the minimum.
TEST_F(ShapeRuleSweep, TextModuleOneOperandShortIsRefusedWithTheMinimum) {
  auto parsed = ParseHloText(R"(HloModule short
ENTRY main {
  acc = f32[4,8] parameter(0)
  ROOT u = f32[4,8] dynamic-update-slice(acc)
})", "short");
  ASSERT_TRUE(parsed.ok()) << parsed.status();  // the parser reads, the verifier checks
  const absl::Status verified = VerifyModule(**parsed);
  ASSERT_FALSE(verified.ok());
  EXPECT_NE(verified.message().find("instruction u"), std::string::npos) << verified;
  EXPECT_NE(verified.message().find("dynamic-update-slice"), std::string::npos) << verified;
  EXPECT_NE(verified.message().find("at least 2 operands"), std::string::npos) << verified;
}

}  // namespace
}  // namespace tpuoff::hlo
