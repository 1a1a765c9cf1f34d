// The `window={...}` attribute of reduce-window, in XLA's syntax:
// space-separated fields `size=2x3 stride=1x2 pad=0_0x1_1 lhs_dilate=1x1
// rhs_dilate=1x2 rhs_reversal=0x1`, one 'x'-separated entry per dimension.
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hlo/ir/status_macros.h"
#include "hlo/text/text_parser_impl.h"

namespace tpuoff::hlo::text_internal {

absl::Status TextParser::ParseWindow(std::vector<WindowDimension>* window) {
  const size_t loc = Loc();
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start a window"));
  // Field name -> per-dimension values ('_'-separated parts of each entry).
  std::vector<std::pair<std::string, std::vector<std::vector<int64_t>>>> fields;
  std::set<std::string> seen;
  while (!At(TokKind::kRbrace)) {
    if (!At(TokKind::kAttrName)) {
      return TokenError("expected a window field (size=, stride=, pad=, lhs_dilate=, "
                        "rhs_dilate=, rhs_reversal=)");
    }
    const size_t field_loc = Loc();
    const std::string name = lexer_.tok().str;
    if (name != "size" && name != "stride" && name != "pad" && name != "lhs_dilate" &&
        name != "rhs_dilate" && name != "rhs_reversal") {
      return ErrorAt(field_loc, absl::StrCat("unknown window field '", name, "'"));
    }
    if (!seen.insert(name).second) {
      return ErrorAt(field_loc, absl::StrCat("window field ", name, " given twice"));
    }
    lexer_.Next();
    if (!At(TokKind::kInt) && !At(TokKind::kPad)) {
      return TokenError("expected window values like 2x3 (pad: 0_0x1_1)");
    }
    const std::string text(lexer_.TokenText(lexer_.tok()));
    const size_t parts_wanted = name == "pad" ? 2 : 1;
    std::vector<std::vector<int64_t>> dims;
    for (absl::string_view entry : absl::StrSplit(text, 'x')) {
      std::vector<int64_t> parts;
      for (absl::string_view part : absl::StrSplit(entry, '_')) {
        int64_t v = 0;
        if (!absl::SimpleAtoi(part, &v) || v > kMaxDimValue || v < -kMaxDimValue) {
          return TokenError(absl::StrCat("malformed window ", name));
        }
        parts.push_back(v);
      }
      if (parts.size() != parts_wanted) {
        return TokenError(name == "pad" ? "window pad entries are low_high"
                                        : absl::StrCat("malformed window ", name));
      }
      dims.push_back(std::move(parts));
    }
    lexer_.Next();
    fields.emplace_back(name, std::move(dims));
  }
  lexer_.Next();  // '}'
  window->clear();
  if (fields.empty()) return absl::OkStatus();  // rank 0
  if (!seen.count("size")) return ErrorAt(loc, "a window needs size=");
  size_t rank = 0;
  for (const auto& [name, dims] : fields) {
    if (name == "size") rank = dims.size();
  }
  window->resize(rank);
  for (const auto& [name, dims] : fields) {
    if (dims.size() != rank) {
      return ErrorAt(loc, absl::StrCat("window ", name, " has ", dims.size(),
                                       " dimensions, size= has ", rank));
    }
    for (size_t i = 0; i < rank; ++i) {
      WindowDimension& d = (*window)[i];
      const std::vector<int64_t>& v = dims[i];
      if (name == "size") {
        d.size = v[0];
      } else if (name == "stride") {
        d.stride = v[0];
      } else if (name == "pad") {
        d.padding_low = v[0];
        d.padding_high = v[1];
      } else if (name == "lhs_dilate") {
        d.base_dilation = v[0];
      } else if (name == "rhs_dilate") {
        d.window_dilation = v[0];
      } else {
        if (v[0] != 0 && v[0] != 1) return ErrorAt(loc, "rhs_reversal entries are 0 or 1");
        d.window_reversal = v[0] == 1;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::hlo::text_internal
