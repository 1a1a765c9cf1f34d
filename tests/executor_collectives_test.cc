// SPMD runs on 2, 4 and 8 simulated devices through the in-process
// collective backend: values, bit-reproducibility, and failures that end in
// an error instead of a hang.
#include <chrono>
#include <thread>

#include "hlo/ir/float16.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using hlo::Literal;

// x: f32[n] on every device; device d holds x[i] = (d + 1) * (i + 1).
std::string CollectivesModule(int64_t n) {
  const std::string N = std::to_string(n);
  std::string pairs;
  for (int64_t d = 0; d < n; ++d) {
    pairs += (d ? "," : "") + std::string("{") + std::to_string(d) + "," +
             std::to_string((d + 1) % n) + "}";
  }
  return "HloModule spmd, num_partitions=" + N + R"(
add_f32 { af0 = f32[] parameter(0)  af1 = f32[] parameter(1)  ROOT afr = f32[] add(af0, af1) }
ENTRY e {
  x = f32[)" + N + R"(] parameter(0)
  pid = u32[] partition-id()
  ar = f32[)" + N + R"(] all-reduce(x), channel_id=1, to_apply=add_f32
  x2 = f32[1,)" + N + R"(] reshape(x)
  ag = f32[1,)" + std::to_string(n * n) + R"(] all-gather(x2), channel_id=2, dimensions={1}
  rs = f32[1] reduce-scatter(x), channel_id=3, dimensions={0}, to_apply=add_f32
  cp = f32[)" + N + R"(] collective-permute(x), channel_id=4, source_target_pairs={)" + pairs + R"(}
  a2a = f32[)" + N + R"(] all-to-all(x), channel_id=5, dimensions={0}
  ROOT t = (u32[], f32[)" + N + "], f32[1," + std::to_string(n * n) + "], f32[1], f32[" + N +
         "], f32[" + N + R"(]) tuple(pid, ar, ag, rs, cp, a2a)
}
)";
}

