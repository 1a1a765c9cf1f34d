#include "kernels/grpo_fused_linear.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "kernels/block_loop.h"
#include "kernels/grpo_policy.h"
#include "kernels/grpo_tiled.h"

namespace tpuoff::kernels {

using hlo::DotDimensionNumbers;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::XlaBuilder;
using hlo::XlaOp;

absl::Status ValidateFusedLinearConfig(const GrpoConfig& config) {
  RETURN_IF_ERROR(ValidateGrpoConfig(config));
  if (config.hidden <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GrpoConfig: grpo_fused_linear needs the hidden size H (> 0), got ", config.hidden));
  }
  // Token rows are indexed by s32 dynamic-slice starts.
  if (config.batch * config.seq > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GrpoConfig: grpo_fused_linear needs batch*seq < 2^31, got ",
        config.batch * config.seq));
  }
  return absl::OkStatus();
}

std::vector<std::string> FusedLinearParameterNames(const GrpoConfig& config,
                                                   KernelMode mode) {
  std::vector<std::string> names = GrpoParameterNames(config, mode);
  // GrpoParameterNames starts with "logits": the fused kernel has two
  // parameters in its place.
  names.erase(names.begin());
  names.insert(names.begin(), {"hidden", "lm_head"});
  return names;
}

std::vector<std::string> FusedLinearOutputNames(KernelMode mode) {
  if (mode == KernelMode::kBwd) return {"d_hidden", "d_lm_head"};
  std::vector<std::string> names = {"loss", "per_token_loss", "logp", "entropy", "lse"};
  if (mode == KernelMode::kFwdBwd) {
    names.push_back("d_hidden");
    names.push_back("d_lm_head");
  }
  return names;
}

FusedLinearParams EmitFusedLinearParameters(XlaBuilder* b, const GrpoConfig& c,
                                            KernelMode mode) {
  FusedLinearParams p;
  p.hidden = b->Parameter(0, Shape(c.logits_type, {c.batch, c.seq, c.hidden}), "hidden");
  p.lm_head = b->Parameter(1, Shape(c.logits_type, {c.hidden, c.vocab}), "lm_head");
  EmitPerTokenParameters(b, c, mode, 2, &p.grpo);
  return p;
}

