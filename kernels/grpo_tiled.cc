#include "kernels/grpo_tiled.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "kernels/block_loop.h"

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
                         const TileOptions& tiles) {
  if (!logits.valid() || logits.shape().rank() != 3 || !dlogits.valid()) {
    b->ReportError(absl::InvalidArgumentError(
        "EmitVocabRangeGrad: logits and dlogits must be rank 3"));
    return XlaOp();
  }
  const int64_t batch = logits.shape().dimensions(0);
  const int64_t vocab = logits.shape().dimensions(2);
  const PrimitiveType out_type = dlogits.shape().element_type();
  const bool masked = tiles.valid_width.valid();
  std::vector<XlaOp> invariants = {logits, t0, target, lse, c};
  if (masked) invariants.push_back(tiles.valid_width);
  auto body = [&](XlaBuilder* lb, XlaOp start, int64_t width, absl::Span<const XlaOp> inv,
                  absl::Span<const XlaOp> carried) {
    XlaOp zero = lb->ConstantS32(0);
    XlaOp tile = lb->DynamicSlice(inv[0], {zero, inv[1], start}, {batch, rows, width});
    XlaOp tile_target = hlo::Sub(inv[2], start);
    XlaOp grad = masked ? EmitMaskedTileGrad(lb, tile, scale, inv[3], inv[4], tile_target,
                                             hlo::Sub(inv[5], start))
                        : EmitTileGrad(lb, tile, scale, inv[3], inv[4], tile_target);
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

// Per-token inputs and outputs of one row block [t0, t0 + rows): per-token
// arrays are [B, rows]; logits and dlogits stay whole.
struct RowInputs {
  XlaOp logits, t0;
  int64_t rows = 0;
  XlaOp target, adv, old_logp, ref_logp, weights, lse, logp, dlogits;
  XlaOp valid_width;  // TiledOptions::vocab_valid_width as seen here
};
struct RowResults {
  XlaOp per_token_loss, logp, entropy, lse, dlogits;
};

RowResults EmitRowBlock(XlaBuilder* b, const GrpoConfig& c, KernelMode mode,
                        const RowInputs& in, const TiledOptions& options) {
  const StatsSpec spec = GrpoStatsSpec(c);
  const TileOptions tiles{c.block_size, options.max_unrolled_blocks, in.valid_width};
  RowResults r;
  XlaOp lse = in.lse, logp = in.logp, s;
  if (mode != KernelMode::kBwd) {
    VocabStats st = EmitVocabRangeStats(b, in.logits, in.t0, in.rows, in.target, spec, tiles);
    if (options.merge_vocab_stats) st = options.merge_vocab_stats(b, st, spec);
    lse = LseOf(b, st.lse);
    logp = hlo::Sub(st.chosen, lse);
    if (c.temperature_mode == TemperatureMode::kPostLse && c.temperature != 1.0) {
      logp = hlo::Div(logp, F32(b, c.temperature));
    }
    PolicyTerms terms = EmitPolicyTerms(b, c, logp, in.old_logp, in.ref_logp, in.adv,
                                        {.loss = true, .grad = mode == KernelMode::kFwdBwd});
    r.per_token_loss = terms.per_token_loss;
    r.logp = logp;
    r.lse = lse;
    r.entropy = EntropyOf(b, st.entropy);
    s = terms.dloss_dlogp;
  } else {
    s = EmitPolicyTerms(b, c, logp, in.old_logp, in.ref_logp, in.adv,
                        {.loss = false, .grad = true})
            .dloss_dlogp;
  }
  if (mode != KernelMode::kFwd) {
    XlaOp coef = EmitGradCoefficient(b, c, in.weights, s);
    r.dlogits = EmitVocabRangeGrad(b, in.logits, in.t0, in.rows, in.target, lse, coef,
                                   spec.lse_scale, in.dlogits, tiles);
  }
  return r;
}

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

}  // namespace

GrpoOutputs EmitGrpoTiled(XlaBuilder* b, const GrpoConfig& c, KernelMode mode,
                          const GrpoParams& p, const TiledOptions& options) {
  const std::vector<int64_t> bt = {c.batch, c.seq};
  XlaOp target = p.chosen_ids;
  if (options.vocab_offset.valid()) target = hlo::Sub(target, options.vocab_offset);
  XlaOp adv = b->BroadcastInDim(p.advantages, bt, {0});
  XlaOp weights = EmitAggregationWeights(b, c, p, options.aggregation);
  XlaOp dlogits;
  if (mode != KernelMode::kFwd) {
    dlogits = b->BroadcastInDim(b->ScalarConstant(c.logits_type, 0),
                                {c.batch, c.seq, c.vocab}, {});
  }

  RowResults res;
  const int64_t row_block = RowBlockSize(c);
  if (row_block == c.seq) {
    RowInputs in{p.logits, b->ConstantS32(0), c.seq, target, adv, p.old_logp, p.ref_logp,
                 weights, p.lse, p.logp, dlogits, options.vocab_valid_width};
    res = EmitRowBlock(b, c, mode, in, options);
  } else {
    // Outer loop over row blocks; per-token results are written back with
    // dynamic-update-slice, dlogits is carried.
    const std::vector<XlaOp> inv_all = {p.logits, target, adv, p.old_logp, p.ref_logp,
                                        mode == KernelMode::kFwd ? XlaOp() : weights,
                                        p.lse, p.logp, options.vocab_valid_width};
    std::vector<XlaOp> car_all(5);
    if (mode != KernelMode::kBwd) {
      for (int i = 0; i < 4; ++i) car_all[i] = b->BroadcastInDim(F32(b, 0), bt, {});
    }
    car_all[4] = dlogits;
    auto body = [&](XlaBuilder* lb, XlaOp t0, int64_t rows, absl::Span<const XlaOp> inv_packed,
                    absl::Span<const XlaOp> car_packed) {
      std::vector<XlaOp> inv = Unpack(inv_all, inv_packed);
      std::vector<XlaOp> car = Unpack(car_all, car_packed);
      RowInputs in{inv[0], t0, rows,
                   RowBlock(lb, inv[1], t0, rows), RowBlock(lb, inv[2], t0, rows),
                   RowBlock(lb, inv[3], t0, rows), RowBlock(lb, inv[4], t0, rows),
                   RowBlock(lb, inv[5], t0, rows), RowBlock(lb, inv[6], t0, rows),
                   RowBlock(lb, inv[7], t0, rows), car[4], inv[8]};
      RowResults r = EmitRowBlock(lb, c, mode, in, options);
      const XlaOp zero = lb->ConstantS32(0);
      const XlaOp block_out[4] = {r.per_token_loss, r.logp, r.entropy, r.lse};
      for (int i = 0; i < 4; ++i) {
        if (car[i].valid()) car[i] = lb->DynamicUpdateSlice(car[i], block_out[i], {zero, t0});
      }
      if (car[4].valid()) car[4] = r.dlogits;
      return PackValid(car);
    };
    BlockLoopOptions loop;
    loop.name = "row_block";
    loop.max_unrolled_blocks = options.max_unrolled_blocks;
    std::vector<XlaOp> final_car = Unpack(
        car_all, ForEachBlock(b, c.seq, row_block, PackValid(inv_all), PackValid(car_all),
                              body, loop));
    res = {final_car[0], final_car[1], final_car[2], final_car[3], final_car[4]};
  }

  GrpoOutputs out;
  if (mode != KernelMode::kBwd) {
    out.loss = EmitLoss(b, weights, res.per_token_loss, options.aggregation);
    out.per_token_loss = res.per_token_loss;
    out.logp = res.logp;
    out.entropy = res.entropy;
    out.lse = res.lse;
  }
  out.dlogits = res.dlogits;
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
