// ShapeProto and LiteralProto conversions (see proto_internal.h).
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/limits.h"
#include "hlo/proto/proto_internal.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo::proto_internal {
namespace {

std::vector<int64_t> RowMajorLayout(int64_t rank) {
  std::vector<int64_t> layout(rank);
  for (int64_t i = 0; i < rank; ++i) layout[i] = rank - 1 - i;
  return layout;
}

// The layout actually used for `shape`: its own when well formed, else
// row-major (an IR shape built by hand may lack one).
std::vector<int64_t> EffectiveLayout(const Shape& shape) {
  const std::vector<int64_t>& m2m = shape.minor_to_major();
  if (IsPermutation(m2m, shape.rank())) return m2m;
  return RowMajorLayout(shape.rank());
}

// Calls f(row_major_index, physical_index) for every element, where the
// physical index is the element's position in `minor_to_major` order.
template <typename F>
void ForEachPhysicalIndex(const std::vector<int64_t>& dims,
                          const std::vector<int64_t>& minor_to_major, F f) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  if (total == 0) return;
  std::vector<int64_t> phys_stride(rank, 1);
  for (int64_t k = 1; k < rank; ++k) {
    phys_stride[minor_to_major[k]] =
        phys_stride[minor_to_major[k - 1]] * dims[minor_to_major[k - 1]];
  }
  std::vector<int64_t> index(rank, 0);
  int64_t phys = 0;
  for (int64_t linear = 0; linear < total; ++linear) {
    f(linear, phys);
    for (int64_t d = rank - 1; d >= 0; --d) {
      phys += phys_stride[d];
      if (++index[d] < dims[d]) break;
      phys -= phys_stride[d] * dims[d];
      index[d] = 0;
    }
  }
}

// Copies row-major `src` into `dst` in physical order (to_physical), or the
// reverse. Both buffers hold num_elements * width bytes.
void Reorder(const Shape& shape, const std::vector<int64_t>& minor_to_major,
             const uint8_t* src, uint8_t* dst, bool to_physical) {
  const int64_t width = ByteWidth(shape.element_type());
  if (shape.num_elements() == 0) return;  // also keeps memcpy off null
  if (minor_to_major == RowMajorLayout(shape.rank())) {
    std::memcpy(dst, src, shape.num_elements() * width);
    return;
  }
  ForEachPhysicalIndex(shape.dimensions(), minor_to_major,
                       [&](int64_t logical, int64_t phys) {
                         const int64_t from = to_physical ? logical : phys;
                         const int64_t to = to_physical ? phys : logical;
                         std::memcpy(dst + to * width, src + from * width, width);
                       });
}

template <typename T, typename Field>
void AppendTyped(const std::vector<uint8_t>& bytes, Field* field) {
  const size_t n = bytes.size() / sizeof(T);
  field->Reserve(static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    field->Add(v);
  }
}

// 16-bit values travel as little-endian byte pairs.
std::string ToLittleEndian16(const std::vector<uint8_t>& bytes) {
  std::string out(bytes.size(), '\0');
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    uint16_t v;
    std::memcpy(&v, bytes.data() + i, 2);
    out[i] = static_cast<char>(v & 0xff);
    out[i + 1] = static_cast<char>(v >> 8);
  }
  return out;
}

void FromLittleEndian16(const std::string& in, uint8_t* out) {
  for (size_t i = 0; i + 1 < in.size(); i += 2) {
    uint16_t v = static_cast<uint16_t>(static_cast<uint8_t>(in[i])) |
                 static_cast<uint16_t>(static_cast<uint8_t>(in[i + 1]) << 8);
    std::memcpy(out + i, &v, 2);
  }
}

template <typename T, typename Field>
void CopyTyped(const Field& field, uint8_t* out) {
  for (int i = 0; i < field.size(); ++i) {
    T v = field.Get(i);
    std::memcpy(out + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
  }
}

absl::Status CountMismatch(absl::string_view where, absl::string_view field,
                           int64_t got, const Shape& shape) {
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": literal field ", field, " holds ", got, " elements but shape ",
      shape.ToString(), " has ", shape.num_elements()));
}

