#include "tools/io/npy.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/float16.h"
#include "hlo/ir/status_macros.h"
#include "tools/io/file_util.h"

namespace tpuoff::tools {
namespace {

static_assert(std::endian::native == std::endian::little,
              ".npy I/O assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// Far above any real array; keeps products of dims from overflowing.
constexpr int64_t kMaxDim = int64_t{1} << 40;

using hlo::PrimitiveType;

// A cursor over the header's Python dict literal.
class HeaderParser {
 public:
  HeaderParser(absl::string_view text, absl::string_view filename)
      : text_(text), filename_(filename) {}

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        filename_, ": malformed .npy header: ", what, " at header offset ",
        pos_, " in \"", absl::CEscape(text_.substr(0, 120)), "\""));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(text_[pos_])) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }
  absl::StatusOr<std::string> String() {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Error("expected a quoted string");
    }
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return Error("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  absl::StatusOr<bool> Bool() {
    SkipSpace();
    for (auto [word, value] : {std::pair{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        return value;
      }
    }
    return Error("expected True or False");
  }
  absl::StatusOr<int64_t> Dim() {
    SkipSpace();
    int64_t v = 0;
    size_t start = pos_;
    while (pos_ < text_.size() && absl::ascii_isdigit(text_[pos_])) {
      v = v * 10 + (text_[pos_++] - '0');
      if (v > kMaxDim) return Error("dimension too large");
    }
    if (pos_ == start) return Error("expected a non-negative integer");
    // Python 2 era writers append 'L' to longs.
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
    return v;
  }
  absl::StatusOr<std::vector<int64_t>> Tuple() {
    if (!Consume('(')) return Error("expected '(' to start the shape");
    std::vector<int64_t> dims;
    while (!Consume(')')) {
      if (dims.size() >= 64) return Error("too many dimensions");
      ASSIGN_OR_RETURN(int64_t d, Dim());
      dims.push_back(d);
      if (!Consume(',') && !Peek(')')) return Error("expected ',' or ')'");
    }
    return dims;
  }

 private:
  absl::string_view text_;
  absl::string_view filename_;
  size_t pos_ = 0;
};

struct DtypeInfo {
  NpyDtype dtype;
  absl::string_view code;  // descr without the byte order
  absl::string_view name;
  int64_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {NpyDtype::kBool, "b1", "bool", 1},          {NpyDtype::kInt8, "i1", "int8", 1},
    {NpyDtype::kInt16, "i2", "int16", 2},        {NpyDtype::kInt32, "i4", "int32", 4},
    {NpyDtype::kInt64, "i8", "int64", 8},        {NpyDtype::kUint8, "u1", "uint8", 1},
    {NpyDtype::kUint16, "u2", "uint16", 2},      {NpyDtype::kUint32, "u4", "uint32", 4},
    {NpyDtype::kUint64, "u8", "uint64", 8},      {NpyDtype::kFloat16, "f2", "float16", 2},
    {NpyDtype::kFloat32, "f4", "float32", 4},    {NpyDtype::kFloat64, "f8", "float64", 8},
    // ml_dtypes' bfloat16: numpy has no name for it, np.save writes 2-byte void.
    {NpyDtype::kBfloat16, "V2", "bfloat16", 2},
    {NpyDtype::kComplex64, "c8", "complex64", 8}, {NpyDtype::kComplex128, "c16", "complex128", 16},
};

const DtypeInfo& Info(NpyDtype d) {
  for (const DtypeInfo& i : kDtypes) {
    if (i.dtype == d) return i;
  }
  return kDtypes[0];
}

absl::StatusOr<NpyDtype> ParseDescr(const std::string& descr,
                                    absl::string_view filename) {
  auto unsupported = [&](absl::string_view why) {
    return absl::UnimplementedError(absl::StrCat(
        filename, ": unsupported .npy dtype '", descr, "' (", why,
        "); supported: bool, int8..int64, uint8..uint64, float16, float32, float64, "
        "complex64, complex128, bfloat16 (ml_dtypes), little-endian"));
  };
  if (descr.size() < 2) return unsupported("unknown dtype");
  const char order = descr[0];
  const std::string code = descr.substr(1);
  if (code[0] == 'O') return unsupported("object arrays cannot be read");
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    return unsupported("unknown byte order");
  }
  for (const DtypeInfo& i : kDtypes) {
    if (i.code != code) continue;
    if (i.size > 1 && order == '>') return unsupported("big-endian data");
    if (i.size > 1 && order == '|' && i.dtype != NpyDtype::kBfloat16) {
      return unsupported("multi-byte type without byte order");
    }
    return i.dtype;
  }
  return unsupported("dtype not supported");
}

