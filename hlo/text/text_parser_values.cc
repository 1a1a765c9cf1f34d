// Scalars, lists, names, shapes (with layouts) and constant literals.
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "hlo/ir/float16.h"
#include "hlo/ir/status_macros.h"
#include "hlo/text/text_parser_impl.h"

namespace tpuoff::hlo::text_internal {
namespace {

// XLA element types we do not model: recognised so the error can say
// "unsupported" instead of "malformed".
constexpr absl::string_view kOtherXlaTypes[] = {
    "s1",     "s2",         "s4",        "u1",           "u2",          "u4",
    "c64",    "c128",       "f8e5m2",    "f8e4m3fn",     "f8e4m3b11fnuz",
    "f8e5m2fnuz", "f8e4m3fnuz", "f8e4m3", "f8e3m4",      "f4e2m1fn",    "f8e8m0fnu",
    "opaque", "buffer"};

bool IsOtherXlaType(absl::string_view name) {
  for (absl::string_view t : kOtherXlaTypes) {
    if (t == name) return true;
  }
  return false;
}

// Mantissa width and exponent mask of a floating-point element type.
struct FloatBits {
  int mantissa_bits;
  uint64_t exponent_mask;  // all-ones exponent, in place
  uint64_t sign_bit;
};

FloatBits BitsOf(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF16: return {10, 0x7c00u, 0x8000u};
    case PrimitiveType::kBF16: return {7, 0x7f80u, 0x8000u};
    case PrimitiveType::kF32: return {23, 0x7f800000u, 0x80000000u};
    default: return {52, 0x7ff0000000000000ull, 0x8000000000000000ull};
  }
}

void StoreBits(Literal* literal, int64_t index, uint64_t bits) {
  const int64_t width = ByteWidth(literal->shape().element_type());
  std::memcpy(literal->raw() + index * width, &bits, width);  // little-endian
}

}  // namespace

absl::Status TextParser::ParseInt64(int64_t* value) {
  if (!At(TokKind::kInt)) return TokenError("expected an integer");
  const Token& t = lexer_.tok();
  const uint64_t limit =
      t.negative ? uint64_t{1} << 63 : std::numeric_limits<int64_t>::max();
  if (t.magnitude > limit) return TokenError("integer is out of range for int64");
  *value = t.negative ? static_cast<int64_t>(0 - t.magnitude)
                      : static_cast<int64_t>(t.magnitude);
  lexer_.Next();
  return absl::OkStatus();
}

absl::Status TextParser::ParseDimValue(int64_t* value) {
  const size_t loc = Loc();
  RETURN_IF_ERROR(ParseInt64(value));
  if (*value > kMaxDimValue || *value < -kMaxDimValue) {
    return ErrorAt(loc, absl::StrCat("value ", *value, " is too large (limit 2^40)"));
  }
  return absl::OkStatus();
}

absl::Status TextParser::ParseBool(bool* value) {
  if (AtIdent("true") || AtIdent("false")) {
    *value = lexer_.tok().str == "true";
    lexer_.Next();
    return absl::OkStatus();
  }
  return TokenError("expected true or false");
}

absl::Status TextParser::ParseString(std::string* value) {
  if (!At(TokKind::kString)) return TokenError("expected a quoted string");
  *value = lexer_.tok().str;
  lexer_.Next();
  return absl::OkStatus();
}

absl::Status TextParser::ParseDouble(double* value, bool* has_payload,
                                     uint64_t* payload) {
  const Token& t = lexer_.tok();
  *has_payload = false;
  if (At(TokKind::kDecimal) || AtIdent("nan")) {
    *value = At(TokKind::kDecimal) ? t.decimal : std::numeric_limits<double>::quiet_NaN();
    *has_payload = t.has_nan_payload;
    *payload = t.nan_payload;
  } else if (At(TokKind::kInt)) {
    *value = static_cast<double>(t.magnitude) * (t.negative ? -1.0 : 1.0);
  } else if (AtIdent("inf")) {
    *value = std::numeric_limits<double>::infinity();
  } else {
    return TokenError("expected a number");
  }
  lexer_.Next();
  return absl::OkStatus();
}

