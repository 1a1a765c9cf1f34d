#include "hlo/analysis/tpu_layout.h"

#include "absl/strings/str_cat.h"

namespace tpuoff::hlo {
namespace {

constexpr int64_t kVectorTile = 1024;  // rank-1 arrays: {0:T(1024)}
constexpr int64_t kScalarTile = 128;   // scalars: {:T(128)}

int64_t RoundUp(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// (most minor, second most minor) dimension indices of a rank >= 2 array.
std::pair<int64_t, int64_t> MinorDims(const Shape& shape) {
  const std::vector<int64_t>& m2m = shape.minor_to_major();
  if (m2m.size() == static_cast<size_t>(shape.rank()) && m2m.size() >= 2) {
    return {m2m[0], m2m[1]};
  }
  return {shape.rank() - 1, shape.rank() - 2};
}

}  // namespace

TpuTile TpuTileFor(PrimitiveType type) {
  if (type == PrimitiveType::kPred) return {8, 128, 4};
  switch (ByteWidth(type)) {
    case 1: return {32, 128, 1};
    case 2: return {8, 128, 2};  // T(8,128)(2,1): row pairs packed in 32-bit words
    case 8: return {8, 128, 8};
    default: return {8, 128, 4};
  }
}

std::vector<int64_t> TpuPaddedDimensions(const Shape& shape) {
  if (!shape.IsArray()) return {};
  std::vector<int64_t> dims = shape.dimensions();
  if (shape.rank() == 0) return {kScalarTile};
  if (shape.rank() == 1) {
    dims[0] = RoundUp(dims[0], kVectorTile);
    return dims;
  }
  const TpuTile tile = TpuTileFor(shape.element_type());
  const auto [minor, second] = MinorDims(shape);
  dims[minor] = RoundUp(dims[minor], tile.lanes);
  dims[second] = RoundUp(dims[second], tile.sublanes);
  return dims;
}

int64_t TpuPaddedBytes(const Shape& shape) {
  if (shape.IsTuple()) {
    int64_t total = 0;
    for (const Shape& s : shape.tuple_shapes()) total += TpuPaddedBytes(s);
    return total;
  }
  if (!shape.IsArray()) return 0;
  int64_t elements = 1;
  for (int64_t d : TpuPaddedDimensions(shape)) elements *= d;
  return elements * TpuTileFor(shape.element_type()).element_bytes;
}

std::string TpuTilingName(const Shape& shape) {
  if (!shape.IsArray()) return "";
  if (shape.rank() == 0) return absl::StrCat("T(", kScalarTile, ")");
  if (shape.rank() == 1) return absl::StrCat("T(", kVectorTile, ")");
  const TpuTile tile = TpuTileFor(shape.element_type());
  return absl::StrCat("T(", tile.sublanes, ",", tile.lanes, ")");
}

}  // namespace tpuoff::hlo