std::string ShapeTuple(const std::vector<int64_t>& dims) {
  if (dims.size() == 1) return absl::StrCat("(", dims[0], ",)");
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

template <typename T>
T LoadAt(const char* base, int64_t i) {
  T v;
  std::memcpy(&v, base + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void StoreAt(uint8_t* base, int64_t i, T v) {
  std::memcpy(base + i * sizeof(T), &v, sizeof(T));
}

double LoadFloat(NpyDtype dtype, const char* base, int64_t i) {
  switch (dtype) {
    case NpyDtype::kFloat16: return hlo::F16ToF32(LoadAt<uint16_t>(base, i));
    case NpyDtype::kBfloat16: return hlo::Bf16ToF32(LoadAt<uint16_t>(base, i));
    case NpyDtype::kFloat32: return LoadAt<float>(base, i);
    default: return LoadAt<double>(base, i);
  }
}

// Integers as int64; uint64 values above INT64_MAX are reported by the
// caller (`too_big`).
int64_t LoadInt(NpyDtype dtype, const char* base, int64_t i, bool* too_big) {
  switch (dtype) {
    case NpyDtype::kInt8: return LoadAt<int8_t>(base, i);
    case NpyDtype::kInt16: return LoadAt<int16_t>(base, i);
    case NpyDtype::kInt32: return LoadAt<int32_t>(base, i);
    case NpyDtype::kInt64: return LoadAt<int64_t>(base, i);
    case NpyDtype::kUint16: return LoadAt<uint16_t>(base, i);
    case NpyDtype::kUint32: return LoadAt<uint32_t>(base, i);
    case NpyDtype::kUint64: {
      const uint64_t v = LoadAt<uint64_t>(base, i);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) *too_big = true;
      return static_cast<int64_t>(v);
    }
    default: return LoadAt<uint8_t>(base, i);
  }
}

bool IsFloatDtype(NpyDtype d) {
  return d == NpyDtype::kFloat16 || d == NpyDtype::kFloat32 || d == NpyDtype::kFloat64 ||
         d == NpyDtype::kBfloat16;
}
bool IsIntDtype(NpyDtype d) {
  return d == NpyDtype::kInt8 || d == NpyDtype::kInt16 || d == NpyDtype::kInt32 ||
         d == NpyDtype::kInt64 || d == NpyDtype::kUint8 || d == NpyDtype::kUint16 ||
         d == NpyDtype::kUint32 || d == NpyDtype::kUint64;
}

// The .npy dtype holding exactly the storage of `t`, if any.
std::optional<NpyDtype> NativeDtype(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kPred: return NpyDtype::kBool;
    case PrimitiveType::kS8: return NpyDtype::kInt8;
    case PrimitiveType::kS16: return NpyDtype::kInt16;
    case PrimitiveType::kS32: return NpyDtype::kInt32;
    case PrimitiveType::kS64: return NpyDtype::kInt64;
    case PrimitiveType::kU8: return NpyDtype::kUint8;
    case PrimitiveType::kU16: return NpyDtype::kUint16;
    case PrimitiveType::kU32: return NpyDtype::kUint32;
    case PrimitiveType::kU64: return NpyDtype::kUint64;
    case PrimitiveType::kF16: return NpyDtype::kFloat16;
    case PrimitiveType::kBF16: return NpyDtype::kBfloat16;
    case PrimitiveType::kF32: return NpyDtype::kFloat32;
    case PrimitiveType::kF64: return NpyDtype::kFloat64;
    case PrimitiveType::kC64: return NpyDtype::kComplex64;
    case PrimitiveType::kC128: return NpyDtype::kComplex128;
    default: return std::nullopt;
  }
}

// Inclusive value range of an integer element type, clipped to int64 (every
// source value is an int64, so u64's upper half cannot occur).
std::pair<int64_t, int64_t> IntRange(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kS8:
      return {INT8_MIN, INT8_MAX};
    case PrimitiveType::kS16:
      return {INT16_MIN, INT16_MAX};
    case PrimitiveType::kS32:
      return {INT32_MIN, INT32_MAX};
    case PrimitiveType::kU8:
      return {0, UINT8_MAX};
    case PrimitiveType::kU16:
      return {0, UINT16_MAX};
    case PrimitiveType::kU32:
      return {0, UINT32_MAX};
    case PrimitiveType::kU64:
      return {0, std::numeric_limits<int64_t>::max()};
    default:
      return {std::numeric_limits<int64_t>::min(),
              std::numeric_limits<int64_t>::max()};
  }
}

