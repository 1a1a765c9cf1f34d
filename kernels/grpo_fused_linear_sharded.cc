#include "kernels/grpo_fused_linear_sharded.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/spmd/shard_map.h"
#include "hlo/spmd/sharding_util.h"
#include "hlo/ir/status_macros.h"
#include "kernels/grpo_fused_linear.h"

namespace tpuoff::kernels {

using hlo::PartitionSpec;
using hlo::ShardMapContext;
using hlo::XlaBuilder;
using hlo::XlaOp;

absl::Status ValidateFusedLinearSharding(const GrpoConfig& config,
                                         const ShardingSpec& sharding,
                                         const FusedShardingOptions& options) {
  RETURN_IF_ERROR(ValidateFusedLinearConfig(config));
  if (!sharding.Sharded()) return hlo::ValidateMesh(sharding.mesh);
  ASSIGN_OR_RETURN(ShardLayout layout, LayoutOf(sharding));
  const int64_t ntok = layout.nb * layout.ns;
  if (options.reduce_scatter_d_lm_head) {
    if (ntok == 1) {
      return absl::InvalidArgumentError(
          "grpo_fused_linear: reduce-scattering d_lm_head needs batch or seq sharding");
    }
    if (config.hidden % ntok != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grpo_fused_linear: reduce-scattering d_lm_head needs H=", config.hidden,
          " divisible by the ", ntok, " batch/seq shards"));
    }
  }
  return absl::OkStatus();
}

namespace {

FusedLinearParams ParamsByName(const std::vector<std::string>& names,
                               absl::Span<const XlaOp> args) {
  FusedLinearParams p;
  p.grpo = GrpoParamsByName(names, args);
  for (size_t i = 0; i < names.size() && i < args.size(); ++i) {
    if (names[i] == "hidden") p.hidden = args[i];
    if (names[i] == "lm_head") p.lm_head = args[i];
  }
  return p;
}

std::vector<XlaOp> OutputsInOrder(const FusedLinearOutputs& out, KernelMode mode) {
  std::vector<XlaOp> ops;
  if (mode != KernelMode::kBwd) ops = {out.loss, out.per_token_loss, out.logp, out.entropy, out.lse};
  if (mode != KernelMode::kFwd) {
    ops.push_back(out.d_hidden);
    ops.push_back(out.d_lm_head);
  }
  return ops;
}

}  // namespace

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildGrpoFusedLinearSharded(
    const KernelSpec& spec, const ShardingSpec& sharding, const FusedShardingOptions& options) {
  if (spec.kind != KernelKind::kGrpoFusedLinear) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BuildGrpoFusedLinearSharded: kernel must be grpo_fused_linear, got ",
        KernelKindName(spec.kind)));
  }
  RETURN_IF_ERROR(ValidateFusedLinearSharding(spec.config, sharding, options));
  // The unsharded module fixes the global signature: names, shapes, order.
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> global, BuildKernel(spec));
  if (!sharding.Sharded()) return global;

  ASSIGN_OR_RETURN(ShardLayout layout, LayoutOf(sharding));
  const GrpoConfig& c = spec.config;
  const bool scatter = options.reduce_scatter_d_lm_head;
  const GrpoConfig local = LocalConfig(c, layout);

  std::vector<hlo::ShardMapInput> inputs;
  std::vector<std::string> param_names;
  for (const hlo::HloInstruction* param : global->entry()->parameters()) {
    hlo::ShardMapInput in;
    in.name = param->name();
    in.global_shape = hlo::Shape(param->shape().element_type(), param->shape().dimensions());
    in.spec = ArraySpec(layout, in.name, in.global_shape.rank());
    param_names.push_back(in.name);
    inputs.push_back(std::move(in));
  }
  std::vector<hlo::ShardMapOutput> outputs = ShardedOutputs(*global, layout);
  if (scatter) {
    // d_lm_head's rows are reduce-scattered over the token axes.
    for (hlo::ShardMapOutput& out : outputs) {
      if (out.name != "d_lm_head") continue;
      out.spec.dims.insert(out.spec.dims.begin(), {0, layout.tokens});
      out.global_sizes.insert(out.global_sizes.begin(), {0, c.hidden});
    }
  }

  auto body = [&](ShardMapContext& ctx, absl::Span<const XlaOp> args) {
    XlaBuilder* b = ctx.builder();
    FusedLinearParams p = ParamsByName(param_names, args);
    // Ids outside the global vocabulary pick nothing, on every shard.
    if (p.grpo.chosen_ids.valid()) {
      p.grpo.chosen_ids = SanitizeChosenIds(b, p.grpo.chosen_ids, c.vocab);
    }
    if (p.grpo.completion_mask.valid()) {
      p.grpo.completion_mask = MaskShardPadding(ctx, layout, c, p.grpo.completion_mask);
    }
    FusedLinearOptions o;
    o.aggregation = ShardAggregationHooks(ctx, layout, c);
    const hlo::AxisSet tokens = layout.tokens;
    if (!tokens.empty()) {
      // Each device's d_lm_head is a partial sum over its tokens.
      if (scatter) {
        o.reduce_d_lm_head_tile = [&ctx, tokens](XlaBuilder*, XlaOp t) {
          return ctx.PsumScatter(t, 0, tokens);
        };
        o.d_lm_head_row_shards = layout.nb * layout.ns;
      } else {
        o.reduce_d_lm_head_tile = [&ctx, tokens](XlaBuilder*, XlaOp t) {
          return ctx.Psum(t, tokens);
        };
      }
    }
    if (!layout.vocab.empty()) {
      const hlo::AxisSet vocab = layout.vocab;
      o.vocab_offset = ctx.ShardOffset(c.vocab, vocab);
      if (c.vocab % layout.nv != 0) o.vocab_valid_width = ctx.ValidShardSize(c.vocab, vocab);
      o.merge_vocab_stats = [&ctx, vocab](XlaBuilder*, const VocabStats& st,
                                          const StatsSpec& s) {
        return MergeVocabShards(ctx, st, s, vocab);
      };
      o.reduce_d_hidden = [&ctx, vocab](XlaBuilder*, XlaOp x) { return ctx.Psum(x, vocab); };
    }
    return OutputsInOrder(EmitGrpoFusedLinear(b, local, spec.mode, p, o), spec.mode);
  };
  hlo::ShardMapOptions map_options;
  map_options.global_form = sharding.global_form;
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> module,
                   hlo::ShardMap(ShardedModuleName(global->name(), sharding,
                                                   scatter ? "_scatter" : ""),
                                 sharding.mesh, inputs, outputs, body, map_options));
  if (spec.mode != KernelMode::kFwd) RETURN_IF_ERROR(SetDLmHeadLayout(*module));
  return module;
}

}  // namespace tpuoff::kernels
