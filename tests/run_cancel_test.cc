// Stopping what runs: RunOptions::cancel (the emulator stops at its devices'
// next step, CANCELLED naming where) and RunIsolated (a plugin's work in a
// child process: its result, its error, its crash, its endless loop past
// the limit, its cancellation).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <sstream>
#include <string>
#include <thread>

#include "runtime/pjrt/isolated.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using pjrt::ChildReader;
using pjrt::ChildWriter;
using pjrt::IsolationOptions;
using pjrt::RunIsolated;

// tests/cli/data/endless.hlo on `devices` partitions.
std::string Endless(int devices) {
  std::ifstream in(std::string(TPUOFF_SOURCE_DIR) + "/tests/cli/data/endless.hlo");
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  const std::string head = "HloModule endless";
  s.insert(s.find(head) + head.size(), ", num_partitions=" + std::to_string(devices));
  return s;
}

TEST(RunCancel, CancelStopsEveryDeviceNamingWhere) {
  for (int devices : {1, 3}) {
    auto m = Parse(Endless(devices));
    std::atomic<bool> cancel{false};
    RunOptions opts;
    opts.cancel = &cancel;
    opts.timeout_seconds = 120;  // ends the test if cancelling is broken
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      cancel.store(true);
    });
    std::vector<std::vector<hlo::Literal>> args(devices);
    for (auto& a : args) a.push_back(hlo::Literal::ScalarS32(0));
    auto r = RunSpmd(*m, args, opts);
    stopper.join();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find("cancelled in while loop %w"), std::string::npos) << msg;
    EXPECT_NE(msg.find("iteration"), std::string::npos) << msg;
  }
}

TEST(RunCancel, UnsetFlagChangesNothing) {
  auto m = Parse(R"(HloModule ok
ENTRY %main (x: s32[]) -> s32[] {
  %x = s32[] parameter(0)
  ROOT %n = s32[] negate(%x)
})");
  std::atomic<bool> cancel{false};
  RunOptions opts;
  opts.cancel = &cancel;
  auto r = RunModule(*m, {hlo::Literal::ScalarS32(5)}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].data<int32_t>()[0], -5);
}

TEST(RunIsolated, ResultErrorCrashLimitAndCancel) {
  // A result streams back.
  std::string got;
  uint64_t number = 0;
  absl::Status s = RunIsolated(
      {.what = "adding"},
      [](ChildWriter& w) -> absl::Status {
        if (absl::Status st = w.WriteU64(42); !st.ok()) return st;
        return w.WriteString(std::string(3 << 20, 'x'));  // beyond a pipe's buffer
      },
      [&](ChildReader& r) -> absl::Status {
        if (absl::Status st = r.ReadU64(&number); !st.ok()) return st;
        return r.ReadString(&got);
      });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(number, 42u);
  EXPECT_EQ(got.size(), size_t{3} << 20);
  auto no_reply = [](ChildReader&) { return absl::InternalError("the parent must not read"); };
  // The child's error status arrives as itself.
  s = RunIsolated({.what = "failing"},
                  [](ChildWriter&) { return absl::NotFoundError("no such plugin"); }, no_reply);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_EQ(s.message(), "no such plugin");
  // A crash names the signal; no core file.
  s = RunIsolated({.what = "crashing"},
                  [](ChildWriter&) -> absl::Status { ::abort(); }, no_reply);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(std::string(s.message()).find("crashing: the plugin crashed (signal 6, SIGABRT)"),
            std::string::npos)
      << s;
  s = RunIsolated({.what = "dividing"},
                  [](ChildWriter&) -> absl::Status {
                    ::raise(SIGFPE);
                    return absl::OkStatus();
                  },
                  no_reply);
  EXPECT_NE(std::string(s.message()).find("(signal 8, SIGFPE)"), std::string::npos) << s;
  // An exception in the child never unwinds into the caller's code there.
  s = RunIsolated({.what = "throwing"},
                  [](ChildWriter&) -> absl::Status { throw std::runtime_error("plugin threw"); },
                  no_reply);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_EQ(s.message(), "throwing: an exception in the plugin's process");
  // A child that exits without a result.
  s = RunIsolated({.what = "leaving"}, [](ChildWriter&) -> absl::Status { ::_exit(3); },
                  no_reply);
  EXPECT_NE(std::string(s.message()).find("ended (exit 3) without a result"), std::string::npos)
      << s;
  // An endless child is killed at the limit.
  auto forever = [](ChildWriter&) -> absl::Status {
    while (true) ::pause();
  };
  s = RunIsolated({.what = "spinning", .timeout_seconds = 0.3}, forever, no_reply);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(std::string(s.message()).find("spinning: exceeded the time limit of 0.3 s"),
            std::string::npos)
      << s;
  // ... or when cancelled.
  std::atomic<bool> cancel{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel.store(true);
  });
  s = RunIsolated({.what = "waiting", .timeout_seconds = 120, .cancel = &cancel}, forever,
                  no_reply);
  stopper.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  // A result cut short (the child dies half-way) is an error, not data.
  s = RunIsolated(
      {.what = "truncating"},
      [](ChildWriter& w) -> absl::Status {
        (void)w.WriteU64(8);
        ::_exit(0);
      },
      [](ChildReader& r) -> absl::Status {
        std::string x;
        return r.ReadString(&x);
      });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(std::string(s.message()).find("without a result"), std::string::npos) << s;
}

}  // namespace
}  // namespace tpuoff::runtime
