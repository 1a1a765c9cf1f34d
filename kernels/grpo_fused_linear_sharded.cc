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
  if (sharding.kind == ShardKind::kNone) return absl::OkStatus();
  RETURN_IF_ERROR(hlo::ValidateMesh(sharding.mesh));
  const int64_t n = sharding.mesh.num_devices;
  if (sharding.kind == ShardKind::kBatch) {
    if (config.batch % n != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grpo_fused_linear batch sharding: B=", config.batch,
          " is not divisible by the mesh size ", n, " (use vocab sharding)"));
    }
    if (options.reduce_scatter_d_lm_head && config.hidden % n != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grpo_fused_linear batch sharding: reduce-scattering d_lm_head needs H=",
          config.hidden, " divisible by the mesh size ", n));
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
  if (sharding.kind == ShardKind::kNone) return global;

  const int64_t n = sharding.mesh.num_devices;
  const GrpoConfig& c = spec.config;
  const bool batch = sharding.kind == ShardKind::kBatch;
  const bool scatter = batch && options.reduce_scatter_d_lm_head;
  GrpoConfig local = c;
  if (batch) {
    local.batch = c.batch / n;
  } else {
    local.vocab = hlo::ShardSize(c.vocab, n);
  }

  std::vector<hlo::ShardMapInput> inputs;
  std::vector<std::string> param_names;
  for (const hlo::HloInstruction* param : global->entry()->parameters()) {
    hlo::ShardMapInput in;
    in.name = param->name();
    in.global_shape = hlo::Shape(param->shape().element_type(), param->shape().dimensions());
    if (batch) {
      // Everything indexed by the batch but the shared lm_head.
      if (in.global_shape.rank() > 0 && in.name != "lm_head") in.spec = PartitionSpec::Split(0);
    } else if (in.name == "lm_head") {
      in.spec = PartitionSpec::Split(1, /*allow_padding=*/true);
    }
    param_names.push_back(in.name);
    inputs.push_back(std::move(in));
  }
  std::vector<hlo::ShardMapOutput> outputs;
  for (const std::string& name : global->OutputNames()) {
    hlo::ShardMapOutput out;
    out.name = name;
    if (batch) {
      if (name == "d_lm_head") {
        if (scatter) out.spec = PartitionSpec::Split(0);
      } else if (name != "loss") {
        out.spec = PartitionSpec::Split(0);
      }
    } else if (name == "d_lm_head") {
      out.spec = PartitionSpec::Split(1);
      out.global_split_size = c.vocab;
    }
    outputs.push_back(std::move(out));
  }

  auto body = [&](ShardMapContext& ctx, absl::Span<const XlaOp> args) {
    XlaBuilder* b = ctx.builder();
    FusedLinearParams p = ParamsByName(param_names, args);
    // Ids outside the global vocabulary pick nothing, on every shard.
    if (p.grpo.chosen_ids.valid()) {
      p.grpo.chosen_ids = SanitizeChosenIds(b, p.grpo.chosen_ids, c.vocab);
    }
    FusedLinearOptions o;
    if (batch) {
      o.aggregation.batch_sum = [&ctx](XlaBuilder*, XlaOp x) { return ctx.Psum(x); };
      o.aggregation.global_batch = c.batch;
      if (scatter) {
        o.reduce_d_lm_head_tile = [&ctx](XlaBuilder*, XlaOp t) { return ctx.PsumScatter(t, 0); };
        o.d_lm_head_row_shards = n;
      } else {
        o.reduce_d_lm_head_tile = [&ctx](XlaBuilder*, XlaOp t) { return ctx.Psum(t); };
      }
    } else {
      o.vocab_offset = ctx.ShardOffset(c.vocab);
      if (c.vocab % n != 0) o.vocab_valid_width = ctx.ValidShardSize(c.vocab);
      o.merge_vocab_stats = [&ctx](XlaBuilder*, const VocabStats& st, const StatsSpec& s) {
        return MergeVocabShards(ctx, st, s);
      };
      o.reduce_d_hidden = [&ctx](XlaBuilder*, XlaOp x) { return ctx.Psum(x); };
    }
    return OutputsInOrder(EmitGrpoFusedLinear(b, local, spec.mode, p, o), spec.mode);
  };
  hlo::ShardMapOptions map_options;
  map_options.global_form = sharding.global_form;
  const std::string name = absl::StrCat(global->name(), "_", ShardKindName(sharding.kind),
                                        scatter ? "_scatter" : "", "_sharded");
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> module,
                   hlo::ShardMap(name, sharding.mesh, inputs, outputs, body, map_options));
  if (spec.mode != KernelMode::kFwd) RETURN_IF_ERROR(SetDLmHeadLayout(*module));
  return module;
}

}  // namespace tpuoff::kernels
