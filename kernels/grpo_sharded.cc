#include "kernels/grpo_sharded.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/status_macros.h"
#include "hlo/spmd/sharding_util.h"
#include "kernels/grpo_common.h"
#include "kernels/grpo_fused_linear_sharded.h"
#include "kernels/grpo_reference.h"
#include "kernels/grpo_tiled.h"

namespace tpuoff::kernels {

using hlo::AxisSet;
using hlo::PartitionSpec;
using hlo::ShardMapContext;
using hlo::XlaBuilder;
using hlo::XlaOp;

absl::string_view ShardKindName(ShardKind kind) {
  switch (kind) {
    case ShardKind::kNone: return "none";
    case ShardKind::kBatch: return "batch";
    case ShardKind::kVocab: return "vocab";
    case ShardKind::kSeq: return "seq";
  }
  return "?";
}

absl::StatusOr<ShardKind> ParseShardKind(absl::string_view name) {
  for (ShardKind k : {ShardKind::kNone, ShardKind::kBatch, ShardKind::kVocab, ShardKind::kSeq}) {
    if (ShardKindName(k) == name) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sharding '", name, "' (expected none, batch, seq or vocab)"));
}

std::vector<ShardKind> ShardingSpec::Kinds() const {
  if (!axis_kinds.empty()) return axis_kinds;
  return std::vector<ShardKind>(mesh.num_axes(), kind);
}

bool ShardingSpec::Sharded() const {
  for (ShardKind k : Kinds()) {
    if (k != ShardKind::kNone) return true;
  }
  return false;
}

std::string ShardingSpec::KindsString() const {
  std::vector<std::string> names;
  for (ShardKind k : Kinds()) names.push_back(std::string(ShardKindName(k)));
  return absl::StrJoin(names, ",");
}

absl::StatusOr<ShardLayout> LayoutOf(const ShardingSpec& sharding) {
  RETURN_IF_ERROR(hlo::ValidateMesh(sharding.mesh));
  const std::vector<ShardKind> kinds = sharding.Kinds();
  if (static_cast<int64_t>(kinds.size()) != sharding.mesh.num_axes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharding: ", kinds.size(), " entries (", sharding.KindsString(), ") for the ",
        sharding.mesh.num_axes(), " axes of mesh ", sharding.mesh.ShapeString(),
        " (give one of none, batch, seq, vocab per mesh axis)"));
  }
  ShardLayout l;
  for (int64_t a = 0; a < sharding.mesh.num_axes(); ++a) {
    switch (kinds[a]) {
      case ShardKind::kBatch: l.batch.push_back(a); l.tokens.push_back(a); break;
      case ShardKind::kSeq: l.seq.push_back(a); l.tokens.push_back(a); break;
      case ShardKind::kVocab: l.vocab.push_back(a); break;
      case ShardKind::kNone: break;
    }
  }
  l.nb = sharding.mesh.Size(l.batch);
  l.ns = sharding.mesh.Size(l.seq);
  l.nv = sharding.mesh.Size(l.vocab);
  return l;
}

PartitionSpec ArraySpec(const ShardLayout& l, const std::string& name, int64_t rank) {
  std::vector<std::pair<int64_t, AxisSet>> dims;
  auto split = [&](int64_t dim, const AxisSet& axes) {
    if (!axes.empty()) dims.push_back({dim, axes});
  };
  if (name == "lm_head" || name == "d_lm_head") {
    split(1, l.vocab);  // [H, V]
  } else if (rank >= 1) {
    split(0, l.batch);
    if (rank >= 2) split(1, l.seq);
    if (rank == 3 && (name == "logits" || name == "dlogits")) split(2, l.vocab);
  }
  return PartitionSpec::Tiled(std::move(dims), /*allow_padding=*/true);
}

