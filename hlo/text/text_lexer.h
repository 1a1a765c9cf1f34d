// Tokenizer for XLA's HLO text syntax (modelled on xla/hlo/parser/hlo_lexer):
// context-free except for JSON-like `{...}` values, which the parser asks
// for explicitly. Never fails hard: bad input yields a kError token whose
// message says why.
#ifndef TPUOFF_HLO_TEXT_TEXT_LEXER_H_
#define TPUOFF_HLO_TEXT_TEXT_LEXER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace tpuoff::hlo {

enum class TokKind {
  kEof,
  kError,
  kEqual,      // =
  kComma,      // ,
  kColon,      // :
  kLsquare,    // [
  kRsquare,    // ]
  kLbrace,     // {
  kRbrace,     // }
  kLparen,     // (
  kRparen,     // )
  kArrow,      // ->
  kLeq,        // <=
  kAsterisk,   // *
  kOctothorp,  // #
  kPlus,       // +
  kTilde,      // ~
  kQuestion,   // ?
  kDots,       // ...
  kName,       // %name                 (str = name without '%')
  kColonName,  // name:  (':' adjacent) (str = name)
  kAttrName,   // name=  ('=' adjacent) (str = name)
  kIdent,      // identifiers, keywords, opcodes, element types, inf, nan
  kString,     // "..." or '...'        (str = unescaped contents)
  kInt,        // -?[0-9]+
  kDecimal,    // floats, -inf, -nan
  kPad,        // 0_0x1_2_0 (padding), also 2x3 (window sizes)
};

absl::string_view TokKindName(TokKind kind);

struct Token {
  TokKind kind = TokKind::kEof;
  size_t begin = 0;  // byte offsets of the token's text
  size_t end = 0;
  std::string str;  // see TokKind
  // kInt: sign and magnitude (any value in [-2^64+1, 2^64-1] lexes).
  bool negative = false;
  uint64_t magnitude = 0;
  // kDecimal: the value (inf, nan included). A NaN spelt `nan(0x...)` keeps
  // its payload, as XLA prints payloads of non-default NaNs; kIdent "nan"
  // may carry one too.
  double decimal = 0;
  bool has_nan_payload = false;
  uint64_t nan_payload = 0;
};

class HloLexer {
 public:
  explicit HloLexer(absl::string_view text);

  const Token& tok() const { return tok_; }
  TokKind kind() const { return tok_.kind; }
  // Advances to the next token.
  void Next();
  // The token after the current one, without consuming anything.
  Token PeekNext() const;
  // The token starting at (or after whitespace from) `offset`; for messages.
  Token TokenAt(size_t offset) const;

  // The current token must be '{': scans a JSON-like dict up to its matching
  // '}' (quoted strings may contain braces), stores the raw text and
  // advances past it. False (with error()) if unbalanced.
  bool ScanJsonDict(std::string* raw);

  // Why the last kError token was produced.
  const std::string& error() const { return error_; }

  absl::string_view source() const { return text_; }
  absl::string_view TokenText(const Token& t) const {
    return text_.substr(t.begin, t.end - t.begin);
  }
  // 1-based line and column of a byte offset.
  std::pair<int, int> LineCol(size_t offset) const;

 private:
  // Lexes one token starting at `pos`; sets `*next` past it.
  Token Lex(size_t pos, size_t* next, std::string* error) const;
  bool LexNumber(size_t start, size_t* pos, Token* t, std::string* error) const;
  bool LexNanPayload(size_t* pos, Token* t) const;

  absl::string_view text_;
  Token tok_;
  size_t pos_ = 0;  // offset after tok_
  std::string error_;
};

// Whether `s` is exactly one balanced JSON-like dict (no surrounding text).
bool IsJsonDict(absl::string_view s);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_TEXT_TEXT_LEXER_H_