namespace {

// lhs · rhs contracting lhs dim `lc` with rhs dim `rc`, f32 result (for bf16
// operands: f32 accumulation, XLA's preferred element type). With an f32
// operand the precision is HIGHEST: at DEFAULT XLA:TPU rounds f32 operands
// to bf16, and for the loop-invariant lm_head it hoists that rounding out of
// the vocab loop as a bf16 copy of all of lm_head (an extra [H,V] array).
XlaOp DotF32(XlaBuilder* b, XlaOp lhs, XlaOp rhs, int64_t lc, int64_t rc) {
  DotDimensionNumbers d;
  d.lhs_contracting_dimensions = {lc};
  d.rhs_contracting_dimensions = {rc};
  const bool f32 = lhs.shape().element_type() == PrimitiveType::kF32 ||
                   rhs.shape().element_type() == PrimitiveType::kF32;
  return b->Dot(lhs, rhs, d, PrimitiveType::kF32,
                f32 ? std::vector<std::string>{"HIGHEST", "HIGHEST"}
                    : std::vector<std::string>{});
}

// Rows [n0, n0 + rows) of a rank-1 or rank-2 array (the array itself when
// that is all of it).
XlaOp RowChunk(XlaBuilder* b, XlaOp x, XlaOp n0, int64_t rows) {
  if (!x.valid() || x.shape().dimensions(0) == rows) return x;
  std::vector<XlaOp> starts = {n0};
  std::vector<int64_t> sizes = {rows};
  if (x.shape().rank() == 2) {
    starts.push_back(b->ConstantS32(0));
    sizes.push_back(x.shape().dimensions(1));
  }
  return b->DynamicSlice(x, starts, sizes);
}

// Columns [v0, v0 + width) of lm_head [H,V] (itself when that is all of it).
XlaOp ColumnTile(XlaBuilder* b, XlaOp lm_head, XlaOp v0, int64_t width) {
  if (lm_head.shape().dimensions(1) == width) return lm_head;
  return b->DynamicSlice(lm_head, {b->ConstantS32(0), v0},
                         {lm_head.shape().dimensions(0), width});
}

// Columns of an lm_head tile [H,W] at or beyond `valid` (s32, relative to
// the tile) set to zero: the padding of an uneven vocab shard may hold
// anything, and a NaN there would reach d_hidden through 0·NaN.
XlaOp ZeroPaddingColumns(XlaBuilder* b, XlaOp w, XlaOp valid) {
  const std::vector<int64_t>& dims = w.shape().dimensions();
  XlaOp real = b->Compare(b->Iota(Shape(PrimitiveType::kS32, dims), 1),
                          b->BroadcastInDim(valid, dims, {}),
                          hlo::ComparisonDirection::kLt);
  return b->Select(real, w, b->ScalarConstant(w.shape().element_type(), 0));
}

// Writes the [rows] values `x` at row n0 of the [N] array `into`.
XlaOp WriteRows(XlaBuilder* b, XlaOp into, XlaOp x, XlaOp n0) {
  if (into.shape().dimensions(0) == x.shape().dimensions(0)) return x;
  return b->DynamicUpdateSlice(into, x, {n0});
}

// Per-row results of a token chunk's merged statistics, f32 [rows] each.
using FinishStatsFn = std::function<std::vector<XlaOp>(XlaBuilder*, const VocabStats&)>;

// A statistics pass: per token chunk, the vocab statistics of `spec`
// streamed over lm_head tiles, then `finish` gives `num_results` per-row
// arrays, assembled into f32 [N] each. `valid`: s32 count of real lm_head
// columns (invalid: all).
std::vector<XlaOp> EmitStatsRows(XlaBuilder* b, const GrpoConfig& cfg, XlaOp hidden2,
                                 XlaOp lm_head, XlaOp target, XlaOp valid, int64_t chunk,
                                 const StatsSpec& spec, int num_results,
                                 const FinishStatsFn& finish,
                                 const FusedLinearOptions& options) {
  const int64_t n = hidden2.shape().dimensions(0);
  const int64_t vocab = lm_head.shape().dimensions(1);
  const bool masked = valid.valid();

  auto chunk_body = [&](XlaBuilder* cb, XlaOp n0, int64_t rows, absl::Span<const XlaOp> inv,
                        absl::Span<const XlaOp> car) {
    // inv: hidden2, lm_head, target[, valid].
    XlaOp h = RowChunk(cb, inv[0], n0, rows);
    XlaOp tgt = RowChunk(cb, inv[2], n0, rows);
    std::vector<XlaOp> vocab_inv = {h, inv[1], tgt};
    if (masked) vocab_inv.push_back(inv[3]);
    auto tile_body = [&](XlaBuilder* vb, XlaOp v0, int64_t width,
                         absl::Span<const XlaOp> vinv, absl::Span<const XlaOp> vcar) {
      XlaOp w = ColumnTile(vb, vinv[1], v0, width);
      XlaOp tile_valid = masked ? hlo::Sub(vinv[3], v0) : XlaOp();
      if (masked) w = ZeroPaddingColumns(vb, w, tile_valid);
      XlaOp z = DotF32(vb, vinv[0], w, 1, 0);
      XlaOp tile_target = spec.need_chosen ? hlo::Sub(vinv[2], v0) : XlaOp();
      VocabStats tile = masked ? EmitMaskedTileStats(vb, z, tile_target, tile_valid, spec)
                               : EmitTileStats(vb, z, tile_target, spec);
      return FlattenVocabStats(
          MergeVocabStats(vb, UnflattenVocabStats(vcar, spec), tile, spec), spec);
    };
    BlockLoopOptions vloop;
    vloop.name = "fused_vocab_fwd";
    vloop.max_unrolled_blocks = options.max_unrolled_blocks;
    VocabStats st = UnflattenVocabStats(
        ForEachBlock(cb, vocab, cfg.block_size, vocab_inv,
                     FlattenVocabStats(EmptyVocabStats(cb, spec, {rows}), spec), tile_body,
                     vloop),
        spec);
    if (options.merge_vocab_stats) st = options.merge_vocab_stats(cb, st, spec);
    std::vector<XlaOp> res = finish(cb, st);
    std::vector<XlaOp> out;
    for (size_t i = 0; i < car.size() && i < res.size(); ++i) {
      out.push_back(WriteRows(cb, car[i], res[i], n0));
    }
    return out;
  };
  BlockLoopOptions loop;
  loop.name = "fused_chunk_fwd";
  loop.max_unrolled_blocks = options.max_unrolled_blocks;
  // Distinct buffers: a loop state must not repeat one.
  std::vector<XlaOp> zeros;
  for (int i = 0; i < num_results; ++i) zeros.push_back(b->BroadcastInDim(F32(b, 0), {n}, {}));
  std::vector<XlaOp> invariants = {hidden2, lm_head, target};
  if (masked) invariants.push_back(valid);
  return ForEachBlock(b, n, chunk, invariants, zeros, chunk_body, loop);
}

struct ForwardRows {
  // f32 [N]: lse of x, x_y, entropy of z/τ; lse(z/τ) when the entropy
  // gradient needs the entropy domain's own lse.
  XlaOp lse, chosen, entropy, entropy_lse;
};

ForwardRows EmitForwardRows(XlaBuilder* b, const GrpoConfig& cfg, XlaOp hidden2,
                            XlaOp lm_head, XlaOp target, XlaOp valid, int64_t chunk,
                            const FusedLinearOptions& options) {
  const bool own_lse = EntropyGradNeedsOwnLse(cfg);
  auto finish = [&](XlaBuilder* fb, const VocabStats& st) {
    std::vector<XlaOp> out = {LseOf(fb, st.lse), st.chosen, EntropyOf(fb, st.entropy)};
    if (own_lse) out.push_back(LseOf(fb, st.entropy));
    return out;
  };
  std::vector<XlaOp> r = EmitStatsRows(b, cfg, hidden2, lm_head, target, valid, chunk,
                                       GrpoStatsSpec(cfg), own_lse ? 4 : 3, finish, options);
  ForwardRows f{r[0], r[1], r[2]};
  if (own_lse) f.entropy_lse = r[3];
  return f;
}

// The backward-only module's extra pass (post_lse, τ != 1, entropy bonus):
// lse(z/τ) per row, f32 [N].
XlaOp EmitEntropyLseRows(XlaBuilder* b, const GrpoConfig& cfg, XlaOp hidden2, XlaOp lm_head,
                         XlaOp target, XlaOp valid, int64_t chunk,
                         const FusedLinearOptions& options) {
  StatsSpec spec;
  spec.need_lse = true;
  spec.lse_scale = 1.0 / cfg.temperature;
  spec.need_entropy = false;
  spec.need_chosen = false;
  auto finish = [](XlaBuilder* fb, const VocabStats& st) {
    return std::vector<XlaOp>{LseOf(fb, st.lse)};
  };
  return EmitStatsRows(b, cfg, hidden2, lm_head, target, valid, chunk, spec, 1, finish,
                       options)[0];
}

struct BackwardResult {
  XlaOp d_hidden;   // f32 [N,H], before reduce_d_hidden
  XlaOp d_lm_head;  // [H / row_shards, V] in the lm_head type
};

// Backward pass: per lm_head tile, per token chunk, the recomputed logits
// tile's dlogits and their two products.
// `entropy`: the entropy bonus's rows (f32 [N] members), or null.
BackwardResult EmitBackward(XlaBuilder* b, const GrpoConfig& cfg, XlaOp hidden2,
                            XlaOp lm_head, XlaOp target, XlaOp valid, XlaOp lse, XlaOp coef,
                            const EntropyGradRows* entropy, int64_t chunk,
                            const FusedLinearOptions& options) {
  const bool masked = valid.valid();
  const int64_t n = hidden2.shape().dimensions(0);
  const int64_t h_dim = hidden2.shape().dimensions(1);
  const int64_t vocab = lm_head.shape().dimensions(1);
  const PrimitiveType w_type = lm_head.shape().element_type();
  const double scale = GrpoStatsSpec(cfg).lse_scale;
  const int64_t shards = std::max<int64_t>(options.d_lm_head_row_shards, 1);
  // With several token chunks the tile's d_lm_head is accumulated across
  // them as [W,H] (vocab-major, the layout of d_lm_head's {0,1} output) and
  // transposed once per tile. Accumulated as [H,W], XLA:TPU gives that
  // loop state, and through the dynamic-update-slice the whole d_lm_head
  // loop state, the row-major layout, and copies the finished [H,V] array
  // to the vocab-major output at the end (one more [H,V] buffer: 116.7 MB
  // per device at B=8, T=4096, 2x4 batch,vocab, --token-chunk=4096). The
  // transpose is a bitcast for XLA (the emulator copies one [H,W] tile).
  const bool chunked = chunk < n;

  auto chunk_body = [&](XlaBuilder* cb, XlaOp n0, int64_t rows, absl::Span<const XlaOp> inv,
                        absl::Span<const XlaOp> car) {
    // inv: hidden2, w (tile), target − v0, lse, coef[, valid − v0][, e, H[, lse_e]].
    XlaOp h = RowChunk(cb, inv[0], n0, rows);
    XlaOp z = DotF32(cb, h, inv[1], 1, 0);
    XlaOp lse_rows = RowChunk(cb, inv[3], n0, rows);
    XlaOp coef_rows = RowChunk(cb, inv[4], n0, rows);
    XlaOp tgt_rows = RowChunk(cb, inv[2], n0, rows);
    EntropyGradRows ent;
    const size_t e0 = masked ? 6 : 5;
    if (entropy != nullptr) {
      ent = *entropy;
      ent.coef = RowChunk(cb, inv[e0], n0, rows);
      ent.entropy = RowChunk(cb, inv[e0 + 1], n0, rows);
      if (entropy->lse.valid()) ent.lse = RowChunk(cb, inv[e0 + 2], n0, rows);
    }
    const EntropyGradRows* ent_ptr = entropy != nullptr ? &ent : nullptr;
    XlaOp g = masked ? EmitMaskedTileGrad(cb, z, scale, lse_rows, coef_rows, tgt_rows, inv[5],
                                          ent_ptr)
                     : EmitTileGrad(cb, z, scale, lse_rows, coef_rows, tgt_rows, ent_ptr);
    // dlogits_type bf16: the tile rounded once, both products bf16 x bf16.
    if (cfg.dlogits_type != PrimitiveType::kF32) g = cb->Convert(g, cfg.dlogits_type);
    // d_lm_head tile += hᵀ·g ([H,W]; over token chunks its transpose
    // gᵀ·h, [W,H], see below); d_hidden rows += g·wᵀ ([rows,H]).
    XlaOp d_w = hlo::Add(car[1], chunked ? DotF32(cb, g, h, 0, 0) : DotF32(cb, h, g, 0, 0));
    XlaOp d_h = DotF32(cb, g, inv[1], 1, 1);
    XlaOp acc = car[0];
    if (rows == n) {
      acc = hlo::Add(acc, d_h);
    } else {
      XlaOp zero = cb->ConstantS32(0);
      XlaOp cur = cb->DynamicSlice(acc, {n0, zero}, {rows, h_dim});
      acc = cb->DynamicUpdateSlice(acc, hlo::Add(cur, d_h), {n0, zero});
    }
    return std::vector<XlaOp>{acc, d_w};
  };
  auto tile_body = [&](XlaBuilder* vb, XlaOp v0, int64_t width, absl::Span<const XlaOp> inv,
                       absl::Span<const XlaOp> car) {
    // inv: hidden2, lm_head, target, lse, coef[, valid][, e, H[, lse_e]].
    XlaOp w = ColumnTile(vb, inv[1], v0, width);
    std::vector<XlaOp> chunk_inv = {inv[0], w, hlo::Sub(inv[2], v0), inv[3], inv[4]};
    if (masked) {
      chunk_inv.push_back(hlo::Sub(inv[5], v0));
      chunk_inv[1] = ZeroPaddingColumns(vb, w, chunk_inv.back());
    }
    for (size_t i = masked ? 6 : 5; i < inv.size(); ++i) chunk_inv.push_back(inv[i]);
    BlockLoopOptions cloop;
    cloop.name = "fused_chunk_bwd";
    cloop.max_unrolled_blocks = options.max_unrolled_blocks;
    const std::vector<int64_t> d_w_dims =
        chunked ? std::vector<int64_t>{width, h_dim} : std::vector<int64_t>{h_dim, width};
    XlaOp d_w0 = vb->BroadcastInDim(F32(vb, 0), d_w_dims, {});
    std::vector<XlaOp> out =
        ForEachBlock(vb, n, chunk, chunk_inv, {car[0], d_w0}, chunk_body, cloop);
    XlaOp d_w = chunked ? vb->Transpose(out[1], {1, 0}) : out[1];
    if (options.reduce_d_lm_head_tile) d_w = options.reduce_d_lm_head_tile(vb, d_w);
    if (w_type != PrimitiveType::kF32) d_w = vb->Convert(d_w, w_type);
    XlaOp d_lm_head = width == vocab ? d_w
                                     : vb->DynamicUpdateSlice(car[1], d_w,
                                                              {vb->ConstantS32(0), v0});
    return std::vector<XlaOp>{out[0], d_lm_head};
  };
  BlockLoopOptions loop;
  loop.name = "fused_vocab_bwd";
  loop.max_unrolled_blocks = options.max_unrolled_blocks;
  // XLA:TPU otherwise computes the tail tile's logits before the loop
  // (they need only hidden and lm_head) and keeps them across it: MSA
  // evicted that f32 [N, V mod block] tile to HBM under batch sharding.
  loop.tail_after_loop = true;
  XlaOp d_hidden0 = b->BroadcastInDim(F32(b, 0), {n, h_dim}, {});
  XlaOp d_lm_head0 =
      b->BroadcastInDim(b->ScalarConstant(w_type, 0), {h_dim / shards, vocab}, {});
  // d_lm_head's loop state enters the loop through an add-dependency (on a
  // fresh token: it orders nothing, and aliases its operand). XLA's
  // memory-space assignment leaves every value with an add-dependency
  // position in default memory, so the tiles are written to the HBM output
  // as designed. Without it, when d_lm_head fits the VMEM budget (58 MB per
  // device at B=1, T=4096, H=1536 over 8 vocab shards) XLA:TPU keeps the
  // whole array in VMEM for the loop and copies it to HBM at the end; the
  // f32 logits tile and d_hidden accumulator then no longer fit VMEM and
  // go to HBM (59 MB of temporaries the kernel does not need).
  // XLA:CPU's buffer assignment does worse with it (the fused fwd_bwd's
  // temp at B=1, T=4096, H=1536, V=151936, bf16 grows from 1.11 to
  // 1.93 GB), so it is emitted for XLA:TPU only (GrpoConfig::emit_for).
  if (cfg.emit_for == EmitTarget::kTpu) {
    d_lm_head0 = b->AddOp(hlo::HloOpcode::kAddDependency,
                          {d_lm_head0, b->AddOp(hlo::HloOpcode::kAfterAll, {})});
  }
  std::vector<XlaOp> invariants = {hidden2, lm_head, target, lse, coef};
  if (masked) invariants.push_back(valid);
  if (entropy != nullptr) {
    invariants.push_back(entropy->coef);
    invariants.push_back(entropy->entropy);
    if (entropy->lse.valid()) invariants.push_back(entropy->lse);
  }
  std::vector<XlaOp> out = ForEachBlock(b, vocab, cfg.block_size, invariants,
                                        {d_hidden0, d_lm_head0}, tile_body, loop);
  return {out[0], out[1]};
}

}  // namespace

