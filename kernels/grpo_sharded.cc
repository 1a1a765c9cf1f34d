#include "kernels/grpo_sharded.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/spmd/sharding_util.h"
#include "hlo/ir/status_macros.h"
#include "kernels/grpo_common.h"
#include "kernels/grpo_fused_linear_sharded.h"
#include "kernels/grpo_reference.h"
#include "kernels/grpo_tiled.h"

namespace tpuoff::kernels {

using hlo::PartitionSpec;
using hlo::ShardMapContext;
using hlo::XlaBuilder;
using hlo::XlaOp;

absl::string_view ShardKindName(ShardKind kind) {
  switch (kind) {
    case ShardKind::kNone: return "none";
    case ShardKind::kBatch: return "batch";
    case ShardKind::kVocab: return "vocab";
  }
  return "?";
}

absl::StatusOr<ShardKind> ParseShardKind(absl::string_view name) {
  for (ShardKind k : {ShardKind::kNone, ShardKind::kBatch, ShardKind::kVocab}) {
    if (ShardKindName(k) == name) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sharding '", name, "' (expected none, batch or vocab)"));
}

VocabStats MergeVocabShards(ShardMapContext& ctx, const VocabStats& local,
                            const StatsSpec& spec) {
  const bool separate_entropy = spec.need_entropy && !spec.shared_domain();
  std::vector<XlaOp> maxima;
  if (spec.need_lse) maxima.push_back(local.lse.max);
  if (separate_entropy) maxima.push_back(local.entropy.max);
  if (maxima.empty() || !maxima[0].valid()) return local;
  XlaBuilder* b = maxima[0].builder();
  const std::vector<XlaOp> global_max = ctx.Pmax(maxima);

  VocabStats merged;
  size_t k = 0;
  if (spec.need_lse) merged.lse = RescaleStats(b, local.lse, global_max[k++]);
  if (separate_entropy) merged.entropy = RescaleStats(b, local.entropy, global_max[k++]);
  if (spec.need_chosen) merged.chosen = local.chosen;

  // One all-reduce sum over every additive term, in a fixed order.
  std::vector<XlaOp*> slots;
  for (SoftmaxStats* s : {&merged.lse, &merged.entropy}) {
    if (s->sum.valid()) slots.push_back(&s->sum);
    if (s->usum.valid()) slots.push_back(&s->usum);
  }
  if (merged.chosen.valid()) slots.push_back(&merged.chosen);
  std::vector<XlaOp> terms;
  for (XlaOp* slot : slots) terms.push_back(*slot);
  const std::vector<XlaOp> sums = ctx.Psum(terms);
  for (size_t i = 0; i < slots.size(); ++i) *slots[i] = sums[i];
  if (spec.shared_domain()) merged.entropy = merged.lse;
  return merged;
}

namespace {

bool IsTiled(KernelKind kind) {
  return kind == KernelKind::kGrpoTiled || kind == KernelKind::kEntropyTiled;
}

std::vector<XlaOp> OutputsInOrder(const GrpoOutputs& out, KernelMode mode) {
  std::vector<XlaOp> ops;
  if (mode != KernelMode::kBwd) {
    ops = {out.loss, out.per_token_loss, out.logp, out.entropy, out.lse};
  }
  if (mode != KernelMode::kFwd) ops.push_back(out.dlogits);
  return ops;
}

// The per-shard computation of one kernel: `local` is the config with the
// per-device batch or vocab; the hooks make batch-wide or vocab-wide
// quantities global.
std::vector<XlaOp> EmitShardBody(ShardMapContext& ctx, const KernelSpec& spec,
                                 const GrpoConfig& local, ShardKind kind,
                                 const std::vector<std::string>& param_names,
                                 absl::Span<const XlaOp> args) {
  XlaBuilder* b = ctx.builder();
  GrpoParams p = GrpoParamsByName(param_names, args);
  // Ids outside the global vocabulary pick nothing, on every shard.
  if (p.chosen_ids.valid()) p.chosen_ids = SanitizeChosenIds(b, p.chosen_ids, spec.config.vocab);
  AggregationHooks hooks;
  TiledOptions tiled;
  if (kind == ShardKind::kBatch) {
    hooks.batch_sum = [&ctx](XlaBuilder*, XlaOp x) { return ctx.Psum(x); };
    hooks.global_batch = spec.config.batch;
    tiled.aggregation = hooks;
  } else {
    const int64_t vocab = spec.config.vocab;
    tiled.vocab_offset = ctx.ShardOffset(vocab);
    if (vocab % ctx.num_devices() != 0) tiled.vocab_valid_width = ctx.ValidShardSize(vocab);
    tiled.merge_vocab_stats = [&ctx](XlaBuilder*, const VocabStats& st, const StatsSpec& s) {
      return MergeVocabShards(ctx, st, s);
    };
  }
  switch (spec.kind) {
    case KernelKind::kGrpoTiled:
      return OutputsInOrder(EmitGrpoTiled(b, local, spec.mode, p, tiled), spec.mode);
    case KernelKind::kEntropyTiled:
      return {EmitEntropyTiled(b, local, p.logits, tiled)};
    case KernelKind::kGrpoReference:
      return OutputsInOrder(EmitGrpoReference(b, local, spec.mode, p, hooks), spec.mode);
    case KernelKind::kEntropyReference:
      return {EmitEntropyReference(b, local, p.logits)};
    default:
      break;
  }
  b->ReportError(absl::UnimplementedError(
      absl::StrCat(KernelKindName(spec.kind), " has no sharded form")));
  return {};
}

}  // namespace

absl::Status ValidateShardedKernel(const KernelSpec& spec, const ShardingSpec& sharding) {
  if (sharding.kind == ShardKind::kNone) return absl::OkStatus();
  // The fused LM-head kernel has its own sharded forms.
  if (spec.kind == KernelKind::kGrpoFusedLinear) {
    return ValidateFusedLinearSharding(spec.config, sharding);
  }
  RETURN_IF_ERROR(hlo::ValidateMesh(sharding.mesh));
  const int64_t n = sharding.mesh.num_devices;
  switch (spec.kind) {
    case KernelKind::kGrpoReference:
    case KernelKind::kGrpoTiled:
    case KernelKind::kEntropyReference:
    case KernelKind::kEntropyTiled:
      break;
    default:
      return absl::UnimplementedError(absl::StrCat(
          KernelKindName(spec.kind), " has no sharded form (batch/vocab sharding covers "
          "grpo_reference, grpo_tiled, entropy_reference and entropy_tiled)"));
  }
  if (sharding.kind == ShardKind::kBatch && spec.config.batch % n != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch sharding: B=", spec.config.batch, " is not divisible by the mesh size ", n,
        " (use a mesh dividing B, or vocab sharding)"));
  }
  if (sharding.kind == ShardKind::kVocab && !IsTiled(spec.kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocab sharding needs a tiled kernel (grpo_tiled or entropy_tiled), got ",
        KernelKindName(spec.kind)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildShardedKernel(
    const KernelSpec& spec, const ShardingSpec& sharding) {
  if (sharding.kind == ShardKind::kNone) return BuildKernel(spec);
  if (spec.kind == KernelKind::kGrpoFusedLinear) {
    return BuildGrpoFusedLinearSharded(spec, sharding);
  }
  RETURN_IF_ERROR(ValidateShardedKernel(spec, sharding));
  const int64_t n = sharding.mesh.num_devices;
  const GrpoConfig& c = spec.config;
  // The unsharded module fixes the global signature: names, shapes, order.
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> global, BuildKernel(spec));

  GrpoConfig local = c;
  if (sharding.kind == ShardKind::kBatch) {
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
    if (sharding.kind == ShardKind::kBatch) {
      if (in.global_shape.rank() > 0) in.spec = PartitionSpec::Split(0);
    } else if (in.name == "logits") {
      in.spec = PartitionSpec::Split(2, /*allow_padding=*/true);
    }
    param_names.push_back(in.name);
    inputs.push_back(std::move(in));
  }
  const std::vector<std::string> output_names = global->OutputNames();
  std::vector<hlo::ShardMapOutput> outputs;
  for (const std::string& name : output_names) {
    hlo::ShardMapOutput out;
    out.name = name;
    if (sharding.kind == ShardKind::kBatch) {
      if (name != "loss") out.spec = PartitionSpec::Split(0);
    } else if (name == "dlogits") {
      out.spec = PartitionSpec::Split(2);
      out.global_split_size = c.vocab;
    }
    outputs.push_back(std::move(out));
  }

  hlo::ShardMapOptions options;
  options.global_form = sharding.global_form;
  const std::string name =
      absl::StrCat(global->name(), "_", ShardKindName(sharding.kind), "_sharded");
  auto body = [&](ShardMapContext& ctx, absl::Span<const XlaOp> args) {
    return EmitShardBody(ctx, spec, local, sharding.kind, param_names, args);
  };
  return hlo::ShardMap(name, sharding.mesh, inputs, outputs, body, options);
}

}  // namespace tpuoff::kernels
