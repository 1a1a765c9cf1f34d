#include "hlo/ir/attributes.h"

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

}  // namespace

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
