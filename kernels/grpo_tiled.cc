#include "kernels/grpo_tiled.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "kernels/block_loop.h"
#include "kernels/grpo_policy.h"

namespace tpuoff::kernels {

using hlo::PrimitiveType;
using hlo::XlaBuilder;
using hlo::XlaOp;

VocabStats EmitVocabRangeStats(XlaBuilder* b, XlaOp logits, XlaOp t0, int64_t rows,
                               XlaOp target, const StatsSpec& spec, const TileOptions& tiles) {
  if (!logits.valid() || logits.shape().rank() != 3) {
    b->ReportError(absl::InvalidArgumentError("EmitVocabRangeStats: logits must be rank 3"));
    return VocabStats();
  }
  const int64_t batch = logits.shape().dimensions(0);
  const int64_t vocab = logits.shape().dimensions(2);
  std::vector<XlaOp> invariants = {logits, t0};
  if (spec.need_chosen) invariants.push_back(target);
  const bool masked = tiles.valid_width.valid();
  if (masked) invariants.push_back(tiles.valid_width);
  const VocabStats empty = EmptyVocabStats(b, spec, {batch, rows});

  auto body = [&](XlaBuilder* lb, XlaOp start, int64_t width, absl::Span<const XlaOp> inv,
                  absl::Span<const XlaOp> carried) {
    XlaOp tile = lb->DynamicSlice(inv[0], {lb->ConstantS32(0), inv[1], start},
                                  {batch, rows, width});
    XlaOp tile_target = spec.need_chosen ? hlo::Sub(inv[2], start) : XlaOp();
    VocabStats tile_stats =
        masked ? EmitMaskedTileStats(lb, tile, tile_target, hlo::Sub(inv.back(), start), spec)
               : EmitTileStats(lb, tile, tile_target, spec);
    VocabStats merged =
        MergeVocabStats(lb, UnflattenVocabStats(carried, spec), tile_stats, spec);
    return FlattenVocabStats(merged, spec);
  };
  BlockLoopOptions loop;
  loop.name = "vocab_fwd";
  loop.max_unrolled_blocks = tiles.max_unrolled_blocks;
  std::vector<XlaOp> out = ForEachBlock(b, vocab, tiles.block_size, invariants,
                                        FlattenVocabStats(empty, spec), body, loop);
  return UnflattenVocabStats(out, spec);
}

XlaOp EmitVocabRangeGrad(XlaBuilder* b, XlaOp logits, XlaOp t0, int64_t rows, XlaOp target,
                         XlaOp lse, XlaOp c, double scale, XlaOp dlogits,
                         const TileOptions& tiles, const EntropyGradRows* entropy) {
  if (!logits.valid() || logits.shape().rank() != 3 || !dlogits.valid()) {
    b->ReportError(absl::InvalidArgumentError(
        "EmitVocabRangeGrad: logits and dlogits must be rank 3"));
    return XlaOp();
  }
  const int64_t batch = logits.shape().dimensions(0);
  const int64_t vocab = logits.shape().dimensions(2);
  const PrimitiveType out_type = dlogits.shape().element_type();
  const bool masked = tiles.valid_width.valid();
  // invariants: logits, t0, target, lse, c, [valid], [e, H, [entropy lse]].
  std::vector<XlaOp> invariants = {logits, t0, target, lse, c};
  if (masked) invariants.push_back(tiles.valid_width);
  const size_t first_entropy = invariants.size();
  if (entropy != nullptr) {
    invariants.push_back(entropy->coef);
    invariants.push_back(entropy->entropy);
    if (entropy->lse.valid()) invariants.push_back(entropy->lse);
  }
  auto body = [&](XlaBuilder* lb, XlaOp start, int64_t width, absl::Span<const XlaOp> inv,
                  absl::Span<const XlaOp> carried) {
    XlaOp zero = lb->ConstantS32(0);
    XlaOp tile = lb->DynamicSlice(inv[0], {zero, inv[1], start}, {batch, rows, width});
    XlaOp tile_target = hlo::Sub(inv[2], start);
    EntropyGradRows ent;
    if (entropy != nullptr) {
      ent = *entropy;
      ent.coef = inv[first_entropy];
      ent.entropy = inv[first_entropy + 1];
      if (entropy->lse.valid()) ent.lse = inv[first_entropy + 2];
    }
    const EntropyGradRows* ent_ptr = entropy != nullptr ? &ent : nullptr;
    XlaOp grad = masked ? EmitMaskedTileGrad(lb, tile, scale, inv[3], inv[4], tile_target,
                                             hlo::Sub(inv[5], start), ent_ptr)
                        : EmitTileGrad(lb, tile, scale, inv[3], inv[4], tile_target, ent_ptr);
    if (out_type != PrimitiveType::kF32) grad = lb->Convert(grad, out_type);
    return std::vector<XlaOp>{lb->DynamicUpdateSlice(carried[0], grad, {zero, inv[1], start})};
  };
  BlockLoopOptions loop;
  loop.name = "vocab_bwd";
  loop.max_unrolled_blocks = tiles.max_unrolled_blocks;
  return ForEachBlock(b, vocab, tiles.block_size, invariants, {dlogits}, body, loop)[0];
}

StatsSpec GrpoStatsSpec(const GrpoConfig& c) {
  StatsSpec spec;
  const double inv_t = 1.0 / c.temperature;
  spec.need_lse = true;
  spec.lse_scale = c.temperature_mode == TemperatureMode::kPreSoftmax ? inv_t : 1.0;
  spec.need_entropy = true;
  spec.entropy_scale = inv_t;  // the entropy always uses z/τ
  spec.need_chosen = true;
  return spec;
}

StatsSpec EntropyStatsSpec(const GrpoConfig& c) {
  StatsSpec spec;
  spec.need_lse = false;
  spec.need_entropy = true;
  spec.entropy_scale = 1.0 / c.temperature;
  spec.need_chosen = false;
  return spec;
}

namespace {

// Valid ops of `ops`, and the inverse (absent slots come back invalid).
std::vector<XlaOp> PackValid(const std::vector<XlaOp>& ops) {
  std::vector<XlaOp> out;
  for (const XlaOp& op : ops) {
    if (op.valid()) out.push_back(op);
  }
  return out;
}
std::vector<XlaOp> Unpack(const std::vector<XlaOp>& like, absl::Span<const XlaOp> packed) {
  std::vector<XlaOp> out(like.size());
  size_t j = 0;
  for (size_t i = 0; i < like.size(); ++i) {
    if (like[i].valid() && j < packed.size()) out[i] = packed[j++];
  }
  return out;
}

int64_t RowBlockSize(const GrpoConfig& c) {
  return std::min(c.time_block.value_or(c.seq), c.seq);
}

// Per-row results of one row block's statistics, f32 [B, rows].
using FinishStatsFn =
    std::function<std::vector<XlaOp>(XlaBuilder*, const VocabStats&)>;

// A vocab statistics stream over all rows, row block by row block (one
// block: straight-line): `finish` turns a block's merged statistics into
// `num_results` per-row arrays, assembled into f32 [B,T] each.
std::vector<XlaOp> EmitStatsPass(XlaBuilder* b, const GrpoConfig& c, XlaOp logits, XlaOp target,
                                 const StatsSpec& spec, int num_results,
                                 const FinishStatsFn& finish, const TiledOptions& options) {
  auto block_results = [&](XlaBuilder* rb, XlaOp lg, XlaOp t0, int64_t rows, XlaOp tgt,
                           XlaOp valid) {
    const TileOptions tiles{c.block_size, options.max_unrolled_blocks, valid};
    VocabStats st = EmitVocabRangeStats(rb, lg, t0, rows, tgt, spec, tiles);
    if (options.merge_vocab_stats) st = options.merge_vocab_stats(rb, st, spec);
    return finish(rb, st);
  };
  const int64_t row_block = RowBlockSize(c);
  if (row_block == c.seq) {
    return block_results(b, logits, b->ConstantS32(0), c.seq, target,
                         options.vocab_valid_width);
  }
  // invariants: logits, [target], [valid]; carried: the [B,T] results.
  const std::vector<XlaOp> inv_all = {logits, spec.need_chosen ? target : XlaOp(),
                                      options.vocab_valid_width};
  std::vector<XlaOp> zeros;
  for (int i = 0; i < num_results; ++i) {
    zeros.push_back(b->BroadcastInDim(F32(b, 0), {c.batch, c.seq}, {}));
  }
  auto body = [&](XlaBuilder* lb, XlaOp t0, int64_t rows, absl::Span<const XlaOp> packed,
                  absl::Span<const XlaOp> car) {
    std::vector<XlaOp> inv = Unpack(inv_all, packed);
    std::vector<XlaOp> res =
        block_results(lb, inv[0], t0, rows, RowBlock(lb, inv[1], t0, rows), inv[2]);
    std::vector<XlaOp> out;
    for (size_t i = 0; i < car.size() && i < res.size(); ++i) {
      out.push_back(lb->DynamicUpdateSlice(car[i], res[i], {lb->ConstantS32(0), t0}));
    }
    return out;
  };
  BlockLoopOptions loop;
  loop.name = "row_block";
  loop.max_unrolled_blocks = options.max_unrolled_blocks;
  return ForEachBlock(b, c.seq, row_block, PackValid(inv_all), zeros, body, loop);
}

// The forward stream: lse (of x), logp, entropy (of z/τ) and, when the
// entropy gradient needs it, lse(z/τ), each f32 [B,T].
struct ForwardRows {
  XlaOp lse, logp, entropy, entropy_lse;
};

ForwardRows EmitForwardPass(XlaBuilder* b, const GrpoConfig& c, XlaOp logits, XlaOp target,
                            const TiledOptions& options) {
  const StatsSpec spec = GrpoStatsSpec(c);
  const bool own_lse = EntropyGradNeedsOwnLse(c);
  auto finish = [&](XlaBuilder* fb, const VocabStats& st) {
    XlaOp lse = LseOf(fb, st.lse);
    XlaOp logp = hlo::Sub(st.chosen, lse);
    if (c.temperature_mode == TemperatureMode::kPostLse && c.temperature != 1.0) {
      logp = hlo::Div(logp, F32(fb, c.temperature));
    }
    std::vector<XlaOp> out = {lse, logp, EntropyOf(fb, st.entropy)};
    // The entropy domain's own statistics are in the stream already.
    if (own_lse) out.push_back(LseOf(fb, st.entropy));
    return out;
  };
  std::vector<XlaOp> r =
      EmitStatsPass(b, c, logits, target, spec, own_lse ? 4 : 3, finish, options);
  ForwardRows f{r[0], r[1], r[2]};
  if (own_lse) f.entropy_lse = r[3];
  return f;
}

// The backward-only module's one extra pass (post_lse, τ != 1, entropy
// bonus): lse(z/τ), which its `lse` input (of z) does not give.
XlaOp EmitEntropyLsePass(XlaBuilder* b, const GrpoConfig& c, XlaOp logits,
                         const TiledOptions& options) {
  StatsSpec spec;
  spec.need_lse = true;
  spec.lse_scale = 1.0 / c.temperature;
  spec.need_entropy = false;
  spec.need_chosen = false;
  auto finish = [](XlaBuilder* fb, const VocabStats& st) {
    return std::vector<XlaOp>{LseOf(fb, st.lse)};
  };
  return EmitStatsPass(b, c, logits, XlaOp(), spec, 1, finish, options)[0];
}

// The vocab gradient pass, row block by row block, into dlogits.
XlaOp EmitBackwardPass(XlaBuilder* b, const GrpoConfig& c, XlaOp logits, XlaOp target,
                       XlaOp lse, const GradCoefficients& coef, XlaOp entropy,
                       XlaOp entropy_lse, XlaOp dlogits, const TiledOptions& options) {
  const StatsSpec spec = GrpoStatsSpec(c);
  const bool with_entropy = coef.entropy.valid();
  auto block_grad = [&](XlaBuilder* rb, XlaOp lg, XlaOp t0, int64_t rows,
                        const std::vector<XlaOp>& per_row, XlaOp into, XlaOp valid) {
    // per_row: target, lse, c, e, H, entropy lse ([B, rows]; some invalid).
    const TileOptions tiles{c.block_size, options.max_unrolled_blocks, valid};
    EntropyGradRows ent{per_row[3], per_row[4], per_row[5], 1.0 / c.temperature};
    return EmitVocabRangeGrad(rb, lg, t0, rows, per_row[0], per_row[1], per_row[2],
                              spec.lse_scale, into, tiles, with_entropy ? &ent : nullptr);
  };
  const std::vector<XlaOp> per_row = {target,  lse,
                                      coef.logp, coef.entropy,
                                      with_entropy ? entropy : XlaOp(), entropy_lse};
  const int64_t row_block = RowBlockSize(c);
  if (row_block == c.seq) {
    return block_grad(b, logits, b->ConstantS32(0), c.seq, per_row, dlogits,
                      options.vocab_valid_width);
  }
  std::vector<XlaOp> inv_all = {logits, options.vocab_valid_width};
  inv_all.insert(inv_all.end(), per_row.begin(), per_row.end());
  auto body = [&](XlaBuilder* lb, XlaOp t0, int64_t rows, absl::Span<const XlaOp> packed,
                  absl::Span<const XlaOp> car) {
    std::vector<XlaOp> inv = Unpack(inv_all, packed);
    std::vector<XlaOp> rows_of;
    for (size_t i = 2; i < inv.size(); ++i) rows_of.push_back(RowBlock(lb, inv[i], t0, rows));
    return std::vector<XlaOp>{block_grad(lb, inv[0], t0, rows, rows_of, car[0], inv[1])};
  };
  BlockLoopOptions loop;
  loop.name = "row_block_bwd";
  loop.max_unrolled_blocks = options.max_unrolled_blocks;
  return ForEachBlock(b, c.seq, row_block, PackValid(inv_all), {dlogits}, body, loop)[0];
}

}  // namespace

GrpoOutputs EmitGrpoTiled(XlaBuilder* b, const GrpoConfig& c, KernelMode mode,
                          const GrpoParams& p, const TiledOptions& options) {
  XlaOp target = p.chosen_ids;
  if (options.vocab_offset.valid()) target = hlo::Sub(target, options.vocab_offset);
  XlaOp weights = EmitAggregationWeights(b, c, p, options.aggregation);

  // 1. Per-token statistics: from the vocab stream, or the backward-only
  //    module's inputs.
  ForwardRows fw;
  if (mode != KernelMode::kBwd) {
    fw = EmitForwardPass(b, c, p.logits, target, options);
  } else {
    fw = {p.lse, p.logp, p.entropy, XlaOp()};
    if (EntropyGradNeedsOwnLse(c)) fw.entropy_lse = EmitEntropyLsePass(b, c, p.logits, options);
  }
  // 2. The policy terms on whole rows.
  PolicyTerms terms = EmitPolicyTerms(
      b, c, p, fw.logp, fw.entropy, weights, options.aggregation,
      {.loss = mode != KernelMode::kBwd, .grad = mode != KernelMode::kFwd});
  GrpoOutputs out;
  if (mode != KernelMode::kBwd) {
    out.loss = EmitLoss(b, weights, terms.per_token_loss, options.aggregation);
    out.per_token_loss = terms.per_token_loss;
    out.logp = fw.logp;
    out.entropy = fw.entropy;
    out.lse = fw.lse;
  }
  // 3. The vocab gradient pass.
  if (mode != KernelMode::kFwd) {
    XlaOp dlogits = b->BroadcastInDim(b->ScalarConstant(c.logits_type, 0),
                                      {c.batch, c.seq, c.vocab}, {});
    out.dlogits = EmitBackwardPass(b, c, p.logits, target, fw.lse,
                                   EmitGradCoefficients(b, c, terms), fw.entropy,
                                   fw.entropy_lse, dlogits, options);
  }
  return out;
}

XlaOp EmitEntropyTiled(XlaBuilder* b, const GrpoConfig& c, XlaOp logits,
                       const TiledOptions& options) {
  const StatsSpec spec = EntropyStatsSpec(c);
  auto rows_entropy = [&](XlaBuilder* rb, XlaOp lg, XlaOp t0, int64_t rows, XlaOp valid) {
    const TileOptions tiles{c.block_size, options.max_unrolled_blocks, valid};
    VocabStats st = EmitVocabRangeStats(rb, lg, t0, rows, XlaOp(), spec, tiles);
    if (options.merge_vocab_stats) st = options.merge_vocab_stats(rb, st, spec);
    return EntropyOf(rb, st.entropy);
  };
  const int64_t row_block = RowBlockSize(c);
  if (row_block == c.seq) {
    return rows_entropy(b, logits, b->ConstantS32(0), c.seq, options.vocab_valid_width);
  }
  std::vector<XlaOp> invariants = {logits};
  if (options.vocab_valid_width.valid()) invariants.push_back(options.vocab_valid_width);
  auto body = [&](XlaBuilder* lb, XlaOp t0, int64_t rows, absl::Span<const XlaOp> inv,
                  absl::Span<const XlaOp> car) {
    XlaOp h = rows_entropy(lb, inv[0], t0, rows, inv.size() > 1 ? inv[1] : XlaOp());
    return std::vector<XlaOp>{lb->DynamicUpdateSlice(car[0], h, {lb->ConstantS32(0), t0})};
  };
  BlockLoopOptions loop;
  loop.name = "row_block";
  loop.max_unrolled_blocks = options.max_unrolled_blocks;
  return ForEachBlock(b, c.seq, row_block, invariants,
                      {b->BroadcastInDim(F32(b, 0), {c.batch, c.seq}, {})}, body, loop)[0];
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildGrpoTiled(const GrpoConfig& config,
                                                                KernelMode mode) {
  RETURN_IF_ERROR(ValidateGrpoConfig(config));
  XlaBuilder b(absl::StrCat("grpo_tiled_", KernelModeName(mode)));
  GrpoParams params = EmitGrpoParameters(&b, config, mode);
  GrpoOutputs out = EmitGrpoTiled(&b, config, mode, params);
  return FinishGrpoModule(&b, mode, out);
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildEntropyTiled(const GrpoConfig& config) {
  RETURN_IF_ERROR(ValidateGrpoConfig(config));
  XlaBuilder b("entropy_tiled");
  XlaOp logits =
      b.Parameter(0, hlo::Shape(config.logits_type, {config.batch, config.seq, config.vocab}),
                  "logits");
  return FinishModule(&b, {EmitEntropyTiled(&b, config, logits)}, {"entropy"});
}

}  // namespace tpuoff::kernels