XlaOp MaskShardPadding(ShardMapContext& ctx, const ShardLayout& l, const GrpoConfig& global,
                       XlaOp mask) {
  const bool ragged_b = global.batch % l.nb != 0;
  const bool ragged_t = global.seq % l.ns != 0;
  if (!ragged_b && !ragged_t) return mask;
  XlaBuilder* b = ctx.builder();
  const std::vector<int64_t> dims = mask.shape().dimensions();
  // Global row (b) or position (t) of every local element, below its size.
  auto in_range = [&](int64_t dim, int64_t size, const AxisSet& axes) {
    XlaOp index = hlo::Add(b->Iota(hlo::Shape(hlo::PrimitiveType::kS32, dims), dim),
                           b->BroadcastInDim(ctx.ShardOffset(size, axes), dims, {}));
    return b->Compare(index, b->BroadcastInDim(b->ConstantS32(static_cast<int32_t>(size)), dims, {}),
                      hlo::ComparisonDirection::kLt);
  };
  XlaOp keep;
  if (ragged_b) keep = in_range(0, global.batch, l.batch);
  if (ragged_t) {
    XlaOp t = in_range(1, global.seq, l.seq);
    keep = keep.valid() ? b->Binary(hlo::HloOpcode::kAnd, keep, t) : t;
  }
  return b->Select(keep, mask, b->BroadcastInDim(F32(b, 0), dims, {}));
}

GrpoConfig LocalConfig(const GrpoConfig& global, const ShardLayout& l) {
  GrpoConfig local = global;
  local.batch = hlo::ShardSize(global.batch, l.nb);
  local.seq = hlo::ShardSize(global.seq, l.ns);
  local.vocab = hlo::ShardSize(global.vocab, l.nv);
  // constant's normaliser is the global max_len (default: the global T).
  if (global.loss_type == LossType::kConstant && l.ns > 1) {
    local.max_len = global.max_len.value_or(global.seq);
  }
  return local;
}

AggregationHooks ShardAggregationHooks(ShardMapContext& ctx, const ShardLayout& l,
                                       const GrpoConfig& global) {
  AggregationHooks hooks;
  if (!l.tokens.empty()) {
    const AxisSet tokens = l.tokens;
    hooks.batch_sum = [&ctx, tokens](XlaBuilder*, XlaOp x) { return ctx.Psum(x, tokens); };
  }
  if (!l.batch.empty()) {
    const AxisSet batch = l.batch;
    hooks.rows_sum = [&ctx, batch](XlaBuilder*, XlaOp x) { return ctx.Psum(x, batch); };
  }
  if (!l.seq.empty()) {
    const AxisSet seq = l.seq;
    hooks.row_sum = [&ctx, seq](XlaBuilder*, XlaOp x) { return ctx.Psum(x, seq); };
  }
  hooks.global_batch = global.batch;
  return hooks;
}

VocabStats MergeVocabShards(ShardMapContext& ctx, const VocabStats& local,
                            const StatsSpec& spec) {
  return MergeVocabShards(ctx, local, spec, ctx.mesh().AllAxes());
}