absl::Status TextParser::ParseDimList(std::vector<int64_t>* out, TokKind open,
                                      TokKind close, TokKind delim) {
  RETURN_IF_ERROR(Expect(open, "to start a list"));
  if (Eat(close)) return absl::OkStatus();
  do {
    int64_t v = 0;
    RETURN_IF_ERROR(ParseDimValue(&v));
    out->push_back(v);
  } while (Eat(delim));
  return Expect(close, "to end a list");
}

absl::Status TextParser::ParseDimListList(std::vector<std::vector<int64_t>>* out) {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start a list of lists"));
  if (Eat(TokKind::kRbrace)) return absl::OkStatus();
  do {
    out->emplace_back();
    RETURN_IF_ERROR(ParseDimList(&out->back()));
  } while (Eat(TokKind::kComma));
  return Expect(TokKind::kRbrace, "to end a list of lists");
}

absl::Status TextParser::ParseName(std::string* name, size_t* loc) {
  if (!At(TokKind::kName) && !At(TokKind::kIdent)) return TokenError("expected a name");
  *loc = Loc();
  *name = lexer_.tok().str;
  lexer_.Next();
  return absl::OkStatus();
}

bool TextParser::AtShape() const {
  if (At(TokKind::kLparen)) return true;
  return At(TokKind::kIdent) && lexer_.PeekNext().kind == TokKind::kLsquare;
}

