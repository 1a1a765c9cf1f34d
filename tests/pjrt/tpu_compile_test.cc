// Every kernel x mode x dtype x sharding tpuoff emits compiles for TPU v6e
// (v6e:2x4) with libtpu, offline and without a TPU, in one process; so do
// the GRPO kernels with a representative set of GRPO_SPEC v2 loss options
// and trainer presets. For the tiled and fused kernels tpuoff's model of
// XLA:TPU's HBM (hlo/analysis/v6e_memory_spaces.h: arguments + outputs +
// the temporaries that do not fit the VMEM budget) is within 1% of XLA's
// HBM allocation (argument + output + temp - alias), and for the tiled
// kernels so is tpuoff's TPU-padded static peak. For the fused kernel XLA
// keeps no second [H,V] array. Reference kernels are printed, not checked:
// XLA fuses what the emulator keeps (README).
// Shapes are small (XLA:TPU's compile time grows with the fused backward's
// tiles) but not tiny (XLA:TPU keeps up to ~0.3 MB of its own bookkeeping
// in HBM temp, which must stay well below 1% of a device's HBM): B=8, T=128,
// Qwen's V=151936; the fused kernel at T=8, H=1024, 512-column tiles.
// Registered only with the PJRT backend and libtpu (tests/pjrt/).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/analysis/v6e_memory_spaces.h"
#include "hlo/ir/instruction.h"
#include "hlo/ir/status_macros.h"
#include "runtime/pjrt/pjrt_backend.h"
#include "tools/cli/flags.h"
#include "tools/cli/kernel_flags.h"
#include "tools/cli/shard_flags.h"

