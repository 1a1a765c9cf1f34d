#include "kernels/vocab_stats.h"

#include <cmath>
#include <limits>
#include <vector>

namespace tpuoff::kernels {

using hlo::ComparisonDirection;
using hlo::HloOpcode;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::XlaBuilder;
using hlo::XlaOp;

XlaOp F32(XlaBuilder* b, double v) { return b->ConstantF32(static_cast<float>(v)); }

XlaOp BroadcastMinor(XlaBuilder* b, XlaOp x, int64_t width) {
  std::vector<int64_t> dims = x.shape().dimensions();
  std::vector<int64_t> mapping;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) mapping.push_back(i);
  dims.push_back(width);
  return b->BroadcastInDim(x, dims, mapping);
}

namespace {

XlaOp ToF32(XlaBuilder* b, XlaOp x) {
  return x.shape().element_type() == PrimitiveType::kF32 ? x
                                                         : b->Convert(x, PrimitiveType::kF32);
}

XlaOp Scaled(XlaBuilder* b, XlaOp x, double scale) {
  return scale == 1.0 ? x : hlo::Mul(x, F32(b, scale));
}

int64_t MinorDim(XlaOp x) { return x.shape().rank() - 1; }

// Statistics of one domain over the minor dimension of an f32 tile. With a
// `mask` (pred, the tile's shape) only its true columns count; the others
// may hold anything (NaN, inf): they are selected away after every use, so
// an all-false row gives the empty state (−inf, 0, 0).
SoftmaxStats DomainStats(XlaBuilder* b, XlaOp x, bool with_usum, XlaOp mask = XlaOp()) {
  const int64_t minor = MinorDim(x);
  const int64_t width = x.shape().dimensions(minor);
  SoftmaxStats s;
  XlaOp for_max = mask.valid() ? b->Select(mask, x, F32(b, -INFINITY)) : x;
  s.max = b->Reduce(for_max, F32(b, -INFINITY), HloOpcode::kMaximum, {minor});
  // A domain whose every column is -inf (a tile or vocab shard of masked-out
  // logits) has max -inf: shifted by 0 instead, its exps are exact zeros
  // (the empty state merges take) where x - max would be -inf - -inf = NaN.
  // Any other max shifts by itself, the same values as without the guard.
  XlaOp shift =
      b->Select(b->Compare(s.max, F32(b, -INFINITY), ComparisonDirection::kEq), F32(b, 0), s.max);
  XlaOp d = hlo::Sub(x, BroadcastMinor(b, shift, width));
  XlaOp e = hlo::Exp(d);
  XlaOp ed = with_usum ? hlo::Mul(e, d) : XlaOp();
  if (mask.valid()) {
    e = b->Select(mask, e, F32(b, 0));
    if (with_usum) ed = b->Select(mask, ed, F32(b, 0));
  }
  s.sum = b->Reduce(e, F32(b, 0), HloOpcode::kAdd, {minor});
  if (with_usum) s.usum = b->Reduce(ed, F32(b, 0), HloOpcode::kAdd, {minor});
  return s;
}

// pred [tile shape]: column index < `valid` (s32 scalar).
XlaOp LeadingColumns(XlaBuilder* b, XlaOp tile, XlaOp valid) {
  const int64_t minor = MinorDim(tile);
  XlaOp iota = b->Iota(Shape(PrimitiveType::kS32, tile.shape().dimensions()), minor);
  return b->Compare(iota, b->BroadcastInDim(valid, tile.shape().dimensions(), {}),
                    ComparisonDirection::kLt);
}

SoftmaxStats EmptyDomain(XlaBuilder* b, absl::Span<const int64_t> row_dims, bool with_usum) {
  SoftmaxStats s;
  s.max = b->BroadcastInDim(F32(b, -INFINITY), row_dims, {});
  s.sum = b->BroadcastInDim(F32(b, 0), row_dims, {});
  if (with_usum) s.usum = b->BroadcastInDim(F32(b, 0), row_dims, {});
  return s;
}

}  // namespace