void StoreInt(PrimitiveType t, uint8_t* base, int64_t i, int64_t v) {
  switch (ByteWidth(t)) {
    case 1:
      StoreAt<uint8_t>(base, i, static_cast<uint8_t>(v));
      break;
    case 2:
      StoreAt<uint16_t>(base, i, static_cast<uint16_t>(v));
      break;
    case 4:
      StoreAt<uint32_t>(base, i, static_cast<uint32_t>(v));
      break;
    default:
      StoreAt<uint64_t>(base, i, static_cast<uint64_t>(v));
      break;
  }
}

}  // namespace

absl::string_view NpyDtypeName(NpyDtype dtype) { return Info(dtype).name; }

int64_t NpyItemSize(NpyDtype dtype) { return Info(dtype).size; }

int64_t NpyArray::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

std::string NpyArray::ShapeString() const { return ShapeTuple(shape_); }

absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, int64_t file_size,
                                         absl::string_view filename) {
  auto malformed = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat(filename, ": not a valid .npy file: ", what));
  };
  if (bytes.size() < kMagicLen + 2 ||
      std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) {
    return malformed("missing the \\x93NUMPY magic");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  const int minor = static_cast<uint8_t>(bytes[7]);
  size_t len_bytes;
  if (major == 1) {
    len_bytes = 2;
  } else if (major == 2 || major == 3) {
    len_bytes = 4;
  } else {
    return absl::UnimplementedError(absl::StrCat(
        filename, ": unsupported .npy format version ", major, ".", minor,
        " (supported: 1.0, 2.0, 3.0)"));
  }
  const size_t prefix = kMagicLen + 2 + len_bytes;
  if (bytes.size() < prefix) return malformed("truncated header length");
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) {
    header_len |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[8 + i]))
                  << (8 * i);
  }
  if (header_len > kMaxNpyHeaderBytes) {
    return malformed(absl::StrCat("header claims ", header_len, " bytes (the limit is ",
                                  kMaxNpyHeaderBytes, ")"));
  }
  if (header_len > bytes.size() - prefix) {
    return malformed(absl::StrCat("header claims ", header_len,
                                  " bytes but the file has only ",
                                  bytes.size() - prefix, " after the prefix"));
  }
  absl::string_view header = bytes.substr(prefix, header_len);

  HeaderParser p(header, filename);
  if (!p.Consume('{')) return p.Error("expected '{'");
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  while (!p.Consume('}')) {
    ASSIGN_OR_RETURN(std::string key, p.String());
    if (!p.Consume(':')) return p.Error("expected ':'");
    if (key == "descr" && !descr) {
      if (p.Peek('[')) {
        return absl::UnimplementedError(absl::StrCat(
            filename, ": structured .npy dtypes are not supported"));
      }
      ASSIGN_OR_RETURN(descr, p.String());
    } else if (key == "fortran_order" && !fortran) {
      ASSIGN_OR_RETURN(fortran, p.Bool());
    } else if (key == "shape" && !shape) {
      ASSIGN_OR_RETURN(shape, p.Tuple());
    } else {
      return p.Error(absl::StrCat("unexpected or repeated key '", key, "'"));
    }
    if (!p.Consume(',') && !p.Peek('}')) return p.Error("expected ',' or '}'");
  }
  if (!p.AtEnd()) return p.Error("trailing characters after '}'");
  if (!descr || !fortran || !shape) {
    return p.Error("missing one of 'descr', 'fortran_order', 'shape'");
  }

  NpyHeader h;
  ASSIGN_OR_RETURN(h.dtype, ParseDescr(*descr, filename));
  h.shape = std::move(*shape);
  // Exact size check with overflow guards: a hostile header cannot make us
  // trust more (or fewer) bytes than are present.
  h.data_offset = static_cast<int64_t>(prefix + header_len);
  const uint64_t available = static_cast<uint64_t>(std::max<int64_t>(file_size - h.data_offset, 0));
  uint64_t count = 1;
  bool overflow = false;
  for (int64_t d : h.shape) {
    if (d != 0 && count > std::numeric_limits<uint64_t>::max() / 16 /
                              static_cast<uint64_t>(d)) {
      overflow = true;
    }
    count *= static_cast<uint64_t>(d);
  }
  const uint64_t item = NpyItemSize(h.dtype);
  if (overflow || count * item != available) {
    return malformed(absl::StrCat(
        "shape ", ShapeTuple(h.shape), " of ", NpyDtypeName(h.dtype),
        overflow ? " is impossibly large"
                 : absl::StrCat(" needs ", count * item, " data bytes"),
        " but the file holds ", available));
  }
  if (*fortran && h.shape.size() > 1) {
    // Fortran order is only distinguishable from C order at rank >= 2; numpy
    // writes fortran_order: False for 1-D arrays anyway.
    return absl::UnimplementedError(absl::StrCat(
        filename, ": fortran_order arrays are not supported (save with "
                  "np.ascontiguousarray)"));
  }
  h.data_bytes = static_cast<int64_t>(count * item);
  return h;
}