namespace tpuoff {
namespace {

struct Case {
  std::string kernel;
  std::vector<std::string> flags;  // tpuoff compile flags after --kernel
  std::string Name() const { return absl::StrCat(kernel, " ", absl::StrJoin(flags, " ")); }
};

bool Tiled(const std::string& k) { return k == "grpo_tiled" || k == "entropy_tiled"; }
bool Fused(const std::string& k) { return k == "grpo_fused_linear"; }

std::vector<std::string> Shape(const std::string& kernel, const std::string& dtype) {
  std::vector<std::string> f = {"--batch=8", "--vocab=151936", "--logits-dtype=" + dtype};
  if (Fused(kernel)) {
    f.insert(f.end(), {"--seq=8", "--hidden=1024", "--block-size=512"});
  } else {
    f.push_back("--seq=128");
  }
  return f;
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  // Every sharding each kernel has: 1-D over 8 devices and the 2x4 meshes.
  const std::vector<std::string> reference_shards = {"none", "8:batch", "8:seq",
                                                     "2x4:batch,seq"};
  const std::vector<std::string> tiled_shards = {"none",          "8:batch",       "8:vocab",
                                                 "8:seq",         "2x4:batch,vocab",
                                                 "2x4:seq,vocab"};
  for (const std::string kernel : {"grpo_reference", "grpo_tiled", "entropy_reference",
                                   "entropy_tiled", "grpo_fused_linear"}) {
    const bool entropy = kernel.rfind("entropy", 0) == 0;
    const bool reference = kernel.find("reference") != std::string::npos;
    for (const std::string mode : {"fwd", "bwd", "fwd_bwd"}) {
      if (entropy && mode != "fwd") continue;
      for (const std::string dtype : {"bf16", "f32"}) {
        for (const std::string& shard : reference ? reference_shards : tiled_shards) {
          Case c{kernel, Shape(kernel, dtype)};
          c.flags.push_back("--mode=" + mode);
          if (shard != "none") {
            std::vector<std::string> ms = absl::StrSplit(shard, ':');
            c.flags.push_back("--mesh=" + ms[0]);
            c.flags.push_back("--shard=" + ms[1]);
          }
          cases.push_back(std::move(c));
        }
      }
    }
  }
  // The fused kernel's token-chunked backward (an inner loop over token
  // chunks; d_lm_head's tile accumulated vocab-major across them) under
  // every sharding; 4-token chunks split every device's rows.
  for (const std::string dtype : {"bf16", "f32"}) {
    for (const std::string& shard : tiled_shards) {
      if (dtype == "f32" && shard != "none") continue;
      Case c{"grpo_fused_linear", Shape("grpo_fused_linear", dtype)};
      c.flags.insert(c.flags.end(), {"--mode=fwd_bwd", "--token-chunk=4"});
      if (shard != "none") {
        std::vector<std::string> ms = absl::StrSplit(shard, ':');
        c.flags.push_back("--mesh=" + ms[0]);
        c.flags.push_back("--shard=" + ms[1]);
      }
      cases.push_back(std::move(c));
    }
  }
  // The fused kernel with its dlogits tile rounded to bf16 for the gradient
  // products (bf16 x bf16 dots on the MXU), unsharded and 2-D sharded.
  for (const std::string& shard : {std::string("none"), std::string("2x4:batch,vocab")}) {
    for (const std::string mode : {"bwd", "fwd_bwd"}) {
      Case c{"grpo_fused_linear", Shape("grpo_fused_linear", "bf16")};
      c.flags.insert(c.flags.end(), {"--mode=" + mode, "--dlogits-dtype=bf16"});
      if (shard != "none") {
        std::vector<std::string> ms = absl::StrSplit(shard, ':');
        c.flags.push_back("--mesh=" + ms[0]);
        c.flags.push_back("--shard=" + ms[1]);
      }
      cases.push_back(std::move(c));
    }
  }
  // GRPO_SPEC v2 loss options and trainer presets (fwd_bwd): each set on
  // every GRPO kernel, under a different sharding per set.
  const std::vector<std::pair<std::vector<std::string>, std::string>> v2 = {
      {{"--policy-loss=gspo", "--loss-type=sequence_mean"}, "none"},
      {{"--policy-loss=gspo_token", "--loss-type=sequence_mean", "--empty-rows=skip"},
       "8:batch"},
      {{"--policy-loss=cispo", "--is-level=token", "--is-mode=mask", "--kl-estimator=k1",
        "--beta=0.04"},
       "2x4:batch,seq"},
      {{"--policy-loss=sapo", "--advantage-shape=token", "--kl-estimator=low_var_kl",
        "--beta=0.04", "--log-ratio-clamp=20"},
       "8:seq"},
      {{"--entropy-coef=0.01", "--temperature=0.7", "--temperature-mode=post_lse",
        "--is-level=sequence", "--row-count-input", "--loss-type=sequence_mean",
        "--empty-rows=skip"},
       "none"},
      {{"--preset=verl-gspo"}, "2x4:batch,seq"},
      {{"--preset=trl-dapo"}, "8:batch"},
  };
  for (const std::string kernel : {"grpo_reference", "grpo_tiled", "grpo_fused_linear"}) {
    for (const auto& [opts, shard] : v2) {
      Case c{kernel, Shape(kernel, "bf16")};
      c.flags.push_back("--mode=fwd_bwd");
      c.flags.insert(c.flags.end(), opts.begin(), opts.end());
      // The tiled kernels also split the vocabulary where the set's mesh is 2-D.
      std::string s = shard;
      if ((Tiled(kernel) || Fused(kernel)) && s == "2x4:batch,seq") s = "2x4:seq,vocab";
      if (s != "none") {
        std::vector<std::string> ms = absl::StrSplit(s, ':');
        c.flags.push_back("--mesh=" + ms[0]);
        c.flags.push_back("--shard=" + ms[1]);
      }
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// The module `tpuoff compile --kernel=... FLAGS` compiles, through the same
// flag parsing and checks.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> Build(const Case& c) {
  tools::KernelFlags k;
  tools::ShardFlags s;
  tools::FlagSet flags("tpu_compile_test", "", "");
  tools::RegisterKernelFlags(flags, &k);
  const tools::ShardFlagOptions so{.with_none = true, .with_global_form = false};
  tools::RegisterShardFlags(flags, &s, so);
  std::vector<std::string> args = {"--kernel=" + c.kernel};
  args.insert(args.end(), c.flags.begin(), c.flags.end());
  RETURN_IF_ERROR(flags.Parse(args));
  RETURN_IF_ERROR(tools::CheckKernelFlagUsage(flags, &k));
  RETURN_IF_ERROR(tools::CheckShardFlagUsage(flags, s, k, so));
  return tools::BuildShardedModule(k, s);
}

struct Tally {
  int cases = 0;
  int checked = 0;
};

void PrintHeader() {
  std::printf("%12s %12s %12s %9s %12s %9s %10s  %s\n", "XLA HBM", "XLA peak", "tpuoff v6e",
              "diff", "tpuoff TPU", "diff", "XLA temp", "case");
}

// Compiles `c` for v6e:2x4 and checks XLA:TPU's memory against tpuoff's.
void Check(const Case& c, Tally* tally) {
  SCOPED_TRACE(c.Name());
  ++tally->cases;
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> m = Build(c);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<hlo::DeviceMemoryReport> ours = hlo::AnalyzeDeviceMemory(**m);
  ASSERT_TRUE(ours.ok()) << ours.status();
  ASSERT_EQ(ours->groups.size(), 1u);
  const hlo::MemoryAnalysis& a = ours->groups[0].analysis;
  const hlo::V6eMemorySplit v6e = hlo::SplitV6eMemory(a);
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
  const double diff_v6e = static_cast<double>(v6e.hbm_bytes) / hbm - 1.0;
  const double diff_peak = static_cast<double>(a.tpu_peak.bytes) / hbm - 1.0;
  std::printf("%12lld %12lld %12lld %+8.3f%% %12lld %+8.3f%% %10lld  %s\n",
              static_cast<long long>(hbm), static_cast<long long>(st.peak_bytes),
              static_cast<long long>(v6e.hbm_bytes), 100.0 * diff_v6e,
              static_cast<long long>(a.tpu_peak.bytes), 100.0 * diff_peak,
              static_cast<long long>(st.temp_bytes), c.Name().c_str());
  std::fflush(stdout);
  if (Tiled(c.kernel) || Fused(c.kernel)) {
    ++tally->checked;
    EXPECT_LT(std::fabs(diff_v6e), 0.01)
        << "XLA:TPU HBM " << hbm << " vs tpuoff's v6e model " << v6e.hbm_bytes;
  }
  if (Tiled(c.kernel)) {
    EXPECT_LT(std::fabs(diff_peak), 0.01)
        << "XLA:TPU HBM " << hbm << " vs tpuoff's TPU-padded peak " << a.tpu_peak.bytes;
  }
  if (Fused(c.kernel)) {
    // No second lm_head-sized array in HBM: XLA's temporaries stay below
    // half of the (per-device) lm_head.
    int64_t lm_head_bytes = 0;
    for (const hlo::HloInstruction* p : (*m)->entry()->parameters()) {
      if (p->name() == "lm_head") lm_head_bytes = p->shape().byte_size();
    }
    ASSERT_GT(lm_head_bytes, 0);
    EXPECT_LT(st.temp_bytes, lm_head_bytes / 2) << "XLA:TPU temp " << st.temp_bytes;
  }
}

TEST(TpuCompile, EveryKernelCompilesForV6eAndTiledAndFusedHbmAgrees) {
  ASSERT_TRUE(runtime::pjrt::Available());
  ASSERT_FALSE(runtime::pjrt::DefaultTpuPluginPath().empty());
  PrintHeader();
  Tally tally;
  for (const Case& c : AllCases()) Check(c, &tally);
  std::printf("%d modules compiled for v6e:2x4; %d tiled/fused ones checked within 1%%\n",
              tally.cases, tally.checked);
}

}  // namespace
}  // namespace tpuoff