// Number of elements a typed field holds for `type`, and the field's name.
std::pair<int64_t, absl::string_view> FieldCount(const xla::LiteralProto& p,
                                                 PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kPred: return {p.preds_size(), "preds"};
    case PrimitiveType::kS8: return {static_cast<int64_t>(p.s8s().size()), "s8s"};
    case PrimitiveType::kU8: return {static_cast<int64_t>(p.u8s().size()), "u8s"};
    case PrimitiveType::kS16: return {static_cast<int64_t>(p.s16s().size() / 2), "s16s"};
    case PrimitiveType::kU16: return {static_cast<int64_t>(p.u16s().size() / 2), "u16s"};
    case PrimitiveType::kF16: return {static_cast<int64_t>(p.f16s().size() / 2), "f16s"};
    case PrimitiveType::kBF16: return {static_cast<int64_t>(p.bf16s().size() / 2), "bf16s"};
    case PrimitiveType::kS32: return {p.s32s_size(), "s32s"};
    case PrimitiveType::kU32: return {p.u32s_size(), "u32s"};
    case PrimitiveType::kS64: return {p.s64s_size(), "s64s"};
    case PrimitiveType::kU64: return {p.u64s_size(), "u64s"};
    case PrimitiveType::kF32: return {p.f32s_size(), "f32s"};
    case PrimitiveType::kF64: return {p.f64s_size(), "f64s"};
    // Complex values are interleaved (re, im) pairs; an odd count is caught
    // by the element count check.
    case PrimitiveType::kC64:
      return {p.c64s_size() % 2 ? -1 : p.c64s_size() / 2, "c64s"};
    case PrimitiveType::kC128:
      return {p.c128s_size() % 2 ? -1 : p.c128s_size() / 2, "c128s"};
    default: return {-1, "?"};
  }
}

const std::string* Bytes16Field(const xla::LiteralProto& p, PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kS16: return &p.s16s();
    case PrimitiveType::kU16: return &p.u16s();
    case PrimitiveType::kF16: return &p.f16s();
    case PrimitiveType::kBF16: return &p.bf16s();
    default: return nullptr;
  }
}

}  // namespace

bool IsPermutation(const std::vector<int64_t>& perm, int64_t n) {
  if (static_cast<int64_t>(perm.size()) != n) return false;
  std::vector<bool> seen(n, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= n || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}

void ShapeToProto(const Shape& shape, xla::ShapeProto* proto) {
  proto->set_element_type(
      static_cast<xla::PrimitiveType>(static_cast<int>(shape.element_type())));
  if (shape.IsTuple()) {
    for (const Shape& s : shape.tuple_shapes()) {
      ShapeToProto(s, proto->add_tuple_shapes());
    }
    return;
  }
  if (!shape.IsArray()) return;
  for (int64_t d : shape.dimensions()) {
    proto->add_dimensions(d);
    proto->add_is_dynamic_dimension(false);
  }
  // mutable_layout() marks the layout present even for scalars, as XLA does.
  xla::LayoutProto* layout = proto->mutable_layout();
  for (int64_t d : EffectiveLayout(shape)) layout->add_minor_to_major(d);
  if (shape.memory_space() != 0) layout->set_memory_space(shape.memory_space());
}

absl::StatusOr<Shape> ShapeFromProto(const xla::ShapeProto& proto,
                                     absl::string_view where, int depth) {
  if (depth > kMaxShapeNesting) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": tuple shapes nest deeper than ", kMaxShapeNesting, " levels"));
  }
  const int type_value = proto.element_type();
  if (type_value == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": element_type is missing"));
  }
  if (!xla::PrimitiveType_IsValid(type_value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unknown element_type ", type_value));
  }
  if (!IsKnownPrimitiveType(type_value)) {
    return absl::UnimplementedError(absl::StrCat(
        where, ": element_type ",
        xla::PrimitiveType_Name(static_cast<xla::PrimitiveType>(type_value)),
        " is not supported"));
  }
  const auto type = static_cast<PrimitiveType>(type_value);
  if (type == PrimitiveType::kTuple) {
    std::vector<Shape> elements;
    elements.reserve(proto.tuple_shapes_size());
    for (int i = 0; i < proto.tuple_shapes_size(); ++i) {
      ASSIGN_OR_RETURN(Shape element,
                       ShapeFromProto(proto.tuple_shapes(i),
                                      absl::StrCat(where, ".tuple_shapes[", i, "]"), depth + 1));
      elements.push_back(std::move(element));
    }
    return Shape::Tuple(std::move(elements));
  }
  if (type == PrimitiveType::kToken) return Shape::Token();
  if (proto.tuple_shapes_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": array shape has tuple_shapes"));
  }
  const int64_t rank = proto.dimensions_size();
  if (rank > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": rank ", rank, " exceeds the limit ", kMaxRank));
  }
  std::vector<int64_t> dims(proto.dimensions().begin(), proto.dimensions().end());
  int64_t product = 1;  // of the non-zero dimensions
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = dims[i];
    if (d < 0 || d > kMaxDimension) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": dimensions[", i, "] = ", d, " is negative or too large"));
    }
    if (d == 0) continue;
    if (product > kMaxElements / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": shape [", absl::StrJoin(dims, ","), "] exceeds the limit of ",
          kMaxElements, " elements"));
    }
    product *= d;
  }
  // The same byte limit as the text parser: an array this large is a typo
  // or hostile input, not a module anyone can run.
  const int64_t width = std::max<int64_t>(1, ByteWidth(type));
  if (product > kMaxArrayBytes / width) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": shape ", PrimitiveTypeName(type), "[", absl::StrJoin(dims, ","),
        "] needs more than the limit of ", kMaxArrayBytes, " bytes per array"));
  }
  if (proto.is_dynamic_dimension_size() != 0) {
    if (proto.is_dynamic_dimension_size() != rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": is_dynamic_dimension has ", proto.is_dynamic_dimension_size(),
          " entries for rank ", rank));
    }
    for (bool dynamic : proto.is_dynamic_dimension()) {
      if (dynamic) {
        return absl::UnimplementedError(
            absl::StrCat(where, ": dynamic dimensions are not supported"));
      }
    }
  }
  Shape shape(type, std::move(dims));
  if (proto.has_layout() && proto.layout().minor_to_major_size() > 0) {
    std::vector<int64_t> m2m(proto.layout().minor_to_major().begin(),
                             proto.layout().minor_to_major().end());
    if (!IsPermutation(m2m, rank)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": layout.minor_to_major {", absl::StrJoin(m2m, ","),
          "} is not a permutation of the ", rank, " dimensions"));
    }
    shape.set_minor_to_major(std::move(m2m));
  }
  if (proto.has_layout()) shape.set_memory_space(proto.layout().memory_space());
  return shape;
}

