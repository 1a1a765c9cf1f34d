#include "hlo/ir/attributes.h"

#include <algorithm>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpuoff::hlo {
namespace {

constexpr struct {
  ComparisonDirection dir;
  absl::string_view name;
} kDirections[] = {
    {ComparisonDirection::kEq, "EQ"}, {ComparisonDirection::kNe, "NE"},
    {ComparisonDirection::kGe, "GE"}, {ComparisonDirection::kGt, "GT"},
    {ComparisonDirection::kLe, "LE"}, {ComparisonDirection::kLt, "LT"},
};

constexpr struct {
  FusionKind kind;
  absl::string_view name;
} kFusionKinds[] = {
    {FusionKind::kLoop, "kLoop"},
    {FusionKind::kInput, "kInput"},
    {FusionKind::kOutput, "kOutput"},
    {FusionKind::kCustom, "kCustom"},
};

constexpr absl::string_view kDotAlgorithms[kNumDotAlgorithms] = {
    "unset",
    "dot_any_f8_any_f8_f32",
    "dot_any_f8_any_f8_f32_fast_accum",
    "dot_f16_f16_f16",
    "dot_f16_f16_f32",
    "dot_bf16_bf16_bf16",
    "dot_bf16_bf16_f32",
    "dot_bf16_bf16_f32_x3",
    "dot_bf16_bf16_f32_x6",
    "dot_tf32_tf32_f32",
    "dot_tf32_tf32_f32_x3",
    "dot_f32_f32_f32",
    "dot_f64_f64_f64",
    "dot_bf16_bf16_f32_x9",
};

// One operand's labels: `special` characters name the two non-spatial
// roles, digits the spatial dimensions in order.
absl::Status ParseLabels(absl::string_view labels, char first, char second, int64_t* first_dim,
                         int64_t* second_dim, std::vector<int64_t>* spatial,
                         absl::string_view whole) {
  *first_dim = -1;
  *second_dim = -1;
  const int64_t rank = static_cast<int64_t>(labels.size());
  if (rank < 2) {
    return absl::InvalidArgumentError(absl::StrCat("dim_labels '", whole, "': '", labels,
                                                   "' needs at least two dimensions"));
  }
  spatial->assign(rank - 2, -1);
  for (int64_t pos = 0; pos < rank; ++pos) {
    const char c = labels[pos];
    int64_t* target = c == first ? first_dim : c == second ? second_dim : nullptr;
    if (target != nullptr) {
      if (*target >= 0) break;
      *target = pos;
      continue;
    }
    const int64_t idx = c - '0';
    if (c < '0' || c > '9' || idx >= rank - 2 || (*spatial)[idx] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("dim_labels '", whole, "': bad label '",
                                                     std::string(1, c), "' in '", labels, "'"));
    }
    (*spatial)[idx] = pos;
  }
  if (*first_dim < 0 || *second_dim < 0) {
    return absl::InvalidArgumentError(absl::StrCat("dim_labels '", whole, "': '", labels,
                                                   "' must name '", std::string(1, first),
                                                   "' and '", std::string(1, second),
                                                   "' once each"));
  }
  return absl::OkStatus();
}

std::string Labels(int64_t rank, char first, int64_t first_dim, char second,
                   int64_t second_dim, const std::vector<int64_t>& spatial) {
  std::string out(rank, '?');
  if (first_dim >= 0 && first_dim < rank) out[first_dim] = first;
  if (second_dim >= 0 && second_dim < rank) out[second_dim] = second;
  for (size_t i = 0; i < spatial.size(); ++i) {
    if (spatial[i] >= 0 && spatial[i] < rank) out[spatial[i]] = static_cast<char>('0' + i);
  }
  return out;
}

}  // namespace

std::string ConvolutionDimensionNumbersToString(const ConvolutionDimensionNumbers& d) {
  const int64_t rank = static_cast<int64_t>(d.input_spatial_dimensions.size()) + 2;
  return absl::StrCat(
      Labels(rank, 'b', d.input_batch_dimension, 'f', d.input_feature_dimension,
             d.input_spatial_dimensions),
      "_",
      Labels(static_cast<int64_t>(d.kernel_spatial_dimensions.size()) + 2, 'i',
             d.kernel_input_feature_dimension, 'o', d.kernel_output_feature_dimension,
             d.kernel_spatial_dimensions),
      "->",
      Labels(static_cast<int64_t>(d.output_spatial_dimensions.size()) + 2, 'b',
             d.output_batch_dimension, 'f', d.output_feature_dimension,
             d.output_spatial_dimensions));
}

absl::StatusOr<ConvolutionDimensionNumbers> ParseConvolutionDimensionNumbers(
    absl::string_view labels) {
  const size_t us = labels.find('_');
  const size_t arrow = labels.find("->");
  if (us == absl::string_view::npos || arrow == absl::string_view::npos || arrow < us) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim_labels '", labels, "' is not of the form lhs_rhs->out"));
  }
  ConvolutionDimensionNumbers d;
  absl::Status s = ParseLabels(labels.substr(0, us), 'b', 'f', &d.input_batch_dimension,
                               &d.input_feature_dimension, &d.input_spatial_dimensions, labels);
  if (!s.ok()) return s;
  s = ParseLabels(labels.substr(us + 1, arrow - us - 1), 'i', 'o',
                  &d.kernel_input_feature_dimension, &d.kernel_output_feature_dimension,
                  &d.kernel_spatial_dimensions, labels);
  if (!s.ok()) return s;
  s = ParseLabels(labels.substr(arrow + 2), 'b', 'f', &d.output_batch_dimension,
                  &d.output_feature_dimension, &d.output_spatial_dimensions, labels);
  if (!s.ok()) return s;
  if (d.kernel_spatial_dimensions.size() != d.input_spatial_dimensions.size() ||
      d.output_spatial_dimensions.size() != d.input_spatial_dimensions.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim_labels '", labels, "': operands differ in spatial rank"));
  }
  return d;
}

