// Convolutions of the element types oneDNN does not take (integers with
// their wider accumulators, e.g. s8 x s8 -> s32; f64; c64/c128): a direct
// loop over each output element's window with XLA's semantics (feature
// and batch groups, strides, padding, both dilations, window reversal).
// The products and sums are taken in the result type (wrapping for
// integers, as XLA's), through a wide accumulator: int64 (the wrap of an
// int64 sum equals the result type's wrapped sum), double, complex<double>.
#include <complex>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "hlo/ir/float16.h"
#include "hlo/ir/primitive_type.h"
#include "runtime/emulator/ops_extra.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::PrimitiveType;
using hlo::Shape;

template <typename T>
T LoadAs(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Element i of an array of type t, as the accumulator type.
template <typename Acc>
Acc Read(const uint8_t* base, PrimitiveType t, int64_t i) {
  const uint8_t* p = base + i * hlo::ByteWidth(t);
  switch (t) {
    case PrimitiveType::kPred: return Acc(LoadAs<uint8_t>(p) != 0 ? 1 : 0);
    case PrimitiveType::kS8: return Acc(LoadAs<int8_t>(p));
    case PrimitiveType::kS16: return Acc(LoadAs<int16_t>(p));
    case PrimitiveType::kS32: return Acc(LoadAs<int32_t>(p));
    case PrimitiveType::kS64: return Acc(LoadAs<int64_t>(p));
    case PrimitiveType::kU8: return Acc(LoadAs<uint8_t>(p));
    case PrimitiveType::kU16: return Acc(LoadAs<uint16_t>(p));
    case PrimitiveType::kU32: return Acc(LoadAs<uint32_t>(p));
    case PrimitiveType::kU64: return Acc(static_cast<int64_t>(LoadAs<uint64_t>(p)));
    case PrimitiveType::kF32: return Acc(LoadAs<float>(p));
    case PrimitiveType::kF64: return Acc(LoadAs<double>(p));
    case PrimitiveType::kBF16: return Acc(hlo::Bf16ToF32(LoadAs<uint16_t>(p)));
    case PrimitiveType::kF16: return Acc(hlo::F16ToF32(LoadAs<uint16_t>(p)));
    default: return Acc(0);
  }
}

template <typename T>
void StoreAs(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Stores an integer or real accumulator as type t (integers wrap).
template <typename Acc>
void Write(uint8_t* base, PrimitiveType t, int64_t i, Acc v) {
  uint8_t* p = base + i * hlo::ByteWidth(t);
  if constexpr (std::is_same_v<Acc, int64_t>) {
    const uint64_t u = static_cast<uint64_t>(v);
    switch (t) {
      case PrimitiveType::kPred: return StoreAs<uint8_t>(p, v != 0);
      case PrimitiveType::kS8: case PrimitiveType::kU8: return StoreAs<uint8_t>(p, static_cast<uint8_t>(u));
      case PrimitiveType::kS16: case PrimitiveType::kU16: return StoreAs<uint16_t>(p, static_cast<uint16_t>(u));
      case PrimitiveType::kS32: case PrimitiveType::kU32: return StoreAs<uint32_t>(p, static_cast<uint32_t>(u));
      default: return StoreAs<uint64_t>(p, u);
    }
  } else {
    switch (t) {
      case PrimitiveType::kF32: return StoreAs<float>(p, static_cast<float>(v));
      case PrimitiveType::kBF16: return StoreAs<uint16_t>(p, hlo::F32ToBf16(static_cast<float>(v)));
      case PrimitiveType::kF16: return StoreAs<uint16_t>(p, hlo::F32ToF16(static_cast<float>(v)));
      default: return StoreAs<double>(p, static_cast<double>(v));
    }
  }
}

template <typename Acc>
struct Access {
  static Acc Get(const uint8_t* b, PrimitiveType t, int64_t i) { return Read<Acc>(b, t, i); }
  static void Put(uint8_t* b, PrimitiveType t, int64_t i, Acc v) { Write<Acc>(b, t, i, v); }
};

// Complex values: c64/c128 parts, or a real operand as (x, 0).
template <>
struct Access<std::complex<double>> {
  using Z = std::complex<double>;
  static Z Get(const uint8_t* b, PrimitiveType t, int64_t i) {
    if (t == PrimitiveType::kC64) {
      return {LoadAs<float>(b + 8 * i), LoadAs<float>(b + 8 * i + 4)};
    }
    if (t == PrimitiveType::kC128) {
      return {LoadAs<double>(b + 16 * i), LoadAs<double>(b + 16 * i + 8)};
    }
    return {Read<double>(b, t, i), 0.0};
  }
  static void Put(uint8_t* b, PrimitiveType t, int64_t i, Z v) {
    if (t == PrimitiveType::kC64) {
      StoreAs<float>(b + 8 * i, static_cast<float>(v.real()));
      StoreAs<float>(b + 8 * i + 4, static_cast<float>(v.imag()));
    } else {
      StoreAs<double>(b + 16 * i, v.real());
      StoreAs<double>(b + 16 * i + 8, v.imag());
    }
  }
};

std::vector<int64_t> Strides(const Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (int64_t d = s.rank() - 2; d >= 0; --d) st[d] = st[d + 1] * s.dimensions(d + 1);
  return st;
}

template <typename Acc>
void Convolve(const HloInstruction& instr, const uint8_t* lhs, const uint8_t* rhs, uint8_t* out) {
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  const Shape& os = instr.shape();
  const PrimitiveType lt = ls.element_type(), rt = rs.element_type(), ot = os.element_type();
  const hlo::ConvolutionDimensionNumbers& dn = instr.attrs().conv;
  const auto& win = instr.attrs().window;
  const int64_t ns = static_cast<int64_t>(dn.input_spatial_dimensions.size());
  const std::vector<int64_t> lst = Strides(ls), rst = Strides(rs), ost = Strides(os);
  const int64_t groups = instr.attrs().feature_group_count;
  const int64_t bgroups = instr.attrs().batch_group_count;
  const int64_t in_features = rs.dimensions(dn.kernel_input_feature_dimension);  // per group
  const int64_t out_features = os.dimensions(dn.output_feature_dimension);
  const int64_t out_batch = os.dimensions(dn.output_batch_dimension);
  const int64_t per_fgroup = out_features / groups;
  const int64_t per_bgroup = out_features / bgroups;
  std::vector<int64_t> kdims(ns);
  int64_t kcount = 1;
  for (int64_t i = 0; i < ns; ++i) {
    kdims[i] = rs.dimensions(dn.kernel_spatial_dimensions[i]);
    kcount *= kdims[i];
  }
  std::vector<int64_t> oidx(os.rank()), k(ns);
  for (int64_t o = 0, n = os.num_elements(); o < n; ++o) {
    for (int64_t d = os.rank() - 1, rest = o; d >= 0; --d) {
      oidx[d] = rest % os.dimensions(d);
      rest /= os.dimensions(d);
    }
    const int64_t of = oidx[dn.output_feature_dimension];
    const int64_t batch = (of / per_bgroup) * out_batch + oidx[dn.output_batch_dimension];
    const int64_t first_feature = (of / per_fgroup) * in_features;
    Acc acc = Acc(0);
    for (int64_t kk = 0; kk < kcount; ++kk) {
      // The kernel's spatial index and the input position it meets.
      bool inside = true;
      int64_t l_off = batch * lst[dn.input_batch_dimension];
      int64_t r_off = of * rst[dn.kernel_output_feature_dimension];
      for (int64_t i = ns - 1, rest = kk; i >= 0; --i) {
        k[i] = rest % kdims[i];
        rest /= kdims[i];
      }
      for (int64_t i = 0; i < ns && inside; ++i) {
        const hlo::WindowDimension& w = win[i];
        const int64_t pos = oidx[dn.output_spatial_dimensions[i]] * w.stride +
                            k[i] * w.window_dilation - w.padding_low;
        const int64_t in_dim = ls.dimensions(dn.input_spatial_dimensions[i]);
        if (pos < 0 || pos % w.base_dilation != 0 || pos / w.base_dilation >= in_dim) {
          inside = false;
          break;
        }
        l_off += (pos / w.base_dilation) * lst[dn.input_spatial_dimensions[i]];
        const int64_t kr = w.window_reversal ? kdims[i] - 1 - k[i] : k[i];
        r_off += kr * rst[dn.kernel_spatial_dimensions[i]];
      }
      if (!inside) continue;
      for (int64_t c = 0; c < in_features; ++c) {
        const Acc a = Access<Acc>::Get(
            lhs, lt, l_off + (first_feature + c) * lst[dn.input_feature_dimension]);
        const Acc b = Access<Acc>::Get(rhs, rt, r_off + c * rst[dn.kernel_input_feature_dimension]);
        if constexpr (std::is_same_v<Acc, int64_t>) {
          acc = static_cast<int64_t>(static_cast<uint64_t>(acc) +
                                     static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
        } else {
          acc += a * b;
        }
      }
    }
    Access<Acc>::Put(out, ot, o, acc);
  }
}

}  // namespace

absl::Status GenericConvolutionKernel(const HloInstruction& instr, const void* lhs,
                                      const void* rhs, void* out) {
  const PrimitiveType ot = instr.shape().element_type();
  const auto* l = static_cast<const uint8_t*>(lhs);
  const auto* r = static_cast<const uint8_t*>(rhs);
  auto* o = static_cast<uint8_t*>(out);
  // Every array type the IR holds is one of these three kinds (the parsers
  // refuse the others: f8, int4, ...).
  if (hlo::IsComplex(ot)) {
    Convolve<std::complex<double>>(instr, l, r, o);
  } else if (hlo::IsFloatingPoint(ot)) {
    Convolve<double>(instr, l, r, o);
  } else {  // pred and the integers
    Convolve<int64_t>(instr, l, r, o);
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::runtime
