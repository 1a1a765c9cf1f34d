// Debian's abseil (20220623) ships no status macros; these are the two we use.
#ifndef TPUOFF_HLO_IR_STATUS_MACROS_H_
#define TPUOFF_HLO_IR_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TPUOFF_CONCAT_INNER(a, b) a##b
#define TPUOFF_CONCAT(a, b) TPUOFF_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                     \
  do {                                            \
    ::absl::Status _tpuoff_status = (expr);       \
    if (!_tpuoff_status.ok()) return _tpuoff_status; \
  } while (0)

#define TPUOFF_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  TPUOFF_ASSIGN_OR_RETURN_IMPL(TPUOFF_CONCAT(_tpuoff_sor_, __LINE__), lhs, expr)

#endif  // TPUOFF_HLO_IR_STATUS_MACROS_H_
