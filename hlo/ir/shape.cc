#include "hlo/ir/shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpuoff::hlo {
namespace {

std::vector<int64_t> RowMajor(int64_t rank) {
  std::vector<int64_t> layout(rank);
  for (int64_t i = 0; i < rank; ++i) layout[i] = rank - 1 - i;
  return layout;
}

}  // namespace

Shape::Shape(PrimitiveType type, std::vector<int64_t> dims)
    : type_(type), dims_(std::move(dims)), layout_(RowMajor(dims_.size())) {}

Shape Shape::Tuple(std::vector<Shape> elements) {
  Shape shape;
  shape.type_ = PrimitiveType::kTuple;
  shape.tuple_ = std::move(elements);
  return shape;
}

Shape Shape::Token() {
  Shape shape;
  shape.type_ = PrimitiveType::kToken;
  return shape;
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

int64_t Shape::byte_size() const {
  if (!IsArray()) return 0;
  return num_elements() * ByteWidth(type_);
}

int64_t Shape::total_leaf_bytes() const {
  if (!IsTuple()) return byte_size();
  int64_t total = 0;
  for (const Shape& s : tuple_) total += s.total_leaf_bytes();
  return total;
}

bool Shape::HasDefaultLayout() const {
  if (IsTuple()) {
    for (const Shape& s : tuple_) {
      if (!s.HasDefaultLayout()) return false;
    }
    return true;
  }
  return !IsArray() || layout_ == RowMajor(rank());
}

void Shape::SetDefaultLayout() {
  if (IsArray()) layout_ = RowMajor(rank());
  for (Shape& s : tuple_) s.SetDefaultLayout();
}

std::vector<int64_t> Shape::Strides() const {
  std::vector<int64_t> strides(dims_.size(), 1);
  for (int64_t i = rank() - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * dims_[i + 1];
  }
  return strides;
}

std::string Shape::ToString(bool print_layout) const {
  if (IsTuple()) {
    std::vector<std::string> parts;
    parts.reserve(tuple_.size());
    for (const Shape& s : tuple_) parts.push_back(s.ToString(print_layout));
    return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
  }
  if (IsToken()) return "token[]";
  std::string out =
      absl::StrCat(PrimitiveTypeName(type_), "[", absl::StrJoin(dims_, ","), "]");
  if (print_layout && IsArray() && (!dims_.empty() || memory_space_ != 0)) {
    absl::StrAppend(&out, "{", absl::StrJoin(layout_, ","));
    if (memory_space_ != 0) absl::StrAppend(&out, ":S(", memory_space_, ")");
    out += "}";
  }
  return out;
}

bool Shape::Compatible(const Shape& other) const {
  if (type_ != other.type_ || dims_ != other.dims_) return false;
  if (tuple_.size() != other.tuple_.size()) return false;
  for (size_t i = 0; i < tuple_.size(); ++i) {
    if (!tuple_[i].Compatible(other.tuple_[i])) return false;
  }
  return true;
}

bool Shape::operator==(const Shape& other) const {
  if (!Compatible(other)) return false;
  if (IsArray() && layout_ != other.layout_) return false;
  for (size_t i = 0; i < tuple_.size(); ++i) {
    if (!(tuple_[i] == other.tuple_[i])) return false;
  }
  return true;
}

}  // namespace tpuoff::hlo