FusedLinearOutputs EmitGrpoFusedLinear(XlaBuilder* b, const GrpoConfig& cfg, KernelMode mode,
                                       const FusedLinearParams& p,
                                       const FusedLinearOptions& options) {
  FusedLinearOutputs out;
  if (!p.hidden.valid() || p.hidden.shape().rank() != 3 || !p.lm_head.valid() ||
      p.lm_head.shape().rank() != 2) {
    b->ReportError(absl::InvalidArgumentError(
        "EmitGrpoFusedLinear: hidden must be rank 3 and lm_head rank 2"));
    return out;
  }
  const int64_t shards = std::max<int64_t>(options.d_lm_head_row_shards, 1);
  if (cfg.hidden % shards != 0) {
    b->ReportError(absl::InvalidArgumentError(absl::StrCat(
        "EmitGrpoFusedLinear: d_lm_head_row_shards (", shards, ") must divide H (",
        cfg.hidden, ")")));
    return out;
  }
  const std::vector<int64_t> bt = {cfg.batch, cfg.seq};
  const int64_t n = cfg.batch * cfg.seq;
  const int64_t chunk = std::min(cfg.token_chunk.value_or(n), n);
  const GrpoParams& g = p.grpo;

  // Tokens as rows: [B,T,...] -> [N,...] (a reshape, no copy).
  XlaOp hidden2 = b->Reshape(p.hidden, {n, cfg.hidden});
  XlaOp target = g.chosen_ids;
  if (options.vocab_offset.valid()) target = hlo::Sub(target, options.vocab_offset);
  target = b->Reshape(target, {n});
  XlaOp weights = EmitAggregationWeights(b, cfg, g, options.aggregation);
  const XlaOp valid = options.vocab_valid_width;

  // 1. Per-token statistics from the forward stream (or the inputs).
  XlaOp lse = g.lse, logp = g.logp, entropy = g.entropy, entropy_lse;
  if (mode != KernelMode::kBwd) {
    ForwardRows rows = EmitForwardRows(b, cfg, hidden2, p.lm_head, target, valid, chunk, options);
    lse = b->Reshape(rows.lse, bt);
    logp = hlo::Sub(b->Reshape(rows.chosen, bt), lse);
    if (cfg.temperature_mode == TemperatureMode::kPostLse && cfg.temperature != 1.0) {
      logp = hlo::Div(logp, F32(b, cfg.temperature));
    }
    entropy = b->Reshape(rows.entropy, bt);
    entropy_lse = rows.entropy_lse;
  } else if (EntropyGradNeedsOwnLse(cfg)) {
    entropy_lse = EmitEntropyLseRows(b, cfg, hidden2, p.lm_head, target, valid, chunk, options);
  }
  // 2. The policy terms on whole rows.
  PolicyTerms terms = EmitPolicyTerms(
      b, cfg, g, logp, entropy, weights, options.aggregation,
      {.loss = mode != KernelMode::kBwd, .grad = mode != KernelMode::kFwd});
  if (mode != KernelMode::kBwd) {
    out.loss = EmitLoss(b, weights, terms.per_token_loss, options.aggregation);
    out.per_token_loss = terms.per_token_loss;
    out.logp = logp;
    out.entropy = entropy;
    out.lse = lse;
  }
  // 3. The vocab-outer gradient pass.
  if (mode != KernelMode::kFwd) {
    // The backward recomputes every logits tile, by design. Its operands
    // pass an optimization barrier when a statistics pass ran before it:
    // otherwise XLA's CSE merges that pass's straight-line tail tile (the
    // same dot of the same operands) with the backward's and keeps the f32
    // [N, V mod block] tile alive across the policy terms, and XLA:TPU
    // evicts it to HBM (6.3 MB at B=1, T=4096, V=151936), memory the
    // kernel's design does not have. The barrier only aliases (no copy).
    XlaOp bwd_hidden = hidden2, bwd_lm_head = p.lm_head;
    if (mode != KernelMode::kBwd || entropy_lse.valid()) {
      XlaOp t = b->AddOp(hlo::HloOpcode::kOptimizationBarrier, {b->Tuple({hidden2, p.lm_head})});
      bwd_hidden = b->GetTupleElement(t, 0);
      bwd_lm_head = b->GetTupleElement(t, 1);
    }
    GradCoefficients coef = EmitGradCoefficients(b, cfg, terms);
    EntropyGradRows ent;
    if (coef.entropy.valid()) {
      ent = {b->Reshape(coef.entropy, {n}), b->Reshape(entropy, {n}), entropy_lse,
             1.0 / cfg.temperature};
    }
    BackwardResult back = EmitBackward(
        b, cfg, bwd_hidden, bwd_lm_head, target, valid, b->Reshape(lse, {n}),
        b->Reshape(coef.logp, {n}), coef.entropy.valid() ? &ent : nullptr, chunk, options);
    XlaOp d_hidden = back.d_hidden;
    if (options.reduce_d_hidden) d_hidden = options.reduce_d_hidden(b, d_hidden);
    if (cfg.logits_type != PrimitiveType::kF32) d_hidden = b->Convert(d_hidden, cfg.logits_type);
    out.d_hidden = b->Reshape(d_hidden, {cfg.batch, cfg.seq, cfg.hidden});
    out.d_lm_head = back.d_lm_head;
  }
  return out;
}

