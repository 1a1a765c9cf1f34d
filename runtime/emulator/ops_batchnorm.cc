// batch-norm-training, batch-norm-inference and batch-norm-grad with the
// formulas of XLA's BatchNormExpander (what XLA:CPU runs): the biased
// variance E[x^2] - E[x]^2, rsqrt(var + epsilon), and for the gradient
// scale*rsqrt(var+eps)/N * (N*dy - sum(dy) - (x-mean)*sum(dy*(x-mean))/(var+eps)).
// Sums are accumulated in double; f16/bf16 are computed in f32 and rounded
// on store.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/ir/float16.h"
#include "runtime/emulator/ops_extra.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::PrimitiveType;

// Element access of one floating-point array as double.
struct FloatArray {
  PrimitiveType type;
  const void* in = nullptr;
  void* out = nullptr;
  double Get(int64_t i) const {
    switch (type) {
      case PrimitiveType::kF32: return static_cast<const float*>(in)[i];
      case PrimitiveType::kF64: return static_cast<const double*>(in)[i];
      case PrimitiveType::kBF16: return hlo::Bf16ToF32(static_cast<const uint16_t*>(in)[i]);
      default: return hlo::F16ToF32(static_cast<const uint16_t*>(in)[i]);
    }
  }
  void Set(int64_t i, double v) const {
    switch (type) {
      case PrimitiveType::kF32: static_cast<float*>(out)[i] = static_cast<float>(v); break;
      case PrimitiveType::kF64: static_cast<double*>(out)[i] = v; break;
      case PrimitiveType::kBF16:
        static_cast<uint16_t*>(out)[i] = hlo::F32ToBf16(static_cast<float>(v));
        break;
      default: static_cast<uint16_t*>(out)[i] = hlo::F32ToF16(static_cast<float>(v)); break;
    }
  }
};

FloatArray In(PrimitiveType t, const void* p) { return {t, p, nullptr}; }
FloatArray Out(PrimitiveType t, void* p) { return {t, nullptr, p}; }

// The operand as [outer, features, inner] around the feature dimension.
struct Layout {
  int64_t outer = 1, features = 0, inner = 1;
  int64_t Index(int64_t o, int64_t f, int64_t i) const { return (o * features + f) * inner + i; }
  double count() const { return static_cast<double>(outer * inner); }
};

Layout FeatureLayout(const hlo::Shape& s, int64_t feature_index) {
  Layout l;
  l.features = s.dimensions(feature_index);
  for (int64_t d = 0; d < feature_index; ++d) l.outer *= s.dimensions(d);
  for (int64_t d = feature_index + 1; d < s.rank(); ++d) l.inner *= s.dimensions(d);
  return l;
}

}  // namespace

absl::Status BatchNormKernel(const HloInstruction& instr, const std::vector<const void*>& in,
                             const std::vector<void*>& out) {
  const hlo::Shape& xs = instr.operand(0)->shape();
  const PrimitiveType t = xs.element_type();
  if (t != PrimitiveType::kF32 && t != PrimitiveType::kF64 && t != PrimitiveType::kBF16 &&
      t != PrimitiveType::kF16) {
    return absl::UnimplementedError(absl::StrCat(hlo::HloOpcodeString(instr.opcode()), " (%",
                                                 instr.name(), ") of ", hlo::PrimitiveTypeName(t),
                                                 " is not supported by the emulator"));
  }
  const Layout l = FeatureLayout(xs, instr.attrs().feature_index);
  const double eps = static_cast<double>(static_cast<float>(instr.attrs().epsilon));
  const FloatArray x = In(t, in[0]);
  auto for_feature = [&](int64_t f, auto&& fn) {
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t i = 0; i < l.inner; ++i) fn(l.Index(o, f, i));
    }
  };
  switch (instr.opcode()) {
    case hlo::HloOpcode::kBatchNormTraining: {
      const FloatArray scale = In(t, in[1]), offset = In(t, in[2]);
      const FloatArray y = Out(t, out[0]), mean_out = Out(t, out[1]), var_out = Out(t, out[2]);
      for (int64_t f = 0; f < l.features; ++f) {
        double sum = 0, sumsq = 0;
        for_feature(f, [&](int64_t k) {
          const double v = x.Get(k);
          sum += v;
          sumsq += v * v;
        });
        const double mean = sum / l.count();
        const double var = sumsq / l.count() - mean * mean;
        const double r = 1.0 / std::sqrt(var + eps);
        const double g = scale.Get(f), b = offset.Get(f);
        for_feature(f, [&](int64_t k) { y.Set(k, (x.Get(k) - mean) * r * g + b); });
        mean_out.Set(f, mean);
        var_out.Set(f, var);
      }
      return absl::OkStatus();
    }
    case hlo::HloOpcode::kBatchNormInference: {
      const FloatArray scale = In(t, in[1]), offset = In(t, in[2]), mean = In(t, in[3]),
                       var = In(t, in[4]);
      const FloatArray y = Out(t, out[0]);
      for (int64_t f = 0; f < l.features; ++f) {
        const double true_scale = scale.Get(f) / std::sqrt(var.Get(f) + eps);
        const double shift = offset.Get(f) - mean.Get(f) * true_scale;
        for_feature(f, [&](int64_t k) { y.Set(k, x.Get(k) * true_scale + shift); });
      }
      return absl::OkStatus();
    }
    case hlo::HloOpcode::kBatchNormGrad: {
      const FloatArray scale = In(t, in[1]), mean = In(t, in[2]), var = In(t, in[3]),
                       dy = In(t, in[4]);
      const FloatArray dx = Out(t, out[0]), dscale = Out(t, out[1]), doffset = Out(t, out[2]);
      for (int64_t f = 0; f < l.features; ++f) {
        const double m = mean.Get(f), v = var.Get(f) + eps;
        double sum_dy = 0, sum_dy_xm = 0;
        for_feature(f, [&](int64_t k) {
          sum_dy += dy.Get(k);
          sum_dy_xm += dy.Get(k) * (x.Get(k) - m);
        });
        const double r = 1.0 / std::sqrt(v);
        const double c = scale.Get(f) * r / l.count();
        for_feature(f, [&](int64_t k) {
          dx.Set(k, c * (l.count() * dy.Get(k) - sum_dy - (x.Get(k) - m) * sum_dy_xm / v));
        });
        dscale.Set(f, sum_dy_xm * r);
        doffset.Set(f, sum_dy);
      }
      return absl::OkStatus();
    }
    default:
      return absl::InternalError("not a batch-norm op");
  }
}

}  // namespace tpuoff::runtime
