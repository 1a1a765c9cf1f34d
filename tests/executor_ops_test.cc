// The per-op case table: every opcode with named inputs and hand-computed
// expected outputs, run through RunModule with fusion on and off and with 1
// and 2 threads (all four runs must also agree bit for bit).
#include <cstring>
#include <limits>

#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using hlo::Literal;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kIntMin = -2147483648.0;
constexpr double kIntMax = 2147483647.0;

struct OpCase {
  std::string name;
  std::string body;  // ENTRY body (and helper computations before it)
  std::vector<Literal> args;
  std::vector<Literal> want;
  double tol = 0;  // 0: exact
};

// Shared helper computations.
const char* kHelpers = R"(
add_f32 { af0 = f32[] parameter(0)  af1 = f32[] parameter(1)  ROOT afr = f32[] add(af0, af1) }
add_s32 { as0 = s32[] parameter(0)  as1 = s32[] parameter(1)  ROOT asr = s32[] add(as0, as1) }
max_f32 { mf0 = f32[] parameter(0)  mf1 = f32[] parameter(1)  ROOT mfr = f32[] maximum(mf0, mf1) }
max_bf16 { mb0 = bf16[] parameter(0)  mb1 = bf16[] parameter(1)  ROOT mbr = bf16[] maximum(mb0, mb1) }
)";

