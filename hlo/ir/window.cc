#include "hlo/ir/window.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpuoff::hlo {
namespace {

// Bound on every window quantity and intermediate size: large enough for
// any real array, small enough that the arithmetic below cannot overflow.
constexpr int64_t kMaxWindowValue = int64_t{1} << 40;

absl::Status Bad(size_t dim, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("window dimension ", dim, ": ", msg));
}

// (n - 1) * dilation + 1 for n > 0, else 0; exact within the bounds above
// (checked in 128 bits).
absl::StatusOr<int64_t> Dilated(size_t dim, int64_t n, int64_t dilation) {
  if (n == 0) return 0;
  const __int128 v = static_cast<__int128>(n - 1) * dilation + 1;
  if (v > kMaxWindowValue) return Bad(dim, "dilated size is too large");
  return static_cast<int64_t>(v);
}

}  // namespace

std::string WindowToString(const std::vector<WindowDimension>& window) {
  bool stride = false, pad = false, lhs = false, rhs = false, reversal = false;
  for (const WindowDimension& d : window) {
    stride |= d.stride != 1;
    pad |= d.padding_low != 0 || d.padding_high != 0;
    lhs |= d.base_dilation != 1;
    rhs |= d.window_dilation != 1;
    reversal |= d.window_reversal;
  }
  auto field = [&](absl::string_view name, auto format) {
    std::vector<std::string> parts;
    for (const WindowDimension& d : window) parts.push_back(format(d));
    return absl::StrCat(name, "=", absl::StrJoin(parts, "x"));
  };
  std::vector<std::string> out;
  if (!window.empty()) {
    out.push_back(field("size", [](const WindowDimension& d) { return absl::StrCat(d.size); }));
  }
  if (stride) {
    out.push_back(field("stride", [](const WindowDimension& d) { return absl::StrCat(d.stride); }));
  }
  if (pad) {
    out.push_back(field("pad", [](const WindowDimension& d) {
      return absl::StrCat(d.padding_low, "_", d.padding_high);
    }));
  }
  if (lhs) {
    out.push_back(field("lhs_dilate",
                        [](const WindowDimension& d) { return absl::StrCat(d.base_dilation); }));
  }
  if (rhs) {
    out.push_back(field("rhs_dilate",
                        [](const WindowDimension& d) { return absl::StrCat(d.window_dilation); }));
  }
  if (reversal) {
    out.push_back(field("rhs_reversal", [](const WindowDimension& d) {
      return std::string(d.window_reversal ? "1" : "0");
    }));
  }
  return absl::StrCat("{", absl::StrJoin(out, " "), "}");
}

absl::StatusOr<std::vector<int64_t>> WindowOutputDimensions(
    const std::vector<int64_t>& base, const std::vector<WindowDimension>& window) {
  if (base.size() != window.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "window has ", window.size(), " dimensions, the operand has rank ", base.size()));
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < base.size(); ++i) {
    const WindowDimension& d = window[i];
    if (d.size < 1 || d.size > kMaxWindowValue) return Bad(i, "size must be >= 1");
    if (d.stride < 1 || d.stride > kMaxWindowValue) return Bad(i, "stride must be >= 1");
    if (d.base_dilation < 1 || d.base_dilation > kMaxWindowValue ||
        d.window_dilation < 1 || d.window_dilation > kMaxWindowValue) {
      return Bad(i, "dilations must be >= 1");
    }
    if (d.padding_low < -kMaxWindowValue || d.padding_low > kMaxWindowValue ||
        d.padding_high < -kMaxWindowValue || d.padding_high > kMaxWindowValue) {
      return Bad(i, "padding is out of range");
    }
    auto dilated_base = Dilated(i, base[i], d.base_dilation);
    if (!dilated_base.ok()) return dilated_base.status();
    auto dilated_window = Dilated(i, d.size, d.window_dilation);
    if (!dilated_window.ok()) return dilated_window.status();
    const int64_t padded = *dilated_base + d.padding_low + d.padding_high;
    if (padded < 0) return Bad(i, "padding makes the padded base negative");
    out.push_back(padded < *dilated_window ? 0 : (padded - *dilated_window) / d.stride + 1);
  }
  return out;
}

}  // namespace tpuoff::hlo