absl::Status TextParser::ParseShape(Shape* shape, int depth) {
  if (depth > options_.max_nesting_depth) {
    return TokenError("shape nesting is too deep");
  }
  if (Eat(TokKind::kLparen)) {
    std::vector<Shape> elements;
    if (!At(TokKind::kRparen)) {
      do {
        elements.emplace_back();
        RETURN_IF_ERROR(ParseShape(&elements.back(), depth + 1));
      } while (Eat(TokKind::kComma));
    }
    RETURN_IF_ERROR(Expect(TokKind::kRparen, "to end a tuple shape"));
    *shape = Shape::Tuple(std::move(elements));
    return absl::OkStatus();
  }
  if (!At(TokKind::kIdent)) return TokenError("expected a shape");
  const size_t type_loc = Loc();
  const std::string type_name = lexer_.tok().str;
  auto type = PrimitiveTypeFromName(type_name);
  if (!type.ok()) {
    if (IsOtherXlaType(type_name)) {
      return Unsupported(type_loc, absl::StrCat("element type ", type_name,
                                                " is not supported"));
    }
    return TokenError("expected a shape (element type)");
  }
  lexer_.Next();
  RETURN_IF_ERROR(Expect(TokKind::kLsquare, "after the element type"));
  std::vector<int64_t> dims;
  if (!At(TokKind::kRsquare)) {
    do {
      if (At(TokKind::kLeq) || At(TokKind::kQuestion)) {
        return Unsupported(Loc(), "dynamic dimensions are not supported");
      }
      int64_t d = 0;
      const size_t loc = Loc();
      RETURN_IF_ERROR(ParseDimValue(&d));
      if (d < 0) return ErrorAt(loc, "dimension sizes must be >= 0");
      dims.push_back(d);
      if (static_cast<int64_t>(dims.size()) > kMaxRank) {
        return ErrorAt(loc, absl::StrCat("rank is larger than ", kMaxRank));
      }
    } while (Eat(TokKind::kComma));
  }
  RETURN_IF_ERROR(Expect(TokKind::kRsquare, "to end the dimensions"));
  if (*type == PrimitiveType::kToken) {
    if (!dims.empty()) return ErrorAt(type_loc, "token[] takes no dimensions");
    *shape = Shape::Token();
    return absl::OkStatus();
  }
  // Element count against the byte limit, without overflowing.
  const int64_t width = ByteWidth(*type);
  const int64_t max_elements = options_.max_array_bytes / width;
  // Zero-sized dimensions are skipped so that no product of dimensions, in
  // any order, can overflow (f32[2^40,2^40,0] is rejected too).
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d == 0) continue;
    if (elements > max_elements / d) {
      return ErrorAt(type_loc, absl::StrCat("shape is larger than ",
                                            options_.max_array_bytes, " bytes"));
    }
    elements *= d;
  }
  *shape = Shape(*type, dims);
  // `{` starts a layout only when followed by an integer, ':' or '}' (a
  // scalar's empty layout `f32[]{}`, as XLA prints it; on an array the rank
  // check below rejects it); otherwise it opens a computation body, as in
  // `-> f32[2] {`.
  if (At(TokKind::kLbrace)) {
    const TokKind next = lexer_.PeekNext().kind;
    if (next != TokKind::kInt && next != TokKind::kColon && next != TokKind::kRbrace) {
      return absl::OkStatus();
    }
    const size_t layout_loc = Loc();
    lexer_.Next();
    std::vector<int64_t> minor_to_major;
    if (At(TokKind::kInt)) {
      do {
        int64_t d = 0;
        RETURN_IF_ERROR(ParseDimValue(&d));
        minor_to_major.push_back(d);
      } while (Eat(TokKind::kComma));
    }
    int64_t memory_space = 0;
    if (Eat(TokKind::kColon)) {
      // Tiling, element size...: they place data in memory but do not
      // change values, so they are parsed and dropped; the memory space
      // S(n) is kept (Shape::memory_space).
      while (At(TokKind::kIdent) || At(TokKind::kOctothorp) || At(TokKind::kAsterisk)) {
        const std::string item = At(TokKind::kIdent) ? lexer_.tok().str : "";
        const size_t item_loc = Loc();
        if (item == "D" || item == "SC" || item == "P") {
          return Unsupported(item_loc, absl::StrCat("layout item ", item,
                                                    "(...) is not supported"));
        }
        if (!At(TokKind::kOctothorp) && !At(TokKind::kAsterisk) && item != "T" &&
            item != "L" && item != "E" && item != "S" && item != "M") {
          return TokenError("unknown layout item");
        }
        lexer_.Next();
        int groups = 0;
        if (item == "S" && At(TokKind::kLparen) && lexer_.PeekNext().kind == TokKind::kInt) {
          lexer_.Next();
          RETURN_IF_ERROR(ParseDimValue(&memory_space));
          RETURN_IF_ERROR(Expect(TokKind::kRparen, "to end a layout item"));
          continue;
        }
        while (Eat(TokKind::kLparen)) {
          ++groups;
          while (At(TokKind::kInt) || At(TokKind::kAsterisk) || At(TokKind::kComma) ||
                 At(TokKind::kIdent)) {
            lexer_.Next();
          }
          RETURN_IF_ERROR(Expect(TokKind::kRparen, "to end a layout item"));
          if (item != "T") break;  // only tiles repeat their parentheses
        }
        if (groups == 0) return TokenError("expected '(' after a layout item");
      }
    }
    RETURN_IF_ERROR(Expect(TokKind::kRbrace, "to end the layout"));
    if (static_cast<int64_t>(minor_to_major.size()) != shape->rank()) {
      return ErrorAt(layout_loc,
                     absl::StrCat("layout has ", minor_to_major.size(),
                                  " entries for a shape of rank ", shape->rank()));
    }
    std::vector<bool> seen(shape->rank(), false);
    for (int64_t d : minor_to_major) {
      if (d < 0 || d >= shape->rank() || seen[d]) {
        return ErrorAt(layout_loc, "layout must be a permutation of the dimensions");
      }
      seen[d] = true;
    }
    shape->set_minor_to_major(std::move(minor_to_major));
    shape->set_memory_space(memory_space);
  }
  return absl::OkStatus();
}