absl::string_view DotAlgorithmName(int algorithm) {
  if (algorithm < 0 || algorithm >= kNumDotAlgorithms) return "";
  return kDotAlgorithms[algorithm];
}

std::optional<int> DotAlgorithmFromName(absl::string_view name) {
  for (int i = 0; i < kNumDotAlgorithms; ++i) {
    if (kDotAlgorithms[i] == name) return i;
  }
  return std::nullopt;
}

absl::string_view ComparisonDirectionString(ComparisonDirection d) {
  for (const auto& e : kDirections) {
    if (e.dir == d) return e.name;
  }
  return "EQ";
}

absl::StatusOr<ComparisonDirection> ParseComparisonDirection(
    absl::string_view s) {
  for (const auto& e : kDirections) {
    if (e.name == s) return e.dir;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown comparison direction '", s, "'"));
}

absl::string_view FusionKindString(FusionKind k) {
  for (const auto& e : kFusionKinds) {
    if (e.kind == k) return e.name;
  }
  return "kLoop";
}

absl::StatusOr<FusionKind> ParseFusionKind(absl::string_view s) {
  for (const auto& e : kFusionKinds) {
    if (e.name == s) return e.kind;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown fusion kind '", s, "'"));
}

namespace {

// Name <-> value of a small enum numbered 0..n-1 as its table.
template <typename E, size_t N>
absl::StatusOr<E> EnumFromName(const absl::string_view (&names)[N], absl::string_view s,
                               absl::string_view what) {
  for (size_t i = 0; i < N; ++i) {
    if (!names[i].empty() && names[i] == s) return static_cast<E>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ", what, " '", s, "'"));
}

constexpr absl::string_view kFftTypes[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
constexpr absl::string_view kTransposes[] = {"", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
constexpr absl::string_view kDistributions[] = {"", "rng_uniform", "rng_normal"};
constexpr absl::string_view kRngAlgorithms[] = {"rng_default", "rng_three_fry", "rng_philox"};

}  // namespace

absl::string_view FftTypeString(FftType t) { return kFftTypes[static_cast<int>(t)]; }
absl::StatusOr<FftType> ParseFftType(absl::string_view s) {
  return EnumFromName<FftType>(kFftTypes, s, "fft_type");
}
absl::string_view TriangularTransposeString(TriangularTranspose t) {
  return t == TriangularTranspose::kInvalid ? "TRANSPOSE_INVALID"
                                            : kTransposes[static_cast<int>(t)];
}
absl::StatusOr<TriangularTranspose> ParseTriangularTranspose(absl::string_view s) {
  return EnumFromName<TriangularTranspose>(kTransposes, s, "transpose_a");
}
absl::string_view RngDistributionString(RngDistribution d) {
  return d == RngDistribution::kInvalid ? "rng_invalid" : kDistributions[static_cast<int>(d)];
}
absl::StatusOr<RngDistribution> ParseRngDistribution(absl::string_view s) {
  return EnumFromName<RngDistribution>(kDistributions, s, "rng distribution");
}
absl::string_view RngAlgorithmString(RngAlgorithm a) {
  return kRngAlgorithms[static_cast<int>(a)];
}
absl::StatusOr<RngAlgorithm> ParseRngAlgorithm(absl::string_view s) {
  return EnumFromName<RngAlgorithm>(kRngAlgorithms, s, "rng algorithm");
}

std::vector<int64_t> ExpandIotaDevices(const std::vector<int64_t>& reshape_dims,
                                       const std::vector<int64_t>& perm) {
  int64_t total = 1;
  for (int64_t d : reshape_dims) total *= d;
  std::vector<int64_t> out(total);
  if (perm.empty()) {
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  // Transposed dims and row-major strides of the untransposed array.
  const size_t rank = reshape_dims.size();
  std::vector<int64_t> src_strides(rank, 1);
  for (int64_t i = static_cast<int64_t>(rank) - 2; i >= 0; --i) {
    src_strides[i] = src_strides[i + 1] * reshape_dims[i + 1];
  }
  std::vector<int64_t> dims(rank), index(rank, 0);
  for (size_t i = 0; i < rank; ++i) dims[i] = reshape_dims[perm[i]];
  for (int64_t linear = 0; linear < total; ++linear) {
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += index[i] * src_strides[perm[i]];
    out[linear] = src;
    for (int64_t i = static_cast<int64_t>(rank) - 1; i >= 0; --i) {
      if (++index[i] < dims[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

HloSharding HloSharding::IotaTiled(std::vector<int64_t> tile_dims) {
  HloSharding s;
  s.type = Type::kTiled;
  int64_t n = 1;
  for (int64_t d : tile_dims) n *= d;
  s.tile_assignment_dims = std::move(tile_dims);
  s.iota_form = true;
  s.iota_reshape_dims = {n};
  s.devices = ExpandIotaDevices(s.iota_reshape_dims, {});
  return s;
}

}  // namespace tpuoff::hlo