std::vector<OpCase> Cases() {
  std::vector<OpCase> c;
  auto add = [&](std::string name, std::string body, std::vector<Literal> args,
                 std::vector<Literal> want, double tol = 0) {
    c.push_back({std::move(name), std::move(body), std::move(args), std::move(want), tol});
  };
  // ---- elementwise binary ----
  add("add_f32", "ENTRY e { a = f32[3] parameter(0) b = f32[3] parameter(1) ROOT r = f32[3] add(a, b) }",
      {F32({3}, {1, 2, 3}), F32({3}, {10, 20, -3})}, {F32({3}, {11, 22, 0})});
  add("add_s32_wraps", "ENTRY e { a = s32[2] parameter(0) b = s32[2] parameter(1) ROOT r = s32[2] add(a, b) }",
      {S32({2}, {kIntMax, -5}), S32({2}, {1, 2})}, {S32({2}, {kIntMin, -3})});
  add("subtract_s32_wraps", "ENTRY e { a = s32[1] parameter(0) b = s32[1] parameter(1) ROOT r = s32[1] subtract(a, b) }",
      {S32({1}, {kIntMin}), S32({1}, {1})}, {S32({1}, {kIntMax})});
  add("multiply_s32_wraps", "ENTRY e { a = s32[2] parameter(0) b = s32[2] parameter(1) ROOT r = s32[2] multiply(a, b) }",
      {S32({2}, {65536, -3}), S32({2}, {65536, 4})}, {S32({2}, {0, -12})});
  add("divide_s32_xla_edge_cases", "ENTRY e { a = s32[4] parameter(0) b = s32[4] parameter(1) ROOT r = s32[4] divide(a, b) }",
      {S32({4}, {7, -7, kIntMin, -7}), S32({4}, {0, 0, -1, 2})}, {S32({4}, {-1, -1, kIntMin, -3})});
  add("remainder_s32_xla_edge_cases", "ENTRY e { a = s32[3] parameter(0) b = s32[3] parameter(1) ROOT r = s32[3] remainder(a, b) }",
      {S32({3}, {7, kIntMin, -7}), S32({3}, {0, -1, 3})}, {S32({3}, {7, 0, -1})});
  add("divide_f32_inf_nan", "ENTRY e { a = f32[3] parameter(0) b = f32[3] parameter(1) ROOT r = f32[3] divide(a, b) }",
      {F32({3}, {1, -1, 0}), F32({3}, {0, 0, 0})}, {F32({3}, {kInf, -kInf, kNaN})});
  add("maximum_propagates_nan", "ENTRY e { a = f32[3] parameter(0) b = f32[3] parameter(1) ROOT r = f32[3] maximum(a, b) }",
      {F32({3}, {kNaN, 1, 2}), F32({3}, {1, kNaN, -kInf})}, {F32({3}, {kNaN, kNaN, 2})});
  add("minimum_propagates_nan", "ENTRY e { a = f32[2] parameter(0) b = f32[2] parameter(1) ROOT r = f32[2] minimum(a, b) }",
      {F32({2}, {kNaN, 1}), F32({2}, {1, -kInf})}, {F32({2}, {kNaN, -kInf})});
  add("power_f32", "ENTRY e { a = f32[2] parameter(0) b = f32[2] parameter(1) ROOT r = f32[2] power(a, b) }",
      {F32({2}, {2, 9}), F32({2}, {10, 0.5})}, {F32({2}, {1024, 3})});
  add("power_s32_negative_exponent", "ENTRY e { a = s32[4] parameter(0) b = s32[4] parameter(1) ROOT r = s32[4] power(a, b) }",
      {S32({4}, {2, 2, 1, -1}), S32({4}, {10, -1, -5, -3})}, {S32({4}, {1024, 0, 1, -1})});
  add("remainder_f32", "ENTRY e { a = f32[2] parameter(0) b = f32[2] parameter(1) ROOT r = f32[2] remainder(a, b) }",
      {F32({2}, {5.5, -5.5}), F32({2}, {2, 2})}, {F32({2}, {1.5, -1.5})});
  add("atan2_f32", "ENTRY e { a = f32[2] parameter(0) b = f32[2] parameter(1) ROOT r = f32[2] atan2(a, b) }",
      {F32({2}, {1, 0}), F32({2}, {0, -1})}, {F32({2}, {M_PI / 2, M_PI})}, 1e-6);
  add("bitwise_s32", R"(ENTRY e { a = s32[2] parameter(0) b = s32[2] parameter(1)
        x = s32[2] and(a, b) y = s32[2] or(a, b) z = s32[2] xor(a, b) n = s32[2] not(a)
        ROOT t = (s32[2], s32[2], s32[2], s32[2]) tuple(x, y, z, n) })",
      {S32({2}, {12, -1}), S32({2}, {10, 5})},
      {S32({2}, {8, 5}), S32({2}, {14, -1}), S32({2}, {6, -6}), S32({2}, {-13, 0})});
  add("logical_pred", R"(ENTRY e { a = pred[4] parameter(0) b = pred[4] parameter(1)
        x = pred[4] and(a, b) y = pred[4] or(a, b) z = pred[4] xor(a, b) n = pred[4] not(a)
        ROOT t = (pred[4], pred[4], pred[4], pred[4]) tuple(x, y, z, n) })",
      {Pred({4}, {0, 0, 1, 1}), Pred({4}, {0, 1, 0, 1})},
      {Pred({4}, {0, 0, 0, 1}), Pred({4}, {0, 1, 1, 1}), Pred({4}, {0, 1, 1, 0}), Pred({4}, {1, 1, 0, 0})});
  add("shifts_s32_out_of_range", R"(ENTRY e { a = s32[3] parameter(0) b = s32[3] parameter(1)
        l = s32[3] shift-left(a, b) r = s32[3] shift-right-arithmetic(a, b) u = s32[3] shift-right-logical(a, b)
        ROOT t = (s32[3], s32[3], s32[3]) tuple(l, r, u) })",
      {S32({3}, {1, -8, -8}), S32({3}, {3, 1, 40})},
      {S32({3}, {8, -16, 0}), S32({3}, {0, -4, -1}), S32({3}, {0, 2147483644, 0})});
  // ---- elementwise unary (hand values) ----
  add("unary_f32_table", R"(ENTRY e { a = f32[4] parameter(0)
        ng = f32[4] negate(a) ab = f32[4] abs(a) fl = f32[4] floor(a) ce = f32[4] ceil(a)
        ra = f32[4] round-nearest-afz(a) re = f32[4] round-nearest-even(a) sg = f32[4] sign(a)
        ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(ng, ab, fl, ce, ra, re, sg) })",
      {F32({4}, {-1.5, 2.5, 0, -0.5})},
      {F32({4}, {1.5, -2.5, 0, 0.5}), F32({4}, {1.5, 2.5, 0, 0.5}), F32({4}, {-2, 2, 0, -1}),
       F32({4}, {-1, 3, 0, 0}), F32({4}, {-2, 3, 0, -1}), F32({4}, {-2, 2, 0, 0}),
       F32({4}, {-1, 1, 0, -1})});
  add("transcendental_f32", R"(ENTRY e { a = f32[2] parameter(0)
        ex = f32[2] exponential(a) em = f32[2] exponential-minus-one(a) th = f32[2] tanh(a)
        lg = f32[2] logistic(a) sn = f32[2] sine(a) cs = f32[2] cosine(a)
        ROOT t = (f32[2], f32[2], f32[2], f32[2], f32[2], f32[2]) tuple(ex, em, th, lg, sn, cs) })",
      {F32({2}, {0, 1})},
      {F32({2}, {1, M_E}), F32({2}, {0, M_E - 1}), F32({2}, {0, 0.7615941559557649}),
       F32({2}, {0.5, 0.7310585786300049}), F32({2}, {0, 0.8414709848078965}),
       F32({2}, {1, 0.5403023058681398})}, 1e-6);
  add("log_sqrt_f32", R"(ENTRY e { a = f32[4] parameter(0)
        lg = f32[4] log(a) l1 = f32[4] log-plus-one(a) sq = f32[4] sqrt(a) rs = f32[4] rsqrt(a) cb = f32[4] cbrt(a)
        ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(lg, l1, sq, rs, cb) })",
      {F32({4}, {1, 4, 0, -1})},
      {F32({4}, {0, std::log(4.0), -kInf, kNaN}), F32({4}, {std::log(2.0), std::log(5.0), 0, -kInf}),
       F32({4}, {1, 2, 0, kNaN}), F32({4}, {1, 0.5, kInf, kNaN}), F32({4}, {1, std::cbrt(4.0), 0, -1})},
      1e-6);
  add("unary_s32", R"(ENTRY e { a = s32[3] parameter(0)
        ng = s32[3] negate(a) ab = s32[3] abs(a) sg = s32[3] sign(a)
        ROOT t = (s32[3], s32[3], s32[3]) tuple(ng, ab, sg) })",
      {S32({3}, {kIntMin, -3, 0})},
      {S32({3}, {kIntMin, 3, 0}), S32({3}, {kIntMin, 3, 0}), S32({3}, {-1, -1, 0})});
  add("is_finite", "ENTRY e { a = f32[4] parameter(0) ROOT r = pred[4] is-finite(a) }",
      {F32({4}, {1, kInf, -kInf, kNaN})}, {Pred({4}, {1, 0, 0, 0})});
  // ---- bf16 numerics: f32 arithmetic, round to nearest even on store ----
  add("bf16_add_rounds_to_nearest_even", "ENTRY e { a = bf16[3] parameter(0) b = bf16[3] parameter(1) ROOT r = bf16[3] add(a, b) }",
      {BF16({3}, {1, 1, 256}), BF16({3}, {0.00390625, 0.01171875, 1})},
      {BF16({3}, {1, 1.015625, 256})});
  add("convert_f32_to_bf16_ties_even", "ENTRY e { a = f32[4] parameter(0) ROOT r = bf16[4] convert(a) }",
      {F32({4}, {1.00390625, 1.01171875, 1.0078125, kNaN})}, {BF16({4}, {1, 1.015625, 1.0078125, kNaN})});
  add("bf16_chain_rounds_each_op", R"(ENTRY e { a = bf16[1] parameter(0) b = bf16[1] parameter(1)
        s = bf16[1] add(a, b) ROOT r = bf16[1] subtract(s, a) })",
      {BF16({1}, {1}), BF16({1}, {0.00390625})}, {BF16({1}, {0})});
  add("convert_f32_to_s32_saturates", "ENTRY e { a = f32[5] parameter(0) ROOT r = s32[5] convert(a) }",
      {F32({5}, {3.7, -3.7, 1e10, -1e10, kNaN})}, {S32({5}, {3, -3, kIntMax, kIntMin, 0})});
  add("convert_s32_pred_f32", R"(ENTRY e { a = s32[3] parameter(0)
        p = pred[3] convert(a) f = f32[3] convert(p) g = f32[3] convert(a)
        ROOT t = (pred[3], f32[3], f32[3]) tuple(p, f, g) })",
      {S32({3}, {0, 5, -2})}, {Pred({3}, {0, 1, 1}), F32({3}, {0, 1, 1}), F32({3}, {0, 5, -2})});
  add("f16_add", "ENTRY e { a = f16[2] parameter(0) b = f16[2] parameter(1) ROOT r = f16[2] add(a, b) }",
      {Lit(PrimitiveType::kF16, {2}, {1, 65504}), Lit(PrimitiveType::kF16, {2}, {0.0004882812, 32})},
      {Lit(PrimitiveType::kF16, {2}, {1, kInf})});
  // ---- compare / select / clamp ----
  add("compare_select", R"(ENTRY e { a = f32[3] parameter(0) b = f32[3] parameter(1)
        p = pred[3] compare(a, b), direction=GT ROOT r = f32[3] select(p, a, b) })",
      {F32({3}, {1, 5, -2}), F32({3}, {2, 4, -2})}, {F32({3}, {2, 5, -2})});
  add("compare_nan_partial_order", R"(ENTRY e { a = f32[2] parameter(0)
        q = pred[2] compare(a, a), direction=EQ n = pred[2] compare(a, a), direction=NE
        ROOT t = (pred[2], pred[2]) tuple(q, n) })",
      {F32({2}, {kNaN, 1})}, {Pred({2}, {0, 1}), Pred({2}, {1, 0})});
  add("compare_totalorder_signed_zero", R"(ENTRY e { a = f32[2] parameter(0) b = f32[2] parameter(1)
        ROOT r = pred[2] compare(a, b), direction=LT, type=TOTALORDER })",
      {F32({2}, {-0.0, 1}), F32({2}, {0.0, kNaN})}, {Pred({2}, {1, 1})});
  add("select_scalar_pred", R"(ENTRY e { p = pred[] parameter(0) a = f32[2] parameter(1) b = f32[2] parameter(2)
        ROOT r = f32[2] select(p, a, b) })",
      {Pred({}, {0}), F32({2}, {1, 2}), F32({2}, {3, 4})}, {F32({2}, {3, 4})});
  add("clamp_scalar_bounds", R"(ENTRY e { x = f32[3] parameter(0)
        lo = f32[] constant(0) hi = f32[] constant(1) ROOT r = f32[3] clamp(lo, x, hi) })",
      {F32({3}, {-1, 0.5, 2})}, {F32({3}, {0, 0.5, 1})});
  // ---- shapes and data movement ----
  add("iota_dims", R"(ENTRY e { a = s32[2,3] iota(), iota_dimension=1 b = s32[2,3] iota(), iota_dimension=0
        ROOT t = (s32[2,3], s32[2,3]) tuple(a, b) })",
      {}, {S32({2, 3}, {0, 1, 2, 0, 1, 2}), S32({2, 3}, {0, 0, 0, 1, 1, 1})});
  add("broadcast", R"(ENTRY e { a = f32[3] parameter(0) s = f32[] parameter(1)
        x = f32[2,3] broadcast(a), dimensions={1} y = f32[3,2] broadcast(a), dimensions={0}
        z = f32[2] broadcast(s), dimensions={}
        ROOT t = (f32[2,3], f32[3,2], f32[2]) tuple(x, y, z) })",
      {F32({3}, {1, 2, 3}), F32({}, {7})},
      {F32({2, 3}, {1, 2, 3, 1, 2, 3}), F32({3, 2}, {1, 1, 2, 2, 3, 3}), F32({2}, {7, 7})});
  add("transpose", "ENTRY e { a = f32[2,3] parameter(0) ROOT r = f32[3,2] transpose(a), dimensions={1,0} }",
      {F32({2, 3}, {1, 2, 3, 4, 5, 6})}, {F32({3, 2}, {1, 4, 2, 5, 3, 6})});
  add("reshape", "ENTRY e { a = f32[2,3] parameter(0) ROOT r = f32[3,2] reshape(a) }",
      {F32({2, 3}, {1, 2, 3, 4, 5, 6})}, {F32({3, 2}, {1, 2, 3, 4, 5, 6})});
  add("bitcast_non_default_layout", "ENTRY e { a = f32[2,3]{1,0} parameter(0) ROOT r = f32[3,2]{0,1} bitcast(a) }",
      {F32({2, 3}, {1, 2, 3, 4, 5, 6})}, {F32({3, 2}, {1, 4, 2, 5, 3, 6})});
  add("bitcast_convert_f32_u32", "ENTRY e { a = f32[2] parameter(0) ROOT r = u32[2] bitcast-convert(a) }",
      {F32({2}, {1, -2})}, {Lit(PrimitiveType::kU32, {2}, {1065353216.0, 3221225472.0})});
  add("slice_strided", "ENTRY e { a = s32[10] parameter(0) ROOT r = s32[3] slice(a), slice={[1:8:3]} }",
      {S32({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})}, {S32({3}, {1, 4, 7})});
  add("reverse", "ENTRY e { a = s32[2,3] parameter(0) ROOT r = s32[2,3] reverse(a), dimensions={1} }",
      {S32({2, 3}, {1, 2, 3, 4, 5, 6})}, {S32({2, 3}, {3, 2, 1, 6, 5, 4})});
  add("concatenate_dim1", R"(ENTRY e { a = s32[2,1] parameter(0) b = s32[2,2] parameter(1)
        ROOT r = s32[2,3] concatenate(a, b), dimensions={1} })",
      {S32({2, 1}, {1, 2}), S32({2, 2}, {3, 4, 5, 6})}, {S32({2, 3}, {1, 3, 4, 2, 5, 6})});
  add("pad_interior_and_negative", R"(ENTRY e { a = s32[3] parameter(0) z = s32[] constant(0)
        x = s32[8] pad(a, z), padding=1_2_1 y = s32[6] pad(a, z), padding=-1_2_1
        ROOT t = (s32[8], s32[6]) tuple(x, y) })",
      {S32({3}, {1, 2, 3})}, {S32({8}, {0, 1, 0, 2, 0, 3, 0, 0}), S32({6}, {0, 2, 0, 3, 0, 0})});
  add("copy", "ENTRY e { a = f32[2] parameter(0) ROOT r = f32[2] copy(a) }",
      {F32({2}, {1, 2})}, {F32({2}, {1, 2})});
  add("dynamic_slice_clamps_start", R"(ENTRY e { a = s32[10] parameter(0) i = s32[] parameter(1) j = s32[] parameter(2)
        x = s32[3] dynamic-slice(a, i), dynamic_slice_sizes={3} y = s32[3] dynamic-slice(a, j), dynamic_slice_sizes={3}
        ROOT t = (s32[3], s32[3]) tuple(x, y) })",
      {S32({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), S32({}, {8}), S32({}, {-2})},
      {S32({3}, {7, 8, 9}), S32({3}, {0, 1, 2})});
  add("dynamic_slice_2d", R"(ENTRY e { a = s32[3,4] parameter(0) i = s32[] parameter(1) j = s32[] parameter(2)
        ROOT r = s32[2,2] dynamic-slice(a, i, j), dynamic_slice_sizes={2,2} })",
      {S32({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), S32({}, {1}), S32({}, {1})},
      {S32({2, 2}, {5, 6, 9, 10})});
  add("dynamic_update_slice_clamps", R"(ENTRY e { a = s32[5] parameter(0) u = s32[2] parameter(1) i = s32[] parameter(2)
        ROOT r = s32[5] dynamic-update-slice(a, u, i) })",
      {S32({5}, {0, 0, 0, 0, 0}), S32({2}, {1, 2}), S32({}, {4})}, {S32({5}, {0, 0, 0, 1, 2})});
  add("gather_rows_clamped", R"(ENTRY e { a = f32[3,2] parameter(0) i = s32[3,1] parameter(1)
        ROOT r = f32[3,2] gather(a, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
          index_vector_dim=1, slice_sizes={1,2} })",
      {F32({3, 2}, {1, 2, 3, 4, 5, 6}), S32({3, 1}, {2, 5, -1})},
      {F32({3, 2}, {5, 6, 5, 6, 1, 2})});
  add("gather_elements_take_along_axis", R"(ENTRY e { a = f32[2,3] parameter(0) i = s32[2,2] parameter(1)
        ROOT r = f32[2] gather(a, i), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1},
          index_vector_dim=1, slice_sizes={1,1} })",
      {F32({2, 3}, {1, 2, 3, 4, 5, 6}), S32({2, 2}, {0, 2, 1, 0})}, {F32({2}, {3, 4})});
  add("scatter_add_skips_out_of_bounds", kHelpers + std::string(R"(
      ENTRY e { a = f32[4] parameter(0) i = s32[4,1] parameter(1) u = f32[4] parameter(2)
        ROOT r = f32[4] scatter(a, i, u), update_window_dims={}, inserted_window_dims={0},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32 })"),
      {F32({4}, {0, 0, 0, 1}), S32({4, 1}, {1, 9, 1, -1}), F32({4}, {1, 10, 2, 100})},
      {F32({4}, {0, 3, 0, 1})});
  add("scatter_window_partially_out_of_bounds_skipped", kHelpers + std::string(R"(
      ENTRY e { a = s32[5] parameter(0) i = s32[2,1] parameter(1) u = s32[2,2] parameter(2)
        ROOT r = s32[5] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_s32 })"),
      {S32({5}, {0, 0, 0, 0, 0}), S32({2, 1}, {1, 4}), S32({2, 2}, {1, 2, 3, 4})},
      {S32({5}, {0, 1, 2, 0, 0})});
  // ---- reductions ----
  add("reduce_minor_sum_with_init", kHelpers + std::string(R"(
      ENTRY e { a = f32[2,3] parameter(0) z = f32[] constant(10)
        ROOT r = f32[2] reduce(a, z), dimensions={1}, to_apply=add_f32 })"),
      {F32({2, 3}, {1, 2, 3, 4, 5, 6})}, {F32({2}, {16, 25})});
  add("reduce_major_dim", kHelpers + std::string(R"(
      ENTRY e { a = f32[2,3] parameter(0) z = f32[] constant(0)
        ROOT r = f32[3] reduce(a, z), dimensions={0}, to_apply=add_f32 })"),
      {F32({2, 3}, {1, 2, 3, 4, 5, 6})}, {F32({3}, {5, 7, 9})});
  add("reduce_all_to_scalar", kHelpers + std::string(R"(
      ENTRY e { a = f32[2,3] parameter(0) z = f32[] constant(0)
        ROOT r = f32[] reduce(a, z), dimensions={0,1}, to_apply=add_f32 })"),
      {F32({2, 3}, {1, 2, 3, 4, 5, 6})}, {F32({}, {21})});
  add("reduce_empty_dimension_gives_init", kHelpers + std::string(R"(
      ENTRY e { a = f32[2,0] parameter(0) z = f32[] constant(5)
        ROOT r = f32[2] reduce(a, z), dimensions={1}, to_apply=add_f32 })"),
      {F32({2, 0}, {})}, {F32({2}, {5, 5})});
  add("reduce_max_bf16_nan", kHelpers + std::string(R"(
      ENTRY e { a = bf16[2,2] parameter(0) z = bf16[] constant(-inf)
        ROOT r = bf16[2] reduce(a, z), dimensions={1}, to_apply=max_bf16 })"),
      {BF16({2, 2}, {1, kNaN, -3, 2.5})}, {BF16({2}, {kNaN, 2.5})});
  add("reduce_sum_s32_wraps", kHelpers + std::string(R"(
      ENTRY e { a = s32[2] parameter(0) z = s32[] constant(0)
        ROOT r = s32[] reduce(a, z), dimensions={0}, to_apply=add_s32 })"),
      {S32({2}, {kIntMax, 2})}, {S32({}, {kIntMin + 1})});
  add("reduce_variadic_argmax", R"(
      argmax { av = f32[] parameter(0) ai = s32[] parameter(1) bv = f32[] parameter(2) bi = s32[] parameter(3)
        gt = pred[] compare(av, bv), direction=GT eq = pred[] compare(av, bv), direction=EQ
        lt = pred[] compare(ai, bi), direction=LT tie = pred[] and(eq, lt) keep = pred[] or(gt, tie)
        v = f32[] select(keep, av, bv) i = s32[] select(keep, ai, bi) ROOT t = (f32[], s32[]) tuple(v, i) }
      ENTRY e { a = f32[5] parameter(0) idx = s32[5] iota(), iota_dimension=0
        ninf = f32[] constant(-inf) zero = s32[] constant(0)
        ROOT r = (f32[], s32[]) reduce(a, idx, ninf, zero), dimensions={0}, to_apply=argmax })",
      {F32({5}, {1, 7, 3, 7, 2})}, {F32({}, {7}), S32({}, {1})});
  add("softmax_fused_rows", kHelpers + std::string(R"(
      ENTRY e { x = f32[2,3] parameter(0) ninf = f32[] constant(-inf) zero = f32[] constant(0)
        m = f32[2] reduce(x, ninf), dimensions={1}, to_apply=max_f32
        mb = f32[2,3] broadcast(m), dimensions={0} d = f32[2,3] subtract(x, mb) ex = f32[2,3] exponential(d)
        s = f32[2] reduce(ex, zero), dimensions={1}, to_apply=add_f32
        sb = f32[2,3] broadcast(s), dimensions={0} ROOT p = f32[2,3] divide(ex, sb) })"),
      {F32({2, 3}, {0, 0, 0, 1, 2, 3})},
      {F32({2, 3}, {1.0 / 3, 1.0 / 3, 1.0 / 3, 0.09003057317038046, 0.24472847105479764,
                    0.6652409557748219})},
      1e-6);
  // ---- dot ----
  add("dot_matmul", R"(ENTRY e { a = f32[2,3] parameter(0) b = f32[3,2] parameter(1)
        ROOT r = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0} })",
      {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3, 2}, {1, 0, 0, 1, 1, 1})}, {F32({2, 2}, {4, 5, 10, 11})});
  add("dot_batched_transposed_rhs", R"(ENTRY e { a = f32[2,1,2] parameter(0) b = f32[2,3,2] parameter(1)
        ROOT r = f32[2,1,3] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2} })",
      {F32({2, 1, 2}, {1, 2, 3, 4}), F32({2, 3, 2}, {1, 0, 0, 1, 1, 1, 1, 1, 2, 0, 0, 2})},
      {F32({2, 1, 3}, {1, 2, 3, 7, 6, 8})});
  add("dot_bf16_to_f32", R"(ENTRY e { a = bf16[1,2] parameter(0) b = bf16[2,1] parameter(1)
        ROOT r = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0} })",
      {BF16({1, 2}, {1.5, 2}), BF16({2, 1}, {2, 0.25})}, {F32({1, 1}, {3.5})});
  add("dot_s32", R"(ENTRY e { a = s32[1,2] parameter(0) b = s32[2] parameter(1)
        ROOT r = s32[1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0} })",
      {S32({1, 2}, {3, -4}), S32({2}, {5, 6})}, {S32({1}, {-9})});
  // ---- control flow and calls ----
  add("while_counts_to_five", R"(
      cond { cp = (s32[], f32[2]) parameter(0) ci = s32[] get-tuple-element(cp), index=0
        n = s32[] constant(5) ROOT c = pred[] compare(ci, n), direction=LT }
      body { bp = (s32[], f32[2]) parameter(0) i = s32[] get-tuple-element(bp), index=0
        bx = f32[2] get-tuple-element(bp), index=1 one = s32[] constant(1) j = s32[] add(i, one)
        y = f32[2] add(bx, bx) ROOT bt = (s32[], f32[2]) tuple(j, y) }
      ENTRY e { x = f32[2] parameter(0) z = s32[] constant(0) t = (s32[], f32[2]) tuple(z, x)
        ROOT w = (s32[], f32[2]) while(t), condition=cond, body=body })",
      {F32({2}, {1, -0.5})}, {S32({}, {5}), F32({2}, {32, -16})});
  add("call", R"(
      f { a = f32[2] parameter(0) b = f32[2] parameter(1) ROOT r = f32[2] multiply(a, b) }
      ENTRY e { x = f32[2] parameter(0) ROOT c = f32[2] call(x, x), to_apply=f })",
      {F32({2}, {3, -2})}, {F32({2}, {9, 4})});
  add("call_returning_parameter", R"(
      f { a = f32[2] parameter(0) ROOT r = (f32[2], f32[2]) tuple(a, a) }
      ENTRY e { x = f32[2] parameter(0) ROOT c = (f32[2], f32[2]) call(x), to_apply=f })",
      {F32({2}, {3, -2})}, {F32({2}, {3, -2}), F32({2}, {3, -2})});
  add("conditional_index_out_of_range_takes_last", R"(
      b0 { a0 = f32[] parameter(0) ROOT r0 = f32[] negate(a0) }
      b1 { a1 = f32[] parameter(0) ROOT r1 = f32[] exponential(a1) }
      ENTRY e { i = s32[] parameter(0) x = f32[] parameter(1)
        ROOT c = f32[] conditional(i, x, x), branch_computations={b0, b1} })",
      {S32({}, {7}), F32({}, {0})}, {F32({}, {1})});
  add("conditional_pred", R"(
      t { a0 = f32[] parameter(0) ROOT r0 = f32[] negate(a0) }
      f { a1 = f32[] parameter(0) ROOT r1 = f32[] abs(a1) }
      ENTRY e { p = pred[] parameter(0) x = f32[] parameter(1)
        ROOT c = f32[] conditional(p, x, x), true_computation=t, false_computation=f })",
      {Pred({}, {1}), F32({}, {2})}, {F32({}, {-2})});
  add("fusion_instruction", R"(
      fused { a = f32[3] parameter(0) b = f32[3] parameter(1) s = f32[3] subtract(a, b) ROOT e = f32[3] exponential(s) }
      ENTRY e { x = f32[3] parameter(0) y = f32[3] parameter(1)
        ROOT f = f32[3] fusion(x, y), kind=kLoop, calls=fused })",
      {F32({3}, {1, 2, 3}), F32({3}, {1, 2, 3})}, {F32({3}, {1, 1, 1})});
  add("opt_barrier_and_after_all", R"(ENTRY e { x = f32[2] parameter(0) t = (f32[2]) tuple(x)
        b = (f32[2]) opt-barrier(t) ROOT g = f32[2] get-tuple-element(b), index=0 })",
      {F32({2}, {1, 2})}, {F32({2}, {1, 2})});
  // ---- SPMD ops on a mesh of one ----
  add("partition_and_replica_id", R"(ENTRY e { p = u32[] partition-id() r = u32[] replica-id()
        ROOT t = (u32[], u32[]) tuple(p, r) })",
      {}, {Lit(PrimitiveType::kU32, {}, {0}), Lit(PrimitiveType::kU32, {}, {0})});
  add("all_reduce_single_device", kHelpers + std::string(R"(
      ENTRY e { x = f32[2] parameter(0) ROOT r = f32[2] all-reduce(x), replica_groups={{0}}, to_apply=add_f32 })"),
      {F32({2}, {1, 2})}, {F32({2}, {1, 2})});
  // ---- fft (FFTW): unit impulses and ramps with known transforms ----
  add("fft_c64_forward_inverse", R"(ENTRY e { re = f32[2,4] parameter(0) im = f32[2,4] parameter(1)
        c = c64[2,4] complex(re, im)
        f = c64[2,4] fft(c), fft_type=FFT, fft_length={4}
        i = c64[2,4] fft(f), fft_type=IFFT, fft_length={4}
        fr = f32[2,4] real(f) fi = f32[2,4] imag(f) ir = f32[2,4] real(i)
        ROOT t = (f32[2,4], f32[2,4], f32[2,4]) tuple(fr, fi, ir) })",
      {F32({2, 4}, {1, 0, 0, 0, 0, 1, 0, 0}), F32({2, 4}, {0, 0, 0, 0, 0, 0, 0, 0})},
      {F32({2, 4}, {1, 1, 1, 1, 1, 0, -1, 0}), F32({2, 4}, {0, 0, 0, 0, 0, -1, 0, 1}),
       F32({2, 4}, {1, 0, 0, 0, 0, 1, 0, 0})}, 1e-6);
  add("fft_rfft_irfft_2d", R"(ENTRY e { x = f32[2,4] parameter(0)
        h = c64[2,3] fft(x), fft_type=RFFT, fft_length={2,4}
        b = f32[2,4] fft(h), fft_type=IRFFT, fft_length={2,4}
        hr = f32[2,3] real(h) hi = f32[2,3] imag(h)
        ROOT t = (f32[2,3], f32[2,3], f32[2,4]) tuple(hr, hi, b) })",
      {F32({2, 4}, {1, 2, 3, 4, 0, 0, 0, 0})},
      {F32({2, 3}, {10, -2, -2, 10, -2, -2}), F32({2, 3}, {0, 2, 0, 0, 2, 0}),
       F32({2, 4}, {1, 2, 3, 4, 0, 0, 0, 0})}, 1e-6);
  // ---- cholesky / triangular-solve (Eigen) ----
  add("cholesky_lower_upper_and_not_pd", R"(ENTRY e { a = f32[2,2,2] parameter(0)
        l = f32[2,2,2] cholesky(a), lower=true
        u = f32[2,2,2] cholesky(a)
        ROOT t = (f32[2,2,2], f32[2,2,2]) tuple(l, u) })",
      {F32({2, 2, 2}, {4, 2, 2, 3, -1, 0, 0, 1})},
      {F32({2, 2, 2}, {2, 0, 1, M_SQRT2, kNaN, kNaN, kNaN, kNaN}),
       F32({2, 2, 2}, {2, 1, 0, M_SQRT2, kNaN, kNaN, kNaN, kNaN})}, 1e-6);
  add("triangular_solve_sides_transposes_unit", R"(ENTRY e { a = f32[2,2] parameter(0) b = f32[2,1] parameter(1)
        c = f32[1,2] parameter(2)
        x1 = f32[2,1] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
        x2 = f32[2,1] triangular-solve(a, b), left_side=true, lower=true, transpose_a=TRANSPOSE
        x3 = f32[2,1] triangular-solve(a, b), left_side=true, lower=true, unit_diagonal=true, transpose_a=NO_TRANSPOSE
        x4 = f32[1,2] triangular-solve(a, c), lower=true, transpose_a=NO_TRANSPOSE
        x5 = f32[2,1] triangular-solve(a, b), left_side=true, transpose_a=NO_TRANSPOSE
        ROOT t = (f32[2,1], f32[2,1], f32[2,1], f32[1,2], f32[2,1]) tuple(x1, x2, x3, x4, x5) })",
      // a = [[2, 7], [1, 4]]: lower triangle [[2,0],[1,4]], upper [[2,7],[0,4]].
      {F32({2, 2}, {2, 7, 1, 4}), F32({2, 1}, {2, 9}), F32({1, 2}, {4, 8})},
      {F32({2, 1}, {1, 2}), F32({2, 1}, {-0.125, 2.25}), F32({2, 1}, {2, 7}),
       F32({1, 2}, {1, 2}), F32({2, 1}, {-6.875, 2.25})}, 1e-6);
  // ---- batch norm (XLA's expander formulas) ----
  add("batch_norm_training_inference_grad", R"(ENTRY e { x = f32[2,2] parameter(0) g = f32[2] parameter(1)
        b = f32[2] parameter(2) m = f32[2] parameter(3) v = f32[2] parameter(4) dy = f32[2,2] parameter(5)
        tr = (f32[2,2], f32[2], f32[2]) batch-norm-training(x, g, b), epsilon=0, feature_index=1
        y = f32[2,2] get-tuple-element(tr), index=0  mean = f32[2] get-tuple-element(tr), index=1
        var = f32[2] get-tuple-element(tr), index=2
        inf = f32[2,2] batch-norm-inference(x, g, b, m, v), epsilon=0, feature_index=1
        gr = (f32[2,2], f32[2], f32[2]) batch-norm-grad(x, g, m, v, dy), epsilon=0, feature_index=1
        dx = f32[2,2] get-tuple-element(gr), index=0  dg = f32[2] get-tuple-element(gr), index=1
        db = f32[2] get-tuple-element(gr), index=2
        ROOT t = (f32[2,2], f32[2], f32[2], f32[2,2], f32[2,2], f32[2], f32[2]) tuple(y, mean, var, inf, dx, dg, db) })",
      // Feature 0 holds {1, 3} (mean 2, variance 1), feature 1 {10, 14}
      // (mean 12, variance 4).
      {F32({2, 2}, {1, 10, 3, 14}), F32({2}, {2, 1}), F32({2}, {5, -1}), F32({2}, {2, 12}),
       F32({2}, {1, 4}), F32({2, 2}, {1, 0, 0, 0})},
      {F32({2, 2}, {3, -2, 7, 0}), F32({2}, {2, 12}), F32({2}, {1, 4}), F32({2, 2}, {3, -2, 7, 0}),
       F32({2, 2}, {0, 0, 0, 0}), F32({2}, {-1, 0}), F32({2}, {1, 0})}, 1e-6);
  // ---- rng-bit-generator: Random123's known-answer vectors ----
  add("rng_bit_generator_philox_threefry_kat", R"(ENTRY e { s3 = u64[3] parameter(0) s2 = u64[2] parameter(1)
        p = (u64[3], u32[4]) rng-bit-generator(s3), algorithm=rng_philox
        f = (u64[2], u32[2]) rng-bit-generator(s2), algorithm=rng_three_fry
        ps = u64[3] get-tuple-element(p), index=0  pb = u32[4] get-tuple-element(p), index=1
        fs = u64[2] get-tuple-element(f), index=0  fb = u32[2] get-tuple-element(f), index=1
        ROOT t = (u64[3], u32[4], u64[2], u32[2]) tuple(ps, pb, fs, fb) })",
      {Lit(PrimitiveType::kU64, {3}, {0, 0, 0}), Lit(PrimitiveType::kU64, {2}, {0, 0})},
      {Lit(PrimitiveType::kU64, {3}, {0, 1, 0}),
       Lit(PrimitiveType::kU32, {4}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}),
       Lit(PrimitiveType::kU64, {2}, {0, 1}), Lit(PrimitiveType::kU32, {2}, {0x6b200159, 0x99ba4efe})});
  // ---- get-dimension-size, domain, rng-get-and-update-state ----
  add("dimension_size_domain_rng_state", kHelpers + std::string(R"(ENTRY e { x = f32[3,5] parameter(0)
        n = s32[] get-dimension-size(x), dimensions={1}
        d = f32[3,5] domain(x), domain={kind="sharding", entry={maximal device=0}, exit={replicated}}
        z = f32[] constant(0)
        s = f32[] reduce(d, z), dimensions={0,1}, to_apply=add_f32
        st = u64[2] rng-get-and-update-state(), delta=7
        ROOT t = (s32[], f32[], u64[2]) tuple(n, s, st) })"),
      {F32({3, 5}, std::vector<double>(15, 2))},
      {S32({}, {5}), F32({}, {30}), Lit(PrimitiveType::kU64, {2}, {0x7012395, 0})});
  // ---- edge shapes ----
  add("scalar_add", "ENTRY e { a = f32[] parameter(0) b = f32[] parameter(1) ROOT r = f32[] add(a, b) }",
      {F32({}, {1.5}), F32({}, {2})}, {F32({}, {3.5})});
  add("empty_dimension_elementwise", "ENTRY e { a = f32[0,3] parameter(0) ROOT r = f32[0,3] exponential(a) }",
      {F32({0, 3}, {})}, {F32({0, 3}, {})});
  add("constant_array", "ENTRY e { c = s32[2,2] constant({{1,2},{3,4}}) ROOT r = s32[2,2] add(c, c) }",
      {}, {S32({2, 2}, {2, 4, 6, 8})});
  return c;
}

