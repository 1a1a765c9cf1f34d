// Sorting by keys instead of calling the comparator: a sort comparator of the
// form compare(f(a), f(b)), direction LT or GT, where a and b are the first
// operand's pair (parameters 0 and 1) and f is the same expression of
// elementwise ops and constants on each side (jax's float sorts canonicalise
// NaN and -0 that way before a TOTALORDER compare), orders elements as their
// keys f(x) do. The keys are computed once per element (O(n) evaluations
// instead of O(n log n) comparator calls) and mapped to unsigned integers
// whose order is the compare's; the caller's stable sort by them gives the permutation
// the comparator gives (the same strict weak order).
#ifndef TPUOFF_RUNTIME_EMULATOR_SORT_KEYS_H_
#define TPUOFF_RUNTIME_EMULATOR_SORT_KEYS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "hlo/ir/computation.h"
#include "hlo/ir/module.h"
#include "runtime/emulator/ops.h"

namespace tpuoff::runtime {

class SortKeys {
 public:
  // The keyed form of `comparator`, or null when it has another form.
  static std::unique_ptr<SortKeys> Match(const hlo::HloComputation* comparator);

  // The order keys of `values` (the first operand's row, compute
  // representation); false when this row cannot be keyed (a NaN key under
  // a non-TOTALORDER float compare, which orders nothing strictly).
  bool Keys(const std::vector<ScalarValue>& values, int64_t start, int64_t stride,
            int64_t length, std::vector<uint64_t>* keys) const;
  // Whether the comparator orders by descending keys (GT), else ascending.
  bool greater() const { return greater_; }

 private:
  std::unique_ptr<hlo::HloModule> module_;  // f as a one-parameter computation
  std::unique_ptr<ScalarEvaluator> key_;
  hlo::PrimitiveType type_ = hlo::PrimitiveType::kF32;
  bool greater_ = false;
  bool total_order_ = false;
};

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_SORT_KEYS_H_