double X(int64_t d, int64_t i) { return (d + 1) * (i + 1); }

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, AllCollectivesMatchHandFormulas) {
  const int64_t n = GetParam();
  auto m = Parse(CollectivesModule(n));
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(hlo::VerifyModule(*m).ok()) << hlo::VerifyModule(*m);
  std::vector<std::vector<Literal>> args(n);
  for (int64_t d = 0; d < n; ++d) {
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(X(d, i));
    args[d].push_back(F32({n}, v));
  }
  RunOptions opts;
  opts.num_threads = 2;
  std::vector<Literal> first;
  for (int run = 0; run < 2; ++run) {
    auto r = RunSpmd(*m, args, opts);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->outputs.size(), static_cast<size_t>(6 * n));
    ASSERT_EQ(r->devices.size(), static_cast<size_t>(n));
    const double sum_scale = n * (n + 1) / 2.0;  // sum over d of (d + 1)
    for (int64_t d = 0; d < n; ++d) {
      const Literal* out = &r->outputs[6 * d];
      EXPECT_EQ(out[0].GetAsInt64(0), d) << "partition-id on device " << d;
      std::vector<double> ar, ag, a2a, cp;
      for (int64_t i = 0; i < n; ++i) ar.push_back(sum_scale * (i + 1));
      for (int64_t s = 0; s < n; ++s) {
        for (int64_t i = 0; i < n; ++i) ag.push_back(X(s, i));
      }
      for (int64_t i = 0; i < n; ++i) a2a.push_back(X(i, d));  // chunk d of device i
      const int64_t src = (d + n - 1) % n;
      for (int64_t i = 0; i < n; ++i) cp.push_back(X(src, i));
      const std::string where = "device " + std::to_string(d) + " of " + std::to_string(n);
      ExpectNear(out[1], F32({n}, ar), 0, "all-reduce " + where);
      ExpectNear(out[2], F32({1, n * n}, ag), 0, "all-gather " + where);
      ExpectNear(out[3], F32({1}, {sum_scale * (d + 1)}), 0, "reduce-scatter " + where);
      ExpectNear(out[4], F32({n}, cp), 0, "collective-permute " + where);
      ExpectNear(out[5], F32({n}, a2a), 0, "all-to-all " + where);
    }
    if (run == 0) {
      first = std::move(r->outputs);
    } else {
      for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(first[i] == r->outputs[i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Mesh, CollectivesTest, ::testing::Values(2, 4, 8));

TEST(Collectives, MismatchedParticipationFailsAtOnceNamingWaitingDevices) {
  // Only device 0 reaches the all-reduce; device 1 skips it and finishes,
  // so nothing can complete the collective: it fails without waiting for
  // the timeout (30 s here).
  auto m = Parse(R"(HloModule mismatch, num_partitions=2
    add_f32 { af0 = f32[] parameter(0)  af1 = f32[] parameter(1)  ROOT afr = f32[] add(af0, af1) }
    yes { ya = f32[2] parameter(0) ROOT yr = f32[2] all-reduce(ya), channel_id=1, replica_groups={{0,1}}, to_apply=add_f32 }
    no { na = f32[2] parameter(0) ROOT nr = f32[2] negate(na) }
    ENTRY e { x = f32[2] parameter(0) pid = u32[] partition-id() zero = u32[] constant(0)
      p = pred[] compare(pid, zero), direction=EQ
      ROOT c = f32[2] conditional(p, x, x), true_computation=yes, false_computation=no })");
  ASSERT_NE(m, nullptr);
  std::vector<std::vector<Literal>> args = {{F32({2}, {1, 2})}, {F32({2}, {3, 4})}};
  for (int threads : {1, 2}) {
    InProcessCollectives backend(2, {.timeout_seconds = 30});
    RunOptions opts;
    opts.num_threads = threads;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = RunSpmd(*m, args, opts, &backend);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find("collective %yr"), std::string::npos) << msg;
    EXPECT_NE(msg.find("devices {0} are waiting for devices {1}"), std::string::npos) << msg;
    // Far from the 30 s timeout (a generous bound, not a timing test).
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  }
}

TEST(Collectives, DeviceStillRunningTimesOutTheWaitingOnes) {
  // Device 0 waits at the all-reduce while device 1 spins in a loop that
  // would run for hours: the collective timeout fails the run, naming the
  // waiting and the missing device, and device 1 stops at its next step.
  auto m = Parse(R"(HloModule busy, num_partitions=2
    add_f32 { af0 = f32[] parameter(0)  af1 = f32[] parameter(1)  ROOT afr = f32[] add(af0, af1) }
    cond { c = s64[] parameter(0) lim = s64[] constant(100000000000) ROOT lt = pred[] compare(c, lim), direction=LT }
    body { b = s64[] parameter(0) one = s64[] constant(1) ROOT n = s64[] add(b, one) }
    quick { q = s64[] parameter(0) ROOT qr = s64[] copy(q) }
    spin { s = s64[] parameter(0) ROOT w = s64[] while(s), condition=cond, body=body }
    ENTRY e { x = f32[2] parameter(0) pid = u32[] partition-id() zero = u32[] constant(0)
      p = pred[] compare(pid, zero), direction=EQ
      z = s64[] constant(0)
      spun = s64[] conditional(p, z, z), true_computation=quick, false_computation=spin
      cv = f32[] convert(spun)
      bc = f32[2] broadcast(cv), dimensions={}
      y = f32[2] add(x, bc)
      ROOT r = f32[2] all-reduce(y), channel_id=1, replica_groups={{0,1}}, to_apply=add_f32 })");
  ASSERT_NE(m, nullptr);
  std::vector<std::vector<Literal>> args = {{F32({2}, {1, 2})}, {F32({2}, {3, 4})}};
  for (int threads : {1, 2}) {
    RunOptions opts;
    opts.num_threads = threads;
    opts.collective_timeout_seconds = 0.3;
    auto r = RunSpmd(*m, args, opts);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find("collective %r"), std::string::npos) << msg;
    EXPECT_NE(msg.find("did not complete in 0.3s"), std::string::npos) << msg;
    EXPECT_NE(msg.find("devices {0} are waiting for devices {1}"), std::string::npos) << msg;
  }
}

TEST(Collectives, FailedDeviceAbortsTheOthers) {
  // Device 1 gets an argument of the wrong shape and fails before the
  // all-reduce; device 0 must be released with ABORTED, and the run reports
  // device 1's error.
  auto m = Parse(R"(HloModule abort, num_partitions=2
    add_f32 { af0 = f32[] parameter(0)  af1 = f32[] parameter(1)  ROOT afr = f32[] add(af0, af1) }
    ENTRY e { x = f32[2] parameter(0) ROOT r = f32[2] all-reduce(x), channel_id=1, to_apply=add_f32 })");
  ASSERT_NE(m, nullptr);
  InProcessCollectives backend(2, {.timeout_seconds = 30});
  std::vector<std::vector<Literal>> args = {{F32({2}, {1, 2})}, {F32({3}, {3, 4, 5})}};
  auto r = RunSpmd(*m, args, {}, &backend);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("device 1"), std::string::npos) << r.status();
}

TEST(Collectives, BackendReducesInDeviceOrder) {
  // bf16 sums are rounded after every combine; combining in device order
  // gives (1 + 2^-8) -> 1, then 1 + 2^-8 -> 1 on every device.
  InProcessCollectives backend(3);
  std::vector<uint16_t> in = {hlo::F32ToBf16(1.0f), hlo::F32ToBf16(0.00390625f),
                              hlo::F32ToBf16(0.00390625f)};
  std::vector<uint16_t> out(3);
  std::vector<std::thread> threads;
  std::vector<absl::Status> st(3);
  for (int d = 0; d < 3; ++d) {
    threads.emplace_back([&, d] {
      CollectiveCall call{d, "k", "ar", {0, 1, 2}};
      st[d] = backend.AllReduce(call, PrimitiveType::kBF16, ReductionKind::kSum, &in[d],
                                &out[d], 1);
    });
  }
  for (auto& t : threads) t.join();
  for (int d = 0; d < 3; ++d) {
    ASSERT_TRUE(st[d].ok()) << st[d];
    EXPECT_EQ(hlo::Bf16ToF32(out[d]), 1.0f);
  }
}

}  // namespace
}  // namespace tpuoff::runtime