class OpCaseTest : public ::testing::TestWithParam<int> {};

TEST_P(OpCaseTest, MatchesHandComputedOutputs) {
  static const std::vector<OpCase>* cases = new std::vector<OpCase>(Cases());
  const OpCase& tc = (*cases)[GetParam()];
  SCOPED_TRACE(tc.name);
  auto module = Parse("HloModule " + tc.name + "\n" + tc.body);
  ASSERT_NE(module, nullptr);
  ASSERT_TRUE(hlo::VerifyModule(*module).ok()) << hlo::VerifyModule(*module);
  std::vector<Literal> first;
  for (bool fusion : {true, false}) {
    for (int threads : {1, 2}) {
      RunOptions opts;
      opts.num_threads = threads;
      opts.disable_fusion = !fusion;
      auto r = RunModule(*module, tc.args, opts);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->outputs.size(), tc.want.size());
      for (size_t i = 0; i < tc.want.size(); ++i) {
        ExpectNear(r->outputs[i], tc.want[i], tc.tol,
                   tc.name + " output " + std::to_string(i) +
                       (fusion ? " fused" : " unfused") + " threads=" +
                       std::to_string(threads));
      }
      if (first.empty()) {
        first = std::move(r->outputs);
      } else {
        for (size_t i = 0; i < first.size(); ++i) {
          EXPECT_TRUE(first[i] == r->outputs[i]) << "not bit-identical across paths: output " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, OpCaseTest, ::testing::Range(0, static_cast<int>(Cases().size())),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return Cases()[info.param].name;
                         });

TEST(ExecutorOps, CustomCallIsUnimplemented) {
  auto m = Parse(R"(HloModule m
    ENTRY e { x = f32[2] parameter(0) ROOT r = f32[2] custom-call(x), custom_call_target="MyKernel" })");
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {F32({2}, {1, 2})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("MyKernel"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("%r"), std::string::npos) << r.status();
}

TEST(ExecutorOps, WrongArgumentShapeIsInvalidArgument) {
  auto m = Parse("HloModule m\nENTRY e { x = f32[2] parameter(0) ROOT r = f32[2] negate(x) }");
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {F32({3}, {1, 2, 3})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("argument 0"), std::string::npos) << r.status();
}

TEST(ExecutorOps, CollectiveNamingMissingDeviceFailsOnOneDevice) {
  auto m = Parse(std::string("HloModule m\n") + kHelpers + R"(
    ENTRY e { x = f32[2] parameter(0) ROOT r = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=add_f32 })");
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {F32({2}, {1, 2})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("device 1"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace tpuoff::runtime
