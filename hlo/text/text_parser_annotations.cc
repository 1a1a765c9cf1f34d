// XLA's annotations that do not change what a module computes but are kept
// for a faithful round trip: result_accuracy, statistics, the stack-frame
// index tables. Each is validated as strictly as XLA's parser does.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "hlo/text/text_parser_impl.h"

namespace tpuoff::hlo::text_internal {

absl::Status TextParser::ParseResultAccuracy(ResultAccuracy* accuracy) {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start result_accuracy"));
  if (!At(TokKind::kAttrName)) return TokenError("expected mode= or tolerance=");
  const std::string kind = lexer_.tok().str;
  lexer_.Next();
  *accuracy = ResultAccuracy();
  if (kind == "mode") {
    if (AtIdent("highest")) {
      accuracy->highest = true;
    } else if (!AtIdent("default")) {
      return TokenError("expected a result accuracy mode: default or highest");
    }
    lexer_.Next();
  } else if (kind == "tolerance") {
    accuracy->has_tolerance = true;
    RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start the tolerance"));
    std::set<std::string> seen;
    while (!At(TokKind::kRbrace)) {
      if (!seen.empty()) RETURN_IF_ERROR(Expect(TokKind::kComma, "between tolerances"));
      if (!At(TokKind::kAttrName)) return TokenError("expected atol=, rtol= or ulps=");
      const std::string field = lexer_.tok().str;
      const size_t loc = Loc();
      if (!seen.insert(field).second) return TokenError("tolerance field given twice");
      lexer_.Next();
      double v = 0;
      bool has_payload = false;
      uint64_t payload = 0;
      RETURN_IF_ERROR(ParseDouble(&v, &has_payload, &payload));
      if (!std::isfinite(v) || v < 0) return ErrorAt(loc, "a tolerance must be finite and >= 0");
      if (field == "atol") {
        accuracy->atol = v;
      } else if (field == "rtol") {
        accuracy->rtol = v;
      } else if (field == "ulps") {
        if (v != std::floor(v) || v > 1e18) return ErrorAt(loc, "ulps must be an integer");
        accuracy->ulps = static_cast<int64_t>(v);
      } else {
        return ErrorAt(loc, absl::StrCat("invalid tolerance field ", field));
      }
    }
    lexer_.Next();
  } else {
    return TokenError(absl::StrCat("invalid result_accuracy field ", kind,
                                   " (expected mode or tolerance)"));
  }
  return Expect(TokKind::kRbrace, "to end result_accuracy");
}

absl::Status TextParser::ParseStatistics(StatisticsViz* statistics) {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start statistics"));
  *statistics = StatisticsViz();
  bool first = true;
  while (!At(TokKind::kRbrace)) {
    if (!first) RETURN_IF_ERROR(Expect(TokKind::kComma, "between statistics"));
    if (!At(TokKind::kAttrName)) return TokenError("expected name=value");
    const std::string name = lexer_.tok().str;
    const size_t loc = Loc();
    lexer_.Next();
    if (first) {
      if (name != "visualizing_index") return ErrorAt(loc, "statistics start with visualizing_index=");
      RETURN_IF_ERROR(ParseDimValue(&statistics->visualizing_index));
    } else {
      double v = 0;
      bool has_payload = false;
      uint64_t payload = 0;
      RETURN_IF_ERROR(ParseDouble(&v, &has_payload, &payload));
      statistics->statistics.emplace_back(name, v);
    }
    first = false;
  }
  if (first) return TokenError("statistics need visualizing_index=");
  lexer_.Next();
  return absl::OkStatus();
}

absl::Status TextParser::ParseStackFrameIndex() {
  StackFrameIndex& s = module_.stack_frames;
  // `name=value` pairs of one table row, in braces.
  auto row = [&](std::initializer_list<std::pair<absl::string_view, int32_t*>> fields) {
    RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start a stack-frame table row"));
    std::set<std::string> seen;
    while (!At(TokKind::kRbrace)) {
      if (!At(TokKind::kAttrName)) return TokenError("expected field=value");
      const std::string name = lexer_.tok().str;
      int32_t* target = nullptr;
      for (const auto& [n, p] : fields) {
        if (n == name) target = p;
      }
      if (target == nullptr || !seen.insert(name).second) {
        return TokenError(absl::StrCat("unexpected or repeated field ", name));
      }
      lexer_.Next();
      int64_t v = 0;
      const size_t loc = Loc();
      RETURN_IF_ERROR(ParseInt64(&v));
      if (v < 0 || v > INT32_MAX) return ErrorAt(loc, "value out of range");
      *target = static_cast<int32_t>(v);
    }
    lexer_.Next();
    return absl::OkStatus();
  };
  for (absl::string_view table : {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}) {
    if (!AtIdent(table)) continue;
    lexer_.Next();
    int64_t expected = 1;
    while (At(TokKind::kInt)) {
      int64_t id = 0;
      const size_t loc = Loc();
      RETURN_IF_ERROR(ParseInt64(&id));
      if (id != expected++) {
        return ErrorAt(loc, absl::StrCat(table, " ids must count up from 1"));
      }
      if (table == "FileNames" || table == "FunctionNames") {
        std::string name;
        RETURN_IF_ERROR(ParseString(&name));
        (table == "FileNames" ? s.file_names : s.function_names).push_back(std::move(name));
      } else if (table == "FileLocations") {
        StackFrameIndex::FileLocation l;
        RETURN_IF_ERROR(row({{"file_name_id", &l.file_name_id},
                             {"function_name_id", &l.function_name_id},
                             {"line", &l.line},
                             {"end_line", &l.end_line},
                             {"column", &l.column},
                             {"end_column", &l.end_column}}));
        s.file_locations.push_back(l);
      } else {
        StackFrameIndex::Frame f;
        RETURN_IF_ERROR(row({{"file_location_id", &f.file_location_id},
                             {"parent_frame_id", &f.parent_frame_id}}));
        s.frames.push_back(f);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::hlo::text_internal