VocabStats EmptyVocabStats(XlaBuilder* b, const StatsSpec& spec,
                           absl::Span<const int64_t> row_dims) {
  VocabStats v;
  if (spec.shared_domain()) {
    v.lse = EmptyDomain(b, row_dims, true);
    v.entropy = v.lse;
  } else {
    if (spec.need_lse) v.lse = EmptyDomain(b, row_dims, false);
    if (spec.need_entropy) v.entropy = EmptyDomain(b, row_dims, true);
  }
  if (spec.need_chosen) v.chosen = b->BroadcastInDim(F32(b, 0), row_dims, {});
  return v;
}

namespace {

VocabStats TileStats(XlaBuilder* b, XlaOp z_tile, XlaOp target, XlaOp mask,
                     const StatsSpec& spec) {
  XlaOp z = ToF32(b, z_tile);
  VocabStats v;
  XlaOp x;
  if (spec.need_lse) {
    x = Scaled(b, z, spec.lse_scale);
    v.lse = DomainStats(b, x, spec.shared_domain(), mask);
  }
  if (spec.shared_domain()) {
    v.entropy = v.lse;
  } else if (spec.need_entropy) {
    v.entropy = DomainStats(b, Scaled(b, z, spec.entropy_scale), true, mask);
  }
  if (spec.need_chosen) {
    if (!x.valid()) x = Scaled(b, z, spec.lse_scale);
    const int64_t minor = MinorDim(z);
    XlaOp iota = b->Iota(Shape(PrimitiveType::kS32, z.shape().dimensions()), minor);
    XlaOp hit = b->Compare(iota, BroadcastMinor(b, target, z.shape().dimensions(minor)),
                           ComparisonDirection::kEq);
    XlaOp picked = b->Select(hit, x, F32(b, 0));
    v.chosen = b->Reduce(picked, F32(b, 0), HloOpcode::kAdd, {minor});
  }
  return v;
}

}  // namespace

VocabStats EmitTileStats(XlaBuilder* b, XlaOp z_tile, XlaOp target, const StatsSpec& spec) {
  return TileStats(b, z_tile, target, XlaOp(), spec);
}

VocabStats EmitMaskedTileStats(XlaBuilder* b, XlaOp z_tile, XlaOp target, XlaOp valid,
                               const StatsSpec& spec) {
  if (!z_tile.valid()) return VocabStats();
  return TileStats(b, z_tile, target, LeadingColumns(b, z_tile, valid), spec);
}

SoftmaxStats RescaleStats(XlaBuilder* b, const SoftmaxStats& s, XlaOp new_max) {
  // d = max − new_max <= 0. Guarded so that empty states (max = −inf) give
  // exact zeros instead of (−inf)·0 = NaN, also when new_max is −inf too.
  XlaOp same = b->Compare(s.max, new_max, ComparisonDirection::kEq);
  XlaOp lowest = F32(b, std::numeric_limits<float>::lowest());
  XlaOp d = b->Select(same, F32(b, 0), hlo::Max(hlo::Sub(s.max, new_max), lowest));
  XlaOp a = hlo::Exp(d);
  SoftmaxStats out;
  out.max = new_max;
  out.sum = hlo::Mul(a, s.sum);
  if (s.usum.valid()) out.usum = hlo::Mul(a, hlo::Add(s.usum, hlo::Mul(d, s.sum)));
  return out;
}

SoftmaxStats MergeSoftmaxStats(XlaBuilder* b, const SoftmaxStats& x, const SoftmaxStats& y) {
  XlaOp m = hlo::Max(x.max, y.max);
  SoftmaxStats rx = RescaleStats(b, x, m);
  SoftmaxStats ry = RescaleStats(b, y, m);
  SoftmaxStats out;
  out.max = m;
  out.sum = hlo::Add(rx.sum, ry.sum);
  if (rx.usum.valid() && ry.usum.valid()) out.usum = hlo::Add(rx.usum, ry.usum);
  return out;
}

VocabStats MergeVocabStats(XlaBuilder* b, const VocabStats& x, const VocabStats& y,
                           const StatsSpec& spec) {
  VocabStats v;
  if (spec.need_lse) v.lse = MergeSoftmaxStats(b, x.lse, y.lse);
  if (spec.shared_domain()) {
    v.entropy = v.lse;
  } else if (spec.need_entropy) {
    v.entropy = MergeSoftmaxStats(b, x.entropy, y.entropy);
  }
  if (spec.need_chosen) v.chosen = hlo::Add(x.chosen, y.chosen);
  return v;
}

