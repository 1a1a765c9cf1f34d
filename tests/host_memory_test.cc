// The host allocator's fresh-zero claim (runtime/cpu/host_memory.h) and the
// zero fills that rely on it: skipped only on memory fresh from the system,
// never on a recycled block that holds an earlier run's data.
#include "runtime/cpu/host_memory.h"

#include <cstring>

#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using hlo::Literal;

constexpr size_t kLarge = size_t{16} << 20;  // mapped fresh (>= 8 MiB)

// Under AddressSanitizer the allocator maps nothing (every block is a
// malloc block, so nothing is known to be zero).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMapsBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kMapsBlocks = false;
#else
constexpr bool kMapsBlocks = true;
#endif
#else
constexpr bool kMapsBlocks = true;
#endif

bool AllZero(const void* p, size_t bytes) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) {
    if (b[i] != 0) return false;
  }
  return true;
}

TEST(HostMemory, FreshLargeBlocksAreClaimedAsZeroOnce) {
  ReleaseHostCache();
  void* p = HostAlloc(kLarge);
  ASSERT_NE(p, nullptr);
  if (kMapsBlocks) EXPECT_TRUE(AllZero(p, kLarge));
  EXPECT_EQ(HostTakeZeroed(p), kMapsBlocks);
  EXPECT_FALSE(HostTakeZeroed(p));  // once
  std::memset(p, 0x5a, kLarge);
  HostFree(p);  // cached
  void* q = HostAlloc(kLarge);
  ASSERT_EQ(q, p);  // the same block back from the cache, dirty
  EXPECT_FALSE(HostTakeZeroed(q));
  HostFree(q);
  // Small blocks come from malloc: never claimed.
  void* s = HostAlloc(4096);
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(HostTakeZeroed(s));
  HostFree(s);
  EXPECT_FALSE(HostTakeZeroed(nullptr));
  ReleaseHostCache();
}

// HostMapFresh (`tpuoff bench`'s page floor): zeroed, writable, never in
// the cache; nullptr for 0 bytes and for a size the host cannot back.
TEST(HostMemory, FreshMappingsAreZeroWritableAndUncached) {
  ReleaseHostCache();
  // One page, one slice, and 200 MiB: populated by several threads.
  for (const size_t bytes : {size_t{4096}, kLarge, size_t{200} << 20}) {
    char* p = static_cast<char*>(HostMapFresh(bytes));
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_TRUE(AllZero(p, bytes)) << bytes;
    std::memset(p, 0x5a, bytes);
    EXPECT_EQ(p[bytes - 1], 0x5a);
    HostUnmapFresh(p, bytes);
    EXPECT_EQ(HostCacheBytes(), 0) << bytes;
  }
  EXPECT_EQ(HostMapFresh(0), nullptr);
  EXPECT_EQ(HostMapFresh(size_t{1} << 56), nullptr);  // 64 PiB: more than any address space
  HostUnmapFresh(nullptr, 0);                         // ignored
}

TEST(HostMemory, ZeroFillsAreRightOnFreshAndRecycledBlocks) {
  const std::string text =
      "HloModule fill\nENTRY e { z = f32[] constant(0)\n"
      "ROOT b = f32[2048,2048] broadcast(z), dimensions={} }\n";
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  ReleaseHostCache();
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    auto r = RunModule(*m, {});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->outputs.size(), 1u);
    Literal& out = r->outputs[0];
    ASSERT_EQ(out.raw_size(), kLarge);
    EXPECT_TRUE(AllZero(out.raw(), out.raw_size()));
    // Dirty the block: the output hands it back to the cache when it goes,
    // and the next run's fill gets it.
    std::memset(out.raw(), 0x7f, out.raw_size());
  }
  ReleaseHostCache();
}

}  // namespace
}  // namespace tpuoff::runtime
