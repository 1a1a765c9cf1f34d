// Every kernel x mode x dtype x sharding tpuoff emits compiles for TPU v6e
// (v6e:2x4) with libtpu, offline and without a TPU, and for the tiled
// kernels tpuoff's static TPU-padded peak is within 1% of XLA:TPU's HBM
// allocation (arguments + outputs + temp - alias: XLA's peak_memory also
// counts buffers it stages in the 128 MiB on-chip VMEM, which at these
// per-device sizes can be whole logits arrays).
// For the fused LM-head kernel XLA:TPU no longer keeps a second [H,V]
// array (the d_lm_head layout, the f32 dots' precision); its peak is
// printed beside tpuoff's (README: where they differ and why).
// Registered only with the PJRT backend and libtpu (tests/pjrt/).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/ir/instruction.h"
#include "runtime/pjrt/pjrt_backend.h"
#include "tools/cli/kernel_flags.h"
#include "tools/cli/shard_flags.h"

namespace tpuoff {
namespace {

struct Case {
  std::string kernel, mode, dtype, shard;
  std::string Name() const { return absl::StrCat(kernel, " ", mode, " ", dtype, " ", shard); }
};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const std::string kernel : {"grpo_reference", "grpo_tiled", "entropy_reference",
                                   "entropy_tiled", "grpo_fused_linear"}) {
    const bool entropy = kernel.rfind("entropy", 0) == 0;
    const bool reference = kernel.find("reference") != std::string::npos;
    for (const std::string mode : {"fwd", "bwd", "fwd_bwd"}) {
      if (entropy && mode != "fwd") continue;
      for (const std::string dtype : {"bf16", "f32"}) {
        for (const std::string shard : {"none", "batch", "vocab"}) {
          if (reference && shard == "vocab") continue;
          cases.push_back({kernel, mode, dtype, shard});
        }
      }
    }
  }
  return cases;
}

// B=8 sequences (8-way batch-shardable) of T=64 over Qwen's vocabulary; the
// fused kernel at H=1536 (Qwen2.5-1.5B), so that, as at the seed shapes,
// lm_head is larger than a v6e core's 128 MiB VMEM.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> Build(const Case& c) {
  tools::KernelFlags k;
  k.kernel = c.kernel;
  k.mode = c.mode;
  k.batch = 8;
  k.seq = 64;
  k.vocab = 151936;
  k.logits_dtype = c.dtype;
  k.hidden = 1536;
  tools::ShardFlags s;
  s.mesh = "8";
  s.shard = c.shard;
  return tools::BuildShardedModule(k, s);
}

TEST(TpuCompile, EveryKernelCompilesForV6eAndTiledPeaksAgree) {
  ASSERT_TRUE(runtime::pjrt::Available());
  ASSERT_FALSE(runtime::pjrt::DefaultTpuPluginPath().empty());
  std::printf("%-34s %12s %12s %12s %9s %12s\n", "case", "XLA:TPU HBM", "XLA peak",
              "tpuoff TPU", "diff", "XLA temp");
  for (const Case& c : AllCases()) {
    SCOPED_TRACE(c.Name());
    absl::StatusOr<std::unique_ptr<hlo::HloModule>> m = Build(c);
    ASSERT_TRUE(m.ok()) << m.status();
    absl::StatusOr<hlo::DeviceMemoryReport> ours = hlo::AnalyzeDeviceMemory(**m);
    ASSERT_TRUE(ours.ok()) << ours.status();
    ASSERT_EQ(ours->groups.size(), 1u);
    const hlo::MemoryAnalysis& a = ours->groups[0].analysis;
    runtime::pjrt::TopologyCompileOptions o;
    o.topology = "v6e:2x4";
    absl::StatusOr<runtime::pjrt::TopologyCompileResult> xla =
        runtime::pjrt::CompileForTopology(**m, o);
    ASSERT_TRUE(xla.ok()) << xla.status();
    const runtime::pjrt::CompiledMemoryStats& st = xla->stats;
    EXPECT_EQ(xla->platform, "tpu");
    EXPECT_EQ(xla->topology_devices, 8);
    ASSERT_GT(st.peak_bytes, 0);
    // XLA:TPU's arguments are the module's parameters (padded to tiles).
    EXPECT_GE(st.argument_bytes, a.argument_bytes);
    EXPECT_LE(st.argument_bytes, a.argument_bytes * 1.01 + (1 << 20));
    const int64_t hbm = st.argument_bytes + st.output_bytes + st.temp_bytes - st.alias_bytes;
    const double diff = static_cast<double>(a.tpu_peak.bytes) / hbm - 1.0;
    std::printf("%-34s %12lld %12lld %12lld %+8.3f%% %12lld\n", c.Name().c_str(),
                static_cast<long long>(hbm), static_cast<long long>(st.peak_bytes),
                static_cast<long long>(a.tpu_peak.bytes), 100.0 * diff,
                static_cast<long long>(st.temp_bytes));
    std::fflush(stdout);
    if (c.kernel == "grpo_tiled" || c.kernel == "entropy_tiled") {
      EXPECT_LT(std::fabs(diff), 0.01) << "XLA:TPU HBM " << hbm << " vs tpuoff "
                                       << a.tpu_peak.bytes;
    }
    if (c.kernel == "grpo_fused_linear") {
      // No second lm_head-sized array in HBM: XLA's temporaries stay below
      // 1% of the (per-device) lm_head.
      int64_t lm_head_bytes = 0;
      for (const hlo::HloInstruction* p : (*m)->entry()->parameters()) {
        if (p->name() == "lm_head") lm_head_bytes = p->shape().byte_size();
      }
      ASSERT_GT(lm_head_bytes, 0);
      EXPECT_LT(st.temp_bytes, lm_head_bytes / 100) << "XLA:TPU temp " << st.temp_bytes;
    }
  }
}

}  // namespace
}  // namespace tpuoff