absl::StatusOr<NpyArray> ParseNpy(std::string bytes,
                                  absl::string_view filename) {
  ASSIGN_OR_RETURN(NpyHeader h,
                   ParseNpyHeader(bytes, static_cast<int64_t>(bytes.size()), filename));
  NpyArray array;
  array.dtype_ = h.dtype;
  array.shape_ = std::move(h.shape);
  array.data_offset_ = static_cast<size_t>(h.data_offset);
  array.bytes_ = std::move(bytes);
  return array;
}

namespace {

// The header of an open .npy file, read and checked against the file's size
// before any of its data is.
absl::StatusOr<NpyHeader> ReadHeader(const RegularFile& f) {
  char lead[kMagicLen + 2 + 4] = {};
  const int64_t lead_bytes = std::min<int64_t>(f.size(), sizeof(lead));
  RETURN_IF_ERROR(f.ReadAt(0, lead, lead_bytes));
  absl::string_view view(lead, static_cast<size_t>(lead_bytes));
  // The prefix tells how long the header is; read exactly that much more.
  int64_t header_len = 0;
  if (lead_bytes == static_cast<int64_t>(sizeof(lead)) &&
      std::memcmp(lead, kMagic, kMagicLen) == 0) {
    const int major = static_cast<uint8_t>(lead[6]);
    const size_t len_bytes = major == 1 ? 2 : 4;
    for (size_t i = 0; i < len_bytes; ++i) {
      header_len |= static_cast<int64_t>(static_cast<uint8_t>(lead[8 + i])) << (8 * i);
    }
    header_len += static_cast<int64_t>(8 + len_bytes);
  }
  if (header_len <= lead_bytes || header_len > kMaxNpyHeaderBytes + 12) {
    return ParseNpyHeader(view, f.size(), f.path());  // reports what is wrong
  }
  std::string head(static_cast<size_t>(std::min(header_len, f.size())), '\0');
  RETURN_IF_ERROR(f.ReadAt(0, head.data(), static_cast<int64_t>(head.size())));
  return ParseNpyHeader(head, f.size(), f.path());
}

}  // namespace

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path) {
  ASSIGN_OR_RETURN(RegularFile f, RegularFile::Open(path));
  RETURN_IF_ERROR(ReadHeader(f).status());  // sizes match before reading data
  std::string bytes(static_cast<size_t>(f.size()), '\0');
  RETURN_IF_ERROR(f.ReadAt(0, bytes.data(), f.size()));
  return ParseNpy(std::move(bytes), path);
}

std::string AcceptedNpyDtypes(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF32:
    case PrimitiveType::kF64:
    case PrimitiveType::kBF16:
    case PrimitiveType::kF16:
      return "float16, float32, float64 or bfloat16";
    case PrimitiveType::kPred:
      return "bool or uint8 (0/1)";
    case PrimitiveType::kC64:
    case PrimitiveType::kC128:
      return "complex64, complex128 or a float dtype";
    default:
      if (hlo::IsInteger(type)) return "any integer dtype, values in range";
      return "";
  }
}