VocabStats MergeVocabShards(ShardMapContext& ctx, const VocabStats& local,
                            const StatsSpec& spec, const AxisSet& axes) {
  const bool separate_entropy = spec.need_entropy && !spec.shared_domain();
  std::vector<XlaOp> maxima;
  if (spec.need_lse) maxima.push_back(local.lse.max);
  if (separate_entropy) maxima.push_back(local.entropy.max);
  if (maxima.empty() || !maxima[0].valid()) return local;
  XlaBuilder* b = maxima[0].builder();
  const std::vector<XlaOp> global_max = ctx.Pmax(maxima, axes);

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
  const std::vector<XlaOp> sums = ctx.Psum(terms, axes);
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

// The per-shard computation of one kernel: `local` is the config of one
// device's block; the hooks make token-wide and vocab-wide quantities global.
std::vector<XlaOp> EmitShardBody(ShardMapContext& ctx, const KernelSpec& spec,
                                 const GrpoConfig& local, const ShardLayout& layout,
                                 const std::vector<std::string>& param_names,
                                 absl::Span<const XlaOp> args) {
  XlaBuilder* b = ctx.builder();
  GrpoParams p = GrpoParamsByName(param_names, args);
  // Ids outside the global vocabulary pick nothing, on every shard.
  if (p.chosen_ids.valid()) p.chosen_ids = SanitizeChosenIds(b, p.chosen_ids, spec.config.vocab);
  if (p.completion_mask.valid()) {
    p.completion_mask = MaskShardPadding(ctx, layout, spec.config, p.completion_mask);
  }
  const AggregationHooks hooks = ShardAggregationHooks(ctx, layout, spec.config);
  TiledOptions tiled;
  tiled.aggregation = hooks;
  if (!layout.vocab.empty()) {
    const int64_t vocab = spec.config.vocab;
    const AxisSet axes = layout.vocab;
    tiled.vocab_offset = ctx.ShardOffset(vocab, axes);
    if (vocab % layout.nv != 0) tiled.vocab_valid_width = ctx.ValidShardSize(vocab, axes);
    tiled.merge_vocab_stats = [&ctx, axes](XlaBuilder*, const VocabStats& st,
                                           const StatsSpec& s) {
      return MergeVocabShards(ctx, st, s, axes);
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

std::vector<hlo::ShardMapOutput> ShardedOutputs(const hlo::HloModule& global,
                                                const ShardLayout& layout) {
  std::vector<hlo::ShardMapOutput> outputs;
  const std::vector<std::string> names = global.OutputNames();
  const hlo::Shape& root = global.entry()->root()->shape();
  for (size_t i = 0; i < names.size(); ++i) {
    const hlo::Shape& shape = root.IsTuple() ? root.tuple_shapes(i) : root;
    hlo::ShardMapOutput out;
    out.name = names[i];
    out.spec = ArraySpec(layout, names[i], shape.rank());
    for (const auto& [dim, axes] : out.spec.dims) {
      out.global_sizes.push_back({dim, shape.dimensions(dim)});
    }
    outputs.push_back(std::move(out));
  }
  return outputs;
}

std::string ShardedModuleName(const std::string& global_name, const ShardingSpec& sharding,
                              absl::string_view suffix) {
  std::vector<ShardKind> kinds = sharding.Kinds();
  std::string kinds_text;
  if (sharding.mesh.num_axes() == 1) {
    kinds_text = std::string(ShardKindName(kinds[0]));
  } else {
    std::vector<std::string> parts;
    for (ShardKind k : kinds) parts.push_back(std::string(ShardKindName(k)));
    kinds_text = absl::StrCat(sharding.mesh.ShapeString(), "_", absl::StrJoin(parts, "_"));
  }
  return absl::StrCat(global_name, "_", kinds_text, suffix, "_sharded");
}

absl::Status ValidateShardedKernel(const KernelSpec& spec, const ShardingSpec& sharding) {
  if (!sharding.Sharded()) return hlo::ValidateMesh(sharding.mesh);
  // The fused LM-head kernel has its own sharded forms.
  if (spec.kind == KernelKind::kGrpoFusedLinear) {
    return ValidateFusedLinearSharding(spec.config, sharding);
  }
  ASSIGN_OR_RETURN(ShardLayout layout, LayoutOf(sharding));
  switch (spec.kind) {
    case KernelKind::kGrpoReference:
    case KernelKind::kGrpoTiled:
    case KernelKind::kEntropyReference:
    case KernelKind::kEntropyTiled:
      break;
    default:
      return absl::UnimplementedError(absl::StrCat(
          KernelKindName(spec.kind), " has no sharded form (grpo_reference, grpo_tiled, "
          "entropy_reference, entropy_tiled and grpo_fused_linear have)"));
  }
  if (!layout.vocab.empty() && !IsTiled(spec.kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocab sharding needs a tiled kernel (grpo_tiled or entropy_tiled), got ",
        KernelKindName(spec.kind)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildShardedKernel(
    const KernelSpec& spec, const ShardingSpec& sharding) {
  if (!sharding.Sharded()) return BuildKernel(spec);
  if (spec.kind == KernelKind::kGrpoFusedLinear) {
    return BuildGrpoFusedLinearSharded(spec, sharding);
  }
  RETURN_IF_ERROR(ValidateShardedKernel(spec, sharding));
  ASSIGN_OR_RETURN(ShardLayout layout, LayoutOf(sharding));
  // The unsharded module fixes the global signature: names, shapes, order.
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> global, BuildKernel(spec));
  const GrpoConfig local = LocalConfig(spec.config, layout);

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
  const std::vector<hlo::ShardMapOutput> outputs = ShardedOutputs(*global, layout);

  hlo::ShardMapOptions options;
  options.global_form = sharding.global_form;
  auto body = [&](ShardMapContext& ctx, absl::Span<const XlaOp> args) {
    return EmitShardBody(ctx, spec, local, layout, param_names, args);
  };
  return hlo::ShardMap(ShardedModuleName(global->name(), sharding, ""), sharding.mesh, inputs,
                       outputs, body, options);
}

}  // namespace tpuoff::kernels
