// Sliding windows (reduce-window): XLA's text form and output-size rule.
#ifndef TPUOFF_HLO_IR_WINDOW_H_
#define TPUOFF_HLO_IR_WINDOW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hlo/ir/attributes.h"

namespace tpuoff::hlo {

// XLA's text form: `size=1x1x32 stride=1x1x32 pad=0_0x0_0x10_10
// lhs_dilate=.. rhs_dilate=.. rhs_reversal=0x1`; fields at their defaults
// (stride 1, no padding, dilation 1, no reversal) are omitted as XLA does.
std::string WindowToString(const std::vector<WindowDimension>& window);

// Output dimensions of a window over an array of dimensions `base`:
// per dimension floor((dilated padded base - dilated window) / stride) + 1,
// or 0 when the window does not fit. INVALID_ARGUMENT (naming the
// dimension) for a rank mismatch, a size, stride or dilation < 1, or a
// padding that makes the base negative.
absl::StatusOr<std::vector<int64_t>> WindowOutputDimensions(
    const std::vector<int64_t>& base, const std::vector<WindowDimension>& window);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_WINDOW_H_