namespace {

std::string ExpectedText(const hlo::Shape& shape) {
  std::string accepted = AcceptedNpyDtypes(shape.element_type());
  return absl::StrCat(
      "expected ", shape.ToString(), " (numpy shape ", ShapeTuple(shape.dimensions()),
      ", dtype ", accepted.empty() ? "none: this type cannot be read from .npy" : accepted, ")");
}

// Whether .npy data of `src` and `dims` can fill a literal of `shape`.
absl::Status CheckFits(NpyDtype src, const std::vector<int64_t>& dims, const hlo::Shape& shape,
                       absl::string_view filename) {
  if (!shape.IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat(
        filename, ": cannot fill a ", shape.ToString(), " value from .npy"));
  }
  if (dims != shape.dimensions()) {
    return absl::InvalidArgumentError(absl::StrCat(filename, ": holds shape ", ShapeTuple(dims),
                                                   " ", NpyDtypeName(src), ", ",
                                                   ExpectedText(shape)));
  }
  const PrimitiveType type = shape.element_type();
  const bool same = NativeDtype(type) == src && type != PrimitiveType::kPred;
  const bool ok =
      same ||
      (hlo::IsComplex(type)
           ? src == NpyDtype::kComplex64 || src == NpyDtype::kComplex128 || IsFloatDtype(src)
       : hlo::IsFloatingPoint(type)
           ? IsFloatDtype(src) &&
                 (type == PrimitiveType::kF32 || type == PrimitiveType::kF64 ||
                  type == PrimitiveType::kBF16 || type == PrimitiveType::kF16)
       : type == PrimitiveType::kPred ? src == NpyDtype::kBool || src == NpyDtype::kUint8
                                      : hlo::IsInteger(type) && IsIntDtype(src));
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(filename, ": holds ", NpyDtypeName(src),
                                                   " data, ", ExpectedText(shape)));
  }
  return absl::OkStatus();
}

// Whether the .npy bytes are the literal's storage as they are (pred
// values are checked, so never).
bool SameRepresentation(NpyDtype src, PrimitiveType type) {
  return NativeDtype(type) == src && type != PrimitiveType::kPred;
}

