#include "hlo/text/text_lexer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tpuoff::hlo {
namespace {

bool IsIdentStart(char c) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsIdentChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '.' || c == '-';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Offset just past the '}' matching the '{' at `pos`, or npos.
size_t MatchJsonDict(absl::string_view s, size_t pos) {
  int64_t depth = 0;
  while (pos < s.size()) {
    const char c = s[pos];
    if (c == '"') {
      ++pos;
      while (pos < s.size() && s[pos] != '"') pos += s[pos] == '\\' ? 2 : 1;
      if (pos >= s.size()) return absl::string_view::npos;
      ++pos;
      continue;
    }
    if (c == '{') ++depth;
    if (c == '}' && --depth == 0) return pos + 1;
    ++pos;
  }
  return absl::string_view::npos;
}

}  // namespace

absl::string_view TokKindName(TokKind kind) {
  switch (kind) {
    case TokKind::kEof: return "end of input";
    case TokKind::kError: return "invalid token";
    case TokKind::kEqual: return "'='";
    case TokKind::kComma: return "','";
    case TokKind::kColon: return "':'";
    case TokKind::kLsquare: return "'['";
    case TokKind::kRsquare: return "']'";
    case TokKind::kLbrace: return "'{'";
    case TokKind::kRbrace: return "'}'";
    case TokKind::kLparen: return "'('";
    case TokKind::kRparen: return "')'";
    case TokKind::kArrow: return "'->'";
    case TokKind::kLeq: return "'<='";
    case TokKind::kAsterisk: return "'*'";
    case TokKind::kOctothorp: return "'#'";
    case TokKind::kPlus: return "'+'";
    case TokKind::kTilde: return "'~'";
    case TokKind::kQuestion: return "'?'";
    case TokKind::kDots: return "'...'";
    case TokKind::kName: return "name";
    case TokKind::kColonName: return "name:";
    case TokKind::kAttrName: return "attribute name";
    case TokKind::kIdent: return "identifier";
    case TokKind::kString: return "string";
    case TokKind::kInt: return "integer";
    case TokKind::kDecimal: return "number";
    case TokKind::kPad: return "padding pattern";
  }
  return "token";
}

HloLexer::HloLexer(absl::string_view text) : text_(text) {
  tok_ = Lex(0, &pos_, &error_);
}

void HloLexer::Next() {
  if (tok_.kind == TokKind::kEof || tok_.kind == TokKind::kError) return;
  tok_ = Lex(pos_, &pos_, &error_);
}

Token HloLexer::TokenAt(size_t offset) const {
  size_t next;
  std::string error;
  return Lex(offset, &next, &error);
}

Token HloLexer::PeekNext() const {
  if (tok_.kind == TokKind::kEof || tok_.kind == TokKind::kError) return tok_;
  size_t next;
  std::string error;
  return Lex(pos_, &next, &error);
}

bool HloLexer::ScanJsonDict(std::string* raw) {
  if (tok_.kind != TokKind::kLbrace) return false;
  const size_t end = MatchJsonDict(text_, tok_.begin);
  if (end == absl::string_view::npos) {
    error_ = "unbalanced '{' or unterminated string in a JSON-like dict";
    tok_.kind = TokKind::kError;
    return false;
  }
  *raw = std::string(text_.substr(tok_.begin, end - tok_.begin));
  tok_ = Lex(end, &pos_, &error_);
  return true;
}

std::pair<int, int> HloLexer::LineCol(size_t offset) const {
  if (offset > text_.size()) offset = text_.size();
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text_[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, static_cast<int>(offset - line_start) + 1};
}

bool HloLexer::LexNanPayload(size_t* pos, Token* t) const {
  size_t p = *pos;
  if (text_.substr(p, 3) != "(0x") return true;  // plain nan
  p += 3;
  uint64_t payload = 0;
  size_t digits = 0;
  while (p < text_.size() && absl::ascii_isxdigit(static_cast<unsigned char>(text_[p]))) {
    if (payload >> 60 != 0) return false;  // more than 64 bits
    const char c = absl::ascii_tolower(static_cast<unsigned char>(text_[p]));
    payload = payload * 16 + (IsDigit(c) ? c - '0' : c - 'a' + 10);
    ++p;
    ++digits;
  }
  if (digits == 0 || p >= text_.size() || text_[p] != ')' || payload == 0) {
    return false;
  }
  *pos = p + 1;
  t->has_nan_payload = true;
  t->nan_payload = payload;
  return true;
}

