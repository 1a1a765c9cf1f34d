// CheckTopologyName(): the syntax of a "GEN:AxB[xC]" topology name, checked
// before a plugin sees it (built with or without the PJRT backend).
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/pjrt/pjrt_backend.h"

namespace tpuoff::runtime::pjrt {

absl::Status CheckTopologyName(const std::string& topology) {
  if (topology.empty()) return absl::InvalidArgumentError("empty topology name");
  const size_t colon = topology.find(':');
  if (colon == std::string::npos) return absl::OkStatus();
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology '", topology, "': ", why, " (expected GEN:AxB or GEN:AxBxC, e.g. v6e:2x4)"));
  };
  if (colon == 0) return bad("no chip generation before ':'");
  int64_t chips = 1;
  int dims = 0;
  for (absl::string_view d : absl::StrSplit(absl::string_view(topology).substr(colon + 1), 'x')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(d, &v) || d.empty() || d[0] == '+' || d[0] == '-') {
      return bad(absl::StrCat("'", d, "' is not a dimension"));
    }
    if (v < 1 || v > 4096) return bad(absl::StrCat("dimension ", v, " is outside [1, 4096]"));
    chips *= v;
    if (chips > 65536) return bad("more than 65536 chips");
    ++dims;
  }
  if (dims < 1 || dims > 3) return bad(absl::StrCat(dims, " dimensions"));
  return absl::OkStatus();
}

}  // namespace tpuoff::runtime::pjrt