std::vector<XlaOp> FlattenVocabStats(const VocabStats& v, const StatsSpec& spec) {
  std::vector<XlaOp> flat;
  if (spec.need_lse) {
    flat.push_back(v.lse.max);
    flat.push_back(v.lse.sum);
    if (spec.shared_domain()) flat.push_back(v.lse.usum);
  }
  if (spec.need_entropy && !spec.shared_domain()) {
    flat.push_back(v.entropy.max);
    flat.push_back(v.entropy.sum);
    flat.push_back(v.entropy.usum);
  }
  if (spec.need_chosen) flat.push_back(v.chosen);
  return flat;
}

VocabStats UnflattenVocabStats(absl::Span<const XlaOp> flat, const StatsSpec& spec) {
  VocabStats v;
  size_t i = 0;
  auto next = [&]() { return i < flat.size() ? flat[i++] : XlaOp(); };
  if (spec.need_lse) {
    v.lse.max = next();
    v.lse.sum = next();
    if (spec.shared_domain()) v.lse.usum = next();
  }
  if (spec.shared_domain()) {
    v.entropy = v.lse;
  } else if (spec.need_entropy) {
    v.entropy.max = next();
    v.entropy.sum = next();
    v.entropy.usum = next();
  }
  if (spec.need_chosen) v.chosen = next();
  return v;
}

XlaOp LseOf(XlaBuilder* b, const SoftmaxStats& s) { return hlo::Add(s.max, hlo::Log(s.sum)); }

XlaOp EntropyOf(XlaBuilder* b, const SoftmaxStats& s) {
  return hlo::Sub(hlo::Log(s.sum), hlo::Div(s.usum, s.sum));
}

XlaOp EmitTileGrad(XlaBuilder* b, XlaOp z_tile, double scale, XlaOp lse, XlaOp c,
                   XlaOp target, const EntropyGradRows* entropy) {
  XlaOp z = ToF32(b, z_tile);
  XlaOp x = Scaled(b, z, scale);
  const int64_t minor = MinorDim(x);
  const int64_t width = x.shape().dimensions(minor);
  XlaOp log_p = hlo::Sub(x, BroadcastMinor(b, lse, width));
  XlaOp p = hlo::Exp(log_p);
  XlaOp iota = b->Iota(Shape(PrimitiveType::kS32, x.shape().dimensions()), minor);
  XlaOp hit = b->Compare(iota, BroadcastMinor(b, target, width), ComparisonDirection::kEq);
  XlaOp onehot_minus_p = b->Select(hit, hlo::Sub(F32(b, 1), p), hlo::Neg(p));
  XlaOp grad = hlo::Mul(BroadcastMinor(b, c, width), onehot_minus_p);
  if (entropy == nullptr) return grad;
  // dH/dz_v ∝ −q_v·(log q_v + H): q = p unless the entropy has its own domain.
  XlaOp log_q = log_p, q = p;
  if (entropy->lse.valid()) {
    log_q = hlo::Sub(Scaled(b, z, entropy->scale), BroadcastMinor(b, entropy->lse, width));
    q = hlo::Exp(log_q);
  }
  XlaOp bonus = hlo::Mul(hlo::Mul(BroadcastMinor(b, entropy->coef, width), q),
                         hlo::Add(log_q, BroadcastMinor(b, entropy->entropy, width)));
  return hlo::Add(grad, bonus);
}

XlaOp EmitMaskedTileGrad(XlaBuilder* b, XlaOp z_tile, double scale, XlaOp lse, XlaOp c,
                         XlaOp target, XlaOp valid, const EntropyGradRows* entropy) {
  if (!z_tile.valid()) return XlaOp();
  XlaOp grad = EmitTileGrad(b, z_tile, scale, lse, c, target, entropy);
  return b->Select(LeadingColumns(b, z_tile, valid), grad, F32(b, 0));
}

}  // namespace tpuoff::kernels