absl::Status LiteralToProto(const Literal& literal, const Shape& layout_shape,
                            xla::LiteralProto* proto) {
  if (!literal.shape().Compatible(layout_shape)) {
    return absl::InvalidArgumentError(
        absl::StrCat("literal shape ", literal.shape().ToString(),
                     " differs from ", layout_shape.ToString()));
  }
  ShapeToProto(layout_shape, proto->mutable_shape());
  if (layout_shape.IsTuple()) {
    if (static_cast<int64_t>(literal.tuple_elements().size()) !=
        layout_shape.tuple_size()) {
      return absl::InvalidArgumentError("tuple literal has the wrong arity");
    }
    for (int64_t i = 0; i < layout_shape.tuple_size(); ++i) {
      RETURN_IF_ERROR(LiteralToProto(literal.tuple_elements()[i],
                                     layout_shape.tuple_shapes(i),
                                     proto->add_tuple_literals()));
    }
    return absl::OkStatus();
  }
  if (!layout_shape.IsArray()) {
    return absl::UnimplementedError(absl::StrCat(
        "literal of shape ", layout_shape.ToString(), " cannot be serialized"));
  }
  const PrimitiveType type = layout_shape.element_type();
  if (literal.raw_size() != layout_shape.byte_size()) {
    return absl::InternalError(absl::StrCat("literal holds ", literal.raw_size(),
                                            " bytes, shape needs ",
                                            layout_shape.byte_size()));
  }
  std::vector<uint8_t> phys(literal.raw_size());
  Reorder(layout_shape, EffectiveLayout(layout_shape), literal.raw(), phys.data(),
          /*to_physical=*/true);
  switch (type) {
    case PrimitiveType::kPred:
      proto->mutable_preds()->Reserve(static_cast<int>(phys.size()));
      for (uint8_t b : phys) proto->add_preds(b != 0);
      break;
    case PrimitiveType::kS8:
      proto->set_s8s(std::string(phys.begin(), phys.end()));
      break;
    case PrimitiveType::kU8:
      proto->set_u8s(std::string(phys.begin(), phys.end()));
      break;
    case PrimitiveType::kS16: proto->set_s16s(ToLittleEndian16(phys)); break;
    case PrimitiveType::kU16: proto->set_u16s(ToLittleEndian16(phys)); break;
    case PrimitiveType::kF16: proto->set_f16s(ToLittleEndian16(phys)); break;
    case PrimitiveType::kBF16: proto->set_bf16s(ToLittleEndian16(phys)); break;
    case PrimitiveType::kS32: AppendTyped<int32_t>(phys, proto->mutable_s32s()); break;
    case PrimitiveType::kU32: AppendTyped<uint32_t>(phys, proto->mutable_u32s()); break;
    case PrimitiveType::kS64: AppendTyped<int64_t>(phys, proto->mutable_s64s()); break;
    case PrimitiveType::kU64: AppendTyped<uint64_t>(phys, proto->mutable_u64s()); break;
    case PrimitiveType::kF32: AppendTyped<float>(phys, proto->mutable_f32s()); break;
    case PrimitiveType::kF64: AppendTyped<double>(phys, proto->mutable_f64s()); break;
    case PrimitiveType::kC64: AppendTyped<float>(phys, proto->mutable_c64s()); break;
    case PrimitiveType::kC128: AppendTyped<double>(phys, proto->mutable_c128s()); break;
    default:
      return absl::UnimplementedError(absl::StrCat(
          "literal element type ", PrimitiveTypeName(type), " cannot be serialized"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Literal> LiteralFromProto(const xla::LiteralProto& proto,
                                         absl::string_view where) {
  if (!proto.has_shape()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": literal has no shape"));
  }
  ASSIGN_OR_RETURN(Shape shape,
                   ShapeFromProto(proto.shape(), absl::StrCat(where, ": literal shape")));
  if (shape.IsTuple()) {
    if (proto.tuple_literals_size() != shape.tuple_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": tuple literal has ", proto.tuple_literals_size(),
          " tuple_literals for shape ", shape.ToString()));
    }
    std::vector<Literal> elements;
    for (int i = 0; i < proto.tuple_literals_size(); ++i) {
      ASSIGN_OR_RETURN(Literal element,
                       LiteralFromProto(proto.tuple_literals(i),
                                        absl::StrCat(where, ".tuple_literals[", i, "]")));
      if (!element.shape().Compatible(shape.tuple_shapes(i))) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": tuple_literals[", i, "] has shape ", element.shape().ToString(),
            " but the tuple shape says ", shape.tuple_shapes(i).ToString()));
      }
      elements.push_back(std::move(element));
    }
    return Literal::Tuple(std::move(elements));
  }
  if (!shape.IsArray()) {
    return absl::UnimplementedError(absl::StrCat(
        where, ": literal of shape ", shape.ToString(), " is not supported"));
  }
  const PrimitiveType type = shape.element_type();
  const auto [count, field] = FieldCount(proto, type);
  if (const std::string* bytes = Bytes16Field(proto, type);
      bytes != nullptr && bytes->size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": literal field ", field, " has an odd byte count ", bytes->size()));
  }
  // Checked before any allocation: the data present bounds the size.
  if (count != shape.num_elements()) {
    return CountMismatch(where, field, count, shape);
  }
  std::vector<uint8_t> phys(shape.byte_size());
  switch (type) {
    case PrimitiveType::kPred:
      for (int i = 0; i < proto.preds_size(); ++i) phys[i] = proto.preds(i) ? 1 : 0;
      break;
    case PrimitiveType::kS8:
      if (!phys.empty()) std::memcpy(phys.data(), proto.s8s().data(), phys.size());
      break;
    case PrimitiveType::kU8:
      if (!phys.empty()) std::memcpy(phys.data(), proto.u8s().data(), phys.size());
      break;
    case PrimitiveType::kS16:
    case PrimitiveType::kU16:
    case PrimitiveType::kF16:
    case PrimitiveType::kBF16:
      FromLittleEndian16(*Bytes16Field(proto, type), phys.data());
      break;
    case PrimitiveType::kS32: CopyTyped<int32_t>(proto.s32s(), phys.data()); break;
    case PrimitiveType::kU32: CopyTyped<uint32_t>(proto.u32s(), phys.data()); break;
    case PrimitiveType::kS64: CopyTyped<int64_t>(proto.s64s(), phys.data()); break;
    case PrimitiveType::kU64: CopyTyped<uint64_t>(proto.u64s(), phys.data()); break;
    case PrimitiveType::kF32: CopyTyped<float>(proto.f32s(), phys.data()); break;
    case PrimitiveType::kF64: CopyTyped<double>(proto.f64s(), phys.data()); break;
    case PrimitiveType::kC64: CopyTyped<float>(proto.c64s(), phys.data()); break;
    case PrimitiveType::kC128: CopyTyped<double>(proto.c128s(), phys.data()); break;
    default:
      return absl::UnimplementedError(absl::StrCat(
          where, ": literal element type ", PrimitiveTypeName(type), " is not supported"));
  }
  Literal literal(shape);
  Reorder(shape, EffectiveLayout(shape), phys.data(), literal.raw(),
          /*to_physical=*/false);
  return literal;
}

}  // namespace tpuoff::hlo::proto_internal