absl::Status SetDLmHeadLayout(hlo::HloModule& module) {
  return SetEntryOutputLayout(module, "d_lm_head", {0, 1});
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> FinishFusedLinearModule(
    XlaBuilder* b, KernelMode mode, const FusedLinearOutputs& out) {
  std::vector<XlaOp> ops;
  if (mode != KernelMode::kBwd) ops = {out.loss, out.per_token_loss, out.logp, out.entropy, out.lse};
  if (mode != KernelMode::kFwd) {
    ops.push_back(out.d_hidden);
    ops.push_back(out.d_lm_head);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> module,
                   FinishModule(b, ops, FusedLinearOutputNames(mode)));
  if (mode != KernelMode::kFwd) RETURN_IF_ERROR(SetDLmHeadLayout(*module));
  return module;
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildGrpoFusedLinear(const GrpoConfig& config,
                                                                      KernelMode mode) {
  RETURN_IF_ERROR(ValidateFusedLinearConfig(config));
  XlaBuilder b(absl::StrCat("grpo_fused_linear_", KernelModeName(mode)));
  FusedLinearParams params = EmitFusedLinearParameters(&b, config, mode);
  FusedLinearOutputs out = EmitGrpoFusedLinear(&b, config, mode, params);
  return FinishFusedLinearModule(&b, mode, out);
}

}  // namespace tpuoff::kernels