namespace {

// Range of a value for integer element types, from the token's sign and
// magnitude.
bool IntFits(PrimitiveType type, bool negative, uint64_t magnitude) {
  if (magnitude == 0) return true;  // "-0" too
  if (type == PrimitiveType::kPred) return !negative && magnitude <= 1;
  const int bits = static_cast<int>(ByteWidth(type)) * 8;
  if (IsUnsignedInteger(type)) {
    return !negative && (bits == 64 || magnitude <= (uint64_t{1} << bits) - 1);
  }
  const uint64_t max_positive = (uint64_t{1} << (bits - 1)) - 1;
  return negative ? magnitude <= max_positive + 1 : magnitude <= max_positive;
}

}  // namespace

absl::Status TextParser::ParseLiteral(const Shape& shape, std::optional<Literal>* literal) {
  if (shape.IsTuple()) return Unsupported(Loc(), "tuple-shaped constants are not supported");
  if (!shape.IsArray()) return TokenError("a constant must have an array shape");
  // XLA elides large constants as `{...}` in its dumps: the values are
  // unknown (the constant has no literal); `run` refuses such modules.
  if (At(TokKind::kLbrace) && lexer_.PeekNext().kind == TokKind::kDots) {
    lexer_.Next();
    lexer_.Next();
    literal->reset();
    return Expect(TokKind::kRbrace, "to end an elided constant {...}");
  }
  const int64_t elements = shape.num_elements();
  const int64_t remaining = static_cast<int64_t>(lexer_.source().size() - Loc());
  if (elements > options_.max_constant_elements || elements > remaining) {
    return TokenError(absl::StrCat("constant of ", elements,
                                   " elements is larger than its text or the limit of ",
                                   options_.max_constant_elements));
  }
  literal->emplace(shape);
  Literal* lit = &**literal;
  const PrimitiveType type = shape.element_type();
  int64_t next_index = 0;

  // One real floating-point value of type `ft` as its bits.
  auto parse_float = [&](PrimitiveType ft, uint64_t* bits) -> absl::Status {
    double v = 0;
    bool has_payload = false;
    uint64_t payload = 0;
    const size_t loc = Loc();
    RETURN_IF_ERROR(ParseDouble(&v, &has_payload, &payload));
    const FloatBits fb = BitsOf(ft);
    if (std::isnan(v)) {
      const uint64_t mantissa_mask = (uint64_t{1} << fb.mantissa_bits) - 1;
      if (!has_payload) payload = uint64_t{1} << (fb.mantissa_bits - 1);  // quiet
      if (payload == 0 || payload > mantissa_mask) {
        return ErrorAt(loc, absl::StrCat("NaN payload does not fit ", PrimitiveTypeName(ft)));
      }
      *bits = (std::signbit(v) ? fb.sign_bit : 0) | fb.exponent_mask | payload;
      return absl::OkStatus();
    }
    bool overflow = false;
    switch (ft) {
      case PrimitiveType::kF64: {
        std::memcpy(bits, &v, 8);
        break;
      }
      case PrimitiveType::kF32: {
        const float f = static_cast<float>(v);
        overflow = std::isinf(f) && !std::isinf(v);
        uint32_t w;
        std::memcpy(&w, &f, 4);
        *bits = w;
        break;
      }
      case PrimitiveType::kBF16:
      case PrimitiveType::kF16: {
        const float f = static_cast<float>(v);
        const uint16_t h = ft == PrimitiveType::kBF16 ? F32ToBf16(f) : F32ToF16(f);
        const float back = ft == PrimitiveType::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
        overflow = std::isinf(back) && !std::isinf(v);
        *bits = h;
        break;
      }
      default:
        return ErrorAt(loc, "unsupported element type in a constant");
    }
    if (overflow) {
      return ErrorAt(loc, absl::StrCat("value is out of range for ", PrimitiveTypeName(ft)));
    }
    return absl::OkStatus();
  };

  auto set_value = [&]() -> absl::Status {
    const Token& t = lexer_.tok();
    if (next_index >= elements) return TokenError("too many elements in the constant");
    if (type == PrimitiveType::kPred && (AtIdent("true") || AtIdent("false"))) {
      StoreBits(lit, next_index++, t.str == "true" ? 1 : 0);
      lexer_.Next();
      return absl::OkStatus();
    }
    if (IsComplex(type)) {  // (re, im)
      const PrimitiveType ct = ComplexComponentType(type);
      const int64_t half = ByteWidth(ct);
      uint64_t re = 0, im = 0;
      RETURN_IF_ERROR(Expect(TokKind::kLparen, "to start a complex value (re, im)"));
      RETURN_IF_ERROR(parse_float(ct, &re));
      RETURN_IF_ERROR(Expect(TokKind::kComma, "between the parts of a complex value"));
      RETURN_IF_ERROR(parse_float(ct, &im));
      RETURN_IF_ERROR(Expect(TokKind::kRparen, "to end a complex value"));
      uint8_t* dst = lit->raw() + next_index++ * 2 * half;
      std::memcpy(dst, &re, half);
      std::memcpy(dst + half, &im, half);
      return absl::OkStatus();
    }
    if (!IsFloatingPoint(type)) {
      if (!At(TokKind::kInt)) {
        return TokenError(absl::StrCat("expected an integer for ", PrimitiveTypeName(type)));
      }
      if (!IntFits(type, t.negative, t.magnitude)) {
        return TokenError(absl::StrCat("value is out of range for ", PrimitiveTypeName(type)));
      }
      const uint64_t bits = t.negative ? 0 - t.magnitude : t.magnitude;
      StoreBits(lit, next_index++, bits);
      lexer_.Next();
      return absl::OkStatus();
    }
    uint64_t bits = 0;
    RETURN_IF_ERROR(parse_float(type, &bits));
    StoreBits(lit, next_index++, bits);
    return absl::OkStatus();
  };

  if (At(TokKind::kDots)) {
    return TokenError("an elided constant is written {...}");
  }
  const int64_t rank = shape.rank();
  if (rank == 0) return set_value();
  if (!At(TokKind::kLbrace)) return TokenError("expected '{' to start an array constant");
  // Nested braces, one level per dimension; `seen[d]` counts the entries of
  // the innermost open brace at level d.
  std::vector<int64_t> seen(rank, 0);
  int64_t level = 0;
  do {
    switch (lexer_.kind()) {
      case TokKind::kLbrace:
        if (level >= rank) return TokenError("constant is nested deeper than its rank");
        if (level > 0 && ++seen[level - 1] > shape.dimensions(level - 1)) {
          return TokenError(absl::StrCat("expected ", shape.dimensions(level - 1),
                                         " entries in dimension ", level - 1));
        }
        ++level;
        lexer_.Next();
        break;
      case TokKind::kRbrace:
        if (level == 0) return TokenError("unexpected '}'");
        --level;
        if (seen[level] != shape.dimensions(level)) {
          return TokenError(absl::StrCat("expected ", shape.dimensions(level),
                                         " entries in dimension ", level, ", got ",
                                         seen[level]));
        }
        seen[level] = 0;
        lexer_.Next();
        break;
      case TokKind::kComma:
        lexer_.Next();
        break;
      case TokKind::kDots:
        return TokenError("only a whole constant may be elided, as {...}");
      case TokKind::kLparen:  // a complex value
      case TokKind::kInt:
      case TokKind::kDecimal:
      case TokKind::kIdent:
        if (level != rank) {
          return TokenError(absl::StrCat("values must be nested ", rank, " braces deep"));
        }
        if (++seen[rank - 1] > shape.dimensions(rank - 1)) {
          return TokenError(absl::StrCat("expected ", shape.dimensions(rank - 1),
                                         " entries in dimension ", rank - 1));
        }
        RETURN_IF_ERROR(set_value());
        break;
      default:
        return TokenError("unexpected token in a constant");
    }
  } while (level > 0);
  if (next_index != elements) {
    return TokenError(absl::StrCat("constant has ", next_index, " values, expected ",
                                   elements));
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::hlo::text_internal