bool HloLexer::LexNumber(size_t start, size_t* pos, Token* t,
                         std::string* error) const {
  size_t p = start;
  const bool negative = text_[p] == '-';
  if (negative) ++p;
  // -inf, -nan, -nan(0x...)
  if (negative && text_.substr(p, 3) == "inf") {
    *pos = p + 3;
    t->kind = TokKind::kDecimal;
    t->decimal = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (negative && text_.substr(p, 3) == "nan") {
    size_t q = p + 3;
    if (!LexNanPayload(&q, t)) {
      *error = "malformed NaN payload";
      return false;
    }
    *pos = q;
    t->kind = TokKind::kDecimal;
    t->decimal = -std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  const size_t digits_begin = p;
  while (p < text_.size() && IsDigit(text_[p])) ++p;
  const size_t num_digits = p - digits_begin;
  // Padding (low_high[_interior] joined by 'x') and window (2x3) patterns.
  if (num_digits > 0 && p < text_.size() &&
      (text_[p] == '_' ||
       (text_[p] == 'x' && p + 1 < text_.size() && IsDigit(text_[p + 1])))) {
    while (p < text_.size() &&
           (IsDigit(text_[p]) || text_[p] == '_' || text_[p] == 'x' || text_[p] == '-')) {
      ++p;
    }
    *pos = p;
    t->kind = TokKind::kPad;
    return true;
  }
  bool is_float = false;
  if (p < text_.size() && text_[p] == '.' &&
      (num_digits > 0 || (p + 1 < text_.size() && IsDigit(text_[p + 1])))) {
    ++p;
    while (p < text_.size() && IsDigit(text_[p])) ++p;
    is_float = true;
  } else if (num_digits == 0) {
    *error = "expected a digit";
    return false;
  }
  if (p < text_.size() && (text_[p] == 'e' || text_[p] == 'E')) {
    size_t q = p + 1;
    if (q < text_.size() && (text_[q] == '+' || text_[q] == '-')) ++q;
    if (q < text_.size() && IsDigit(text_[q])) {
      while (q < text_.size() && IsDigit(text_[q])) ++q;
      p = q;
      is_float = true;
    }
  }
  *pos = p;
  if (is_float) {
    const std::string s(text_.substr(start, p - start));
    errno = 0;
    const double v = std::strtod(s.c_str(), nullptr);
    if (std::isinf(v)) {
      *error = "number is out of range for double";
      return false;
    }
    t->kind = TokKind::kDecimal;
    t->decimal = v;
    return true;
  }
  uint64_t magnitude = 0;
  for (size_t i = digits_begin; i < p; ++i) {
    const uint64_t d = text_[i] - '0';
    if (magnitude > (std::numeric_limits<uint64_t>::max() - d) / 10) {
      *error = "integer is out of range for 64 bits";
      return false;
    }
    magnitude = magnitude * 10 + d;
  }
  t->kind = TokKind::kInt;
  t->negative = negative;  // kept for -0, which is a float
  t->magnitude = magnitude;
  return true;
}

Token HloLexer::Lex(size_t pos, size_t* next, std::string* error) const {
  Token t;
  // Whitespace and comments.
  while (pos < text_.size()) {
    const char c = text_[pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos;
    } else if (c == '/' && pos + 1 < text_.size() && text_[pos + 1] == '*') {
      const size_t close = text_.find("*/", pos + 2);
      if (close == absl::string_view::npos) {
        t.kind = TokKind::kError;
        t.begin = pos;
        t.end = std::min(text_.size(), pos + 2);
        *next = t.end;
        *error = "unterminated /* comment";
        return t;
      }
      pos = close + 2;
    } else if (c == '/' && pos + 1 < text_.size() && text_[pos + 1] == '/') {
      while (pos < text_.size() && text_[pos] != '\n' && text_[pos] != '\r') ++pos;
    } else {
      break;
    }
  }
  t.begin = pos;
  size_t p = pos;
  auto finish = [&](TokKind kind, size_t end) {
    t.kind = kind;
    t.end = end;
    *next = end;
    return t;
  };
  auto fail = [&](size_t end, std::string message) {
    *error = std::move(message);
    return finish(TokKind::kError, std::max(end, std::min(pos + 1, text_.size())));
  };
  if (p >= text_.size()) return finish(TokKind::kEof, p);
  const char c = text_[p];
  if (IsIdentStart(c)) {
    // '-' belongs to names (get-tuple-element) but not to an arrow
    // (dim_labels=b01f_01io->b01f).
    while (p < text_.size() && IsIdentChar(text_[p]) &&
           !(text_[p] == '-' && p + 1 < text_.size() && text_[p + 1] == '>')) {
      ++p;
    }
    t.str = std::string(text_.substr(pos, p - pos));
    if (p < text_.size() && text_[p] == ':') return finish(TokKind::kColonName, p + 1);
    if (p < text_.size() && text_[p] == '=') return finish(TokKind::kAttrName, p + 1);
    if (t.str == "nan" && !LexNanPayload(&p, &t)) {
      return fail(p, "malformed NaN payload");
    }
    return finish(TokKind::kIdent, p);
  }
  if (IsDigit(c) || c == '-') {
    if (c == '-' && p + 1 < text_.size() && text_[p + 1] == '>') {
      return finish(TokKind::kArrow, p + 2);
    }
    size_t end;
    std::string message;
    if (!LexNumber(p, &end, &t, &message)) return fail(p + 1, message);
    return finish(t.kind, end);
  }
  switch (c) {
    case '%': {
      ++p;
      if (p >= text_.size() || !IsIdentStart(text_[p])) {
        return fail(p, "'%' must be followed by a name");
      }
      while (p < text_.size() && IsIdentChar(text_[p])) ++p;
      t.str = std::string(text_.substr(pos + 1, p - pos - 1));
      return finish(TokKind::kName, p);
    }
    case '"':
    case '\'': {
      ++p;
      while (p < text_.size() && text_[p] != c) {
        if (text_[p] == '\\') ++p;
        ++p;
      }
      if (p >= text_.size()) return fail(text_.size(), "unterminated string");
      std::string unescape_error;
      if (!absl::CUnescape(text_.substr(pos + 1, p - pos - 1), &t.str,
                           &unescape_error)) {
        return fail(p + 1, absl::StrCat("bad escape in string: ", unescape_error));
      }
      return finish(TokKind::kString, p + 1);
    }
    case '=': return finish(TokKind::kEqual, p + 1);
    case ',': return finish(TokKind::kComma, p + 1);
    case ':': return finish(TokKind::kColon, p + 1);
    case '[': return finish(TokKind::kLsquare, p + 1);
    case ']': return finish(TokKind::kRsquare, p + 1);
    case '{': return finish(TokKind::kLbrace, p + 1);
    case '}': return finish(TokKind::kRbrace, p + 1);
    case '(': return finish(TokKind::kLparen, p + 1);
    case ')': return finish(TokKind::kRparen, p + 1);
    case '*': return finish(TokKind::kAsterisk, p + 1);
    case '#': return finish(TokKind::kOctothorp, p + 1);
    case '+': return finish(TokKind::kPlus, p + 1);
    case '~': return finish(TokKind::kTilde, p + 1);
    case '?': return finish(TokKind::kQuestion, p + 1);
    case '<':
      if (p + 1 < text_.size() && text_[p + 1] == '=') return finish(TokKind::kLeq, p + 2);
      return fail(p + 1, "unexpected '<'");
    case '.':
      if (text_.substr(p, 3) == "...") return finish(TokKind::kDots, p + 3);
      return fail(p + 1, "unexpected '.'");
    case '\0':
      return fail(p + 1, "NUL byte in input");
    default:
      return fail(p + 1, "unexpected character");
  }
}

bool IsJsonDict(absl::string_view s) {
  return !s.empty() && s[0] == '{' && MatchJsonDict(s, 0) == s.size();
}

}  // namespace tpuoff::hlo