// Converts elements [first, first + n) (the data `in` points at) into the
// literal storage `out` of `type` (CheckFits passed). Errors name the
// element's index in the whole array.
absl::Status ConvertRange(NpyDtype src, const char* in, int64_t first, int64_t n,
                          PrimitiveType type, uint8_t* out, absl::string_view filename) {
  if (hlo::IsFloatingPoint(type)) {
    for (int64_t i = 0; i < n; ++i) {
      const double v = LoadFloat(src, in, i);
      const int64_t at = first + i;
      switch (type) {
        case PrimitiveType::kF32:
          StoreAt<float>(out, at, static_cast<float>(v));
          break;
        case PrimitiveType::kF64:
          StoreAt<double>(out, at, v);
          break;
        case PrimitiveType::kBF16:
          // float64 goes through float32 first (double rounding is harmless
          // for the bf16-exact inputs tests use).
          StoreAt<uint16_t>(out, at, hlo::F32ToBf16(static_cast<float>(v)));
          break;
        default:  // kF16
          StoreAt<uint16_t>(out, at, hlo::F32ToF16(static_cast<float>(v)));
          break;
      }
    }
    return absl::OkStatus();
  }
  if (hlo::IsComplex(type)) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = first + i;
      double re, im = 0;
      if (src == NpyDtype::kComplex64) {
        re = LoadAt<float>(in, 2 * i);
        im = LoadAt<float>(in, 2 * i + 1);
      } else if (src == NpyDtype::kComplex128) {
        re = LoadAt<double>(in, 2 * i);
        im = LoadAt<double>(in, 2 * i + 1);
      } else {
        re = LoadFloat(src, in, i);
      }
      if (type == PrimitiveType::kC64) {
        StoreAt<float>(out, 2 * at, static_cast<float>(re));
        StoreAt<float>(out, 2 * at + 1, static_cast<float>(im));
      } else {
        StoreAt<double>(out, 2 * at, re);
        StoreAt<double>(out, 2 * at + 1, im);
      }
    }
    return absl::OkStatus();
  }
  if (type == PrimitiveType::kPred) {
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t v = LoadAt<uint8_t>(in, i);
      if (v > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            filename, ": element ", first + i, " is ", static_cast<int>(v),
            ", a pred input must hold only 0 or 1"));
      }
      out[first + i] = v;
    }
    return absl::OkStatus();
  }
  const auto [lo, hi] = IntRange(type);
  for (int64_t i = 0; i < n; ++i) {
    bool too_big = false;
    const int64_t v = LoadInt(src, in, i, &too_big);
    if (too_big || v < lo || v > hi) {
      return absl::OutOfRangeError(absl::StrCat(
          filename, ": element ", first + i, " = ",
          too_big ? absl::StrCat(static_cast<uint64_t>(v)) : absl::StrCat(v),
          " is out of range for ", hlo::PrimitiveTypeName(type)));
    }
    StoreInt(type, out, first + i, v);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<hlo::Literal> NpyToLiteral(const NpyArray& array,
                                          const hlo::Shape& shape,
                                          absl::string_view filename) {
  RETURN_IF_ERROR(CheckFits(array.dtype(), array.shape(), shape, filename));
  hlo::Literal lit(shape);
  if (SameRepresentation(array.dtype(), shape.element_type())) {
    if (lit.raw_size() > 0) std::memcpy(lit.raw(), array.data().data(), lit.raw_size());
    return lit;
  }
  RETURN_IF_ERROR(ConvertRange(array.dtype(), array.data().data(), 0, array.num_elements(),
                               shape.element_type(), lit.raw(), filename));
  return lit;
}

absl::StatusOr<hlo::Literal> ReadNpyAsLiteral(const std::string& path, const hlo::Shape& shape) {
  ASSIGN_OR_RETURN(RegularFile f, RegularFile::Open(path));
  ASSIGN_OR_RETURN(NpyHeader h, ReadHeader(f));
  RETURN_IF_ERROR(CheckFits(h.dtype, h.shape, shape, path));
  hlo::Literal lit(shape);
  if (SameRepresentation(h.dtype, shape.element_type())) {
    RETURN_IF_ERROR(f.ReadAt(h.data_offset, lit.raw(), lit.raw_size()));
    return lit;
  }
  // Converted in chunks: never a second copy of the whole array.
  const int64_t item = NpyItemSize(h.dtype);
  const int64_t n = lit.num_elements();
  constexpr int64_t kChunk = int64_t{1} << 18;  // elements
  std::string buf(static_cast<size_t>(std::min(n, kChunk) * item), '\0');
  for (int64_t first = 0; first < n; first += kChunk) {
    const int64_t count = std::min(kChunk, n - first);
    RETURN_IF_ERROR(f.ReadAt(h.data_offset + first * item, buf.data(), count * item));
    RETURN_IF_ERROR(ConvertRange(h.dtype, buf.data(), first, count, shape.element_type(),
                                 lit.raw(), path));
  }
  return lit;
}

absl::StatusOr<hlo::Literal> ReadNpyBox(const std::string& path, const hlo::Shape& global,
                                        const std::vector<int64_t>& origin,
                                        const std::vector<int64_t>& extent,
                                        const std::vector<int64_t>& dims,
                                        const hlo::Shape& piece) {
  ASSIGN_OR_RETURN(RegularFile f, RegularFile::Open(path));
  ASSIGN_OR_RETURN(NpyHeader h, ReadHeader(f));
  RETURN_IF_ERROR(CheckFits(h.dtype, h.shape, global, path));
  const int64_t rank = static_cast<int64_t>(extent.size());
  int64_t dims_elements = 1;
  for (int64_t d : dims) dims_elements *= d;
  if (rank != global.rank() || origin.size() != extent.size() || dims.size() != extent.size() ||
      dims_elements != piece.num_elements()) {
    return absl::InternalError(absl::StrCat(path, ": box of rank ", rank, " does not fit ",
                                            global.ToString(), " / ", piece.ToString()));
  }
  hlo::Literal lit(piece);  // padding beyond the box stays zero
  for (int64_t i = 0; i < rank; ++i) {
    if (extent[i] <= 0) return lit;
  }
  // Runs contiguous in the file and in the piece: the innermost dimensions
  // the box covers whole (and the piece does not pad).
  const int64_t item = NpyItemSize(h.dtype);
  const int64_t width = hlo::ByteWidth(piece.element_type());
  int64_t k = std::max<int64_t>(rank - 1, 0);
  int64_t run = rank == 0 ? 1 : extent[k];
  while (k > 0 && extent[k] == global.dimensions(k) && dims[k] == extent[k]) {
    --k;
    run *= extent[k];
  }
  std::vector<int64_t> gstride(rank, 1), pstride(rank, 1);
  for (int64_t i = rank - 2; i >= 0; --i) {
    gstride[i] = gstride[i + 1] * global.dimensions(i + 1);
    pstride[i] = pstride[i + 1] * dims[i + 1];
  }
  const bool same = SameRepresentation(h.dtype, piece.element_type());
  constexpr int64_t kChunk = int64_t{1} << 18;  // elements per read
  std::string buf(static_cast<size_t>(std::min(run, kChunk) * item), '\0');
  std::vector<int64_t> idx(rank, 0);  // over dims [0, k) of the box
  while (true) {
    int64_t g = 0, p = 0;
    for (int64_t i = 0; i < rank; ++i) {
      g += (origin[i] + idx[i]) * gstride[i];
      p += idx[i] * pstride[i];
    }
    for (int64_t done = 0; done < run; done += kChunk) {
      const int64_t n = std::min(kChunk, run - done);
      const int64_t at = h.data_offset + (g + done) * item;
      if (same) {
        RETURN_IF_ERROR(f.ReadAt(at, lit.raw() + (p + done) * width, n * item));
      } else {
        RETURN_IF_ERROR(f.ReadAt(at, buf.data(), n * item));
        RETURN_IF_ERROR(
            ConvertRange(h.dtype, buf.data(), p + done, n, piece.element_type(), lit.raw(), path));
      }
    }
    int64_t i = k - 1;
    for (; i >= 0; --i) {
      if (++idx[i] < extent[i]) break;
      idx[i] = 0;
    }
    if (i < 0) break;
  }
  return lit;
}

absl::StatusOr<std::string> NpyDescrForType(PrimitiveType type, const NpyWriteOptions& o) {
  if (type == PrimitiveType::kBF16 && o.bf16_as_float32) return std::string("<f4");
  const std::optional<NpyDtype> d = NativeDtype(type);
  if (!d.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write a ", hlo::PrimitiveTypeName(type), " value as .npy"));
  }
  const DtypeInfo& info = Info(*d);
  return absl::StrCat(info.size == 1 ? "|" : "<", info.code);
}

absl::StatusOr<std::string> LiteralToNpy(const hlo::Literal& literal,
                                         const NpyWriteOptions& options) {
  const hlo::Shape& shape = literal.shape();
  if (!shape.IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write a ", shape.ToString(), " value as .npy"));
  }
  ASSIGN_OR_RETURN(std::string descr, NpyDescrForType(shape.element_type(), options));
  std::string dict =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ",
                   ShapeTuple(shape.dimensions()), ", }");
  // Pad with spaces and end with '\n' so the data starts 64-byte aligned.
  size_t prefix = kMagicLen + 2 + 2;
  bool v2 = false;
  size_t total = prefix + dict.size() + 1;
  if ((total + 63) / 64 * 64 - prefix > 0xffff) {
    v2 = true;
    prefix += 2;
    total = prefix + dict.size() + 1;
  }
  const size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict.push_back('\n');
  const uint64_t header_len = dict.size();

  std::string out(kMagic, kMagicLen);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) {
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  }
  out += dict;

  const int64_t n = literal.num_elements();
  const auto* raw = reinterpret_cast<const char*>(literal.raw());
  const PrimitiveType type = shape.element_type();
  if (type == PrimitiveType::kBF16 && options.bf16_as_float32) {
    const size_t start = out.size();
    out.resize(start + n * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      const float f = hlo::Bf16ToF32(LoadAt<uint16_t>(raw, i));
      std::memcpy(out.data() + start + i * sizeof(float), &f, sizeof(float));
    }
  } else {
    out.append(raw, static_cast<size_t>(literal.raw_size()));
  }
  return out;
}

}  // namespace tpuoff::tools
