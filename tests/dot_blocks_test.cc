// dot on the emulator's block grid (runtime/emulator/ops_dot.cc): C is cut
// into row blocks of 256 and, when those are fewer than four tasks, column
// blocks of 128 as well (an RNN step's [16, K] x [K, N]). Every layout of
// the operands (row-major, transposed lhs, transposed rhs, batched), with
// ragged last blocks, against a float64 reference, and bit for bit the
// same at 1, 2 and 4 threads (the grid depends on the shape only).
#include <gmock/gmock.h>

#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using hlo::Literal;

struct DotCase {
  std::string name;
  int64_t batch, m, k, n;
  bool lhs_transposed, rhs_transposed;
};

void PrintTo(const DotCase& c, std::ostream* os) {
  *os << c.name << " [" << c.batch << "x" << c.m << "x" << c.k << "] x [" << c.k << "x" << c.n << "]";
}

std::string Dims(const std::vector<int64_t>& d) { return absl::StrJoin(d, ","); }

class DotBlocks : public ::testing::TestWithParam<DotCase> {};

TEST_P(DotBlocks, MatchesFloat64AndIsTheSameOnAnyThreadCount) {
  const DotCase& c = GetParam();
  // Operand shapes: lhs [b, m, k] or [b, k, m]; rhs [b, k, n] or [b, n, k]
  // (the batch dimension only when batch > 1).
  std::vector<int64_t> ld = c.lhs_transposed ? std::vector<int64_t>{c.k, c.m}
                                             : std::vector<int64_t>{c.m, c.k};
  std::vector<int64_t> rd = c.rhs_transposed ? std::vector<int64_t>{c.n, c.k}
                                             : std::vector<int64_t>{c.k, c.n};
  std::vector<int64_t> od = {c.m, c.n};
  const bool batched = c.batch > 1;
  if (batched) {
    ld.insert(ld.begin(), c.batch);
    rd.insert(rd.begin(), c.batch);
    od.insert(od.begin(), c.batch);
  }
  const int off = batched ? 1 : 0;
  const std::string text = absl::StrCat(
      "HloModule dot\nENTRY e { a = f32[", Dims(ld), "] parameter(0) b = f32[", Dims(rd),
      "] parameter(1) ROOT r = f32[", Dims(od), "] dot(a, b), ",
      batched ? "lhs_batch_dims={0}, rhs_batch_dims={0}, " : "",
      "lhs_contracting_dims={", (c.lhs_transposed ? 0 : 1) + off, "}, rhs_contracting_dims={",
      (c.rhs_transposed ? 1 : 0) + off, "} }");
  SCOPED_TRACE(text);
  auto module = Parse(text);
  ASSERT_NE(module, nullptr);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<double> a(c.batch * c.m * c.k), b(c.batch * c.k * c.n);
  for (double& v : a) v = u(rng);
  for (double& v : b) v = u(rng);
  auto at = [&](int64_t bi, int64_t i, int64_t kk) {
    return a[bi * c.m * c.k + (c.lhs_transposed ? kk * c.m + i : i * c.k + kk)];
  };
  auto bt = [&](int64_t bi, int64_t kk, int64_t j) {
    return b[bi * c.k * c.n + (c.rhs_transposed ? j * c.k + kk : kk * c.n + j)];
  };
  std::vector<double> want(c.batch * c.m * c.n);
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) s += at(bi, i, kk) * bt(bi, kk, j);
        want[(bi * c.m + i) * c.n + j] = s;
      }
    }
  }
  std::vector<Literal> first;
  for (int threads : {1, 2, 4}) {
    RunOptions opts;
    opts.num_threads = threads;
    auto r = RunModule(*module, {F32(ld, a), F32(rd, b)}, opts);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->outputs.size(), 1u);
    // f32 products of values in [-1, 1] over k terms: well within 1e-5 * k
    // of the float64 sum.
    ExpectNear(r->outputs[0], F32(od, want), 1e-5 * static_cast<double>(c.k),
               absl::StrCat(threads, " threads"));
    if (first.empty()) {
      first = std::move(r->outputs);
    } else {
      EXPECT_TRUE(first[0] == r->outputs[0]) << threads << " threads differ from 1";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Grid, DotBlocks,
    ::testing::Values(
        // Column blocks: one row block, n over two blocks of 128, ragged.
        DotCase{"rnn_step", 1, 16, 256, 256, false, false},
        DotCase{"ragged_columns", 1, 9, 77, 301, false, false},
        DotCase{"transposed_lhs", 1, 16, 130, 270, true, false},
        DotCase{"transposed_rhs", 1, 5, 64, 389, false, true},
        DotCase{"both_transposed", 1, 12, 50, 260, true, true},
        DotCase{"batched_columns", 3, 7, 40, 257, false, false},
        // Row blocks only (enough of them), and narrow outputs (no split).
        DotCase{"row_blocks", 1, 1100, 64, 300, false, false},
        DotCase{"narrow", 2, 16, 200, 200, false, true}),
    [](const ::testing::TestParamInfo<DotCase>& i) { return i.param.name; });

}  // namespace
}  // namespace tpuoff::runtime
