#include "hlo/ir/literal.h"

#include <cstring>

#include "hlo/ir/float16.h"

namespace tpuoff::hlo {

Literal::Literal(const Shape& shape) : shape_(shape) {
  if (shape.IsTuple()) {
    for (const Shape& s : shape.tuple_shapes()) elements_.emplace_back(s);
  } else if (shape.IsArray()) {
    bytes_.assign(shape.byte_size(), 0);
  }
}

Literal::Literal(const Literal& other)
    : shape_(other.shape_),
      bytes_(other.raw(), other.raw() + other.raw_size()),
      elements_(other.elements_) {}

Literal& Literal::operator=(const Literal& other) {
  if (this == &other) return *this;
  shape_ = other.shape_;
  bytes_.assign(other.raw(), other.raw() + other.raw_size());
  adopted_.reset();
  adopted_size_ = 0;
  elements_ = other.elements_;
  return *this;
}

Literal Literal::AdoptArray(const Shape& shape, void* data, void (*free_fn)(void*)) {
  Literal lit;
  lit.shape_ = shape;
  lit.adopted_ = std::unique_ptr<uint8_t, Release>(static_cast<uint8_t*>(data),
                                                   Release{free_fn});
  lit.adopted_size_ = shape.byte_size();
  return lit;
}

Literal Literal::ScalarF32(float v) {
  Literal lit(Shape::Scalar(PrimitiveType::kF32));
  *lit.data<float>() = v;
  return lit;
}

Literal Literal::ScalarS32(int32_t v) {
  Literal lit(Shape::Scalar(PrimitiveType::kS32));
  *lit.data<int32_t>() = v;
  return lit;
}

Literal Literal::Tuple(std::vector<Literal> elements) {
  std::vector<Shape> shapes;
  for (const Literal& e : elements) shapes.push_back(e.shape());
  Literal lit;
  lit.shape_ = Shape::Tuple(std::move(shapes));
  lit.elements_ = std::move(elements);
  return lit;
}

double Literal::GetAsDouble(int64_t i) const {
  switch (shape_.element_type()) {
    case PrimitiveType::kF32: return data<float>()[i];
    case PrimitiveType::kF64: return data<double>()[i];
    case PrimitiveType::kBF16: return Bf16ToF32(data<uint16_t>()[i]);
    case PrimitiveType::kF16: return F16ToF32(data<uint16_t>()[i]);
    case PrimitiveType::kU64:
      return static_cast<double>(data<uint64_t>()[i]);
    case PrimitiveType::kC64: return data<float>()[2 * i];  // the real part
    case PrimitiveType::kC128: return data<double>()[2 * i];
    default: return static_cast<double>(GetAsInt64(i));
  }
}

void Literal::SetFromDouble(int64_t i, double v) {
  switch (shape_.element_type()) {
    case PrimitiveType::kF32: data<float>()[i] = static_cast<float>(v); return;
    case PrimitiveType::kF64: data<double>()[i] = v; return;
    case PrimitiveType::kBF16:
      data<uint16_t>()[i] = F32ToBf16(static_cast<float>(v));
      return;
    case PrimitiveType::kF16:
      data<uint16_t>()[i] = F32ToF16(static_cast<float>(v));
      return;
    case PrimitiveType::kPred: data<uint8_t>()[i] = v != 0; return;
    case PrimitiveType::kC64:
      data<float>()[2 * i] = static_cast<float>(v);
      data<float>()[2 * i + 1] = 0;
      return;
    case PrimitiveType::kC128:
      data<double>()[2 * i] = v;
      data<double>()[2 * i + 1] = 0;
      return;
    default: SetFromInt64(i, static_cast<int64_t>(v)); return;
  }
}

int64_t Literal::GetAsInt64(int64_t i) const {
  switch (shape_.element_type()) {
    case PrimitiveType::kPred: return data<uint8_t>()[i] != 0;
    case PrimitiveType::kS8: return data<int8_t>()[i];
    case PrimitiveType::kS16: return data<int16_t>()[i];
    case PrimitiveType::kS32: return data<int32_t>()[i];
    case PrimitiveType::kS64: return data<int64_t>()[i];
    case PrimitiveType::kU8: return data<uint8_t>()[i];
    case PrimitiveType::kU16: return data<uint16_t>()[i];
    case PrimitiveType::kU32: return data<uint32_t>()[i];
    case PrimitiveType::kU64: return static_cast<int64_t>(data<uint64_t>()[i]);
    case PrimitiveType::kF32:
    case PrimitiveType::kF64:
    case PrimitiveType::kBF16:
    case PrimitiveType::kF16:
    case PrimitiveType::kC64:
    case PrimitiveType::kC128: return static_cast<int64_t>(GetAsDouble(i));
    default: return 0;  // token / tuple / invalid: no elements
  }
}

void Literal::SetFromInt64(int64_t i, int64_t v) {
  switch (shape_.element_type()) {
    case PrimitiveType::kPred: data<uint8_t>()[i] = v != 0; return;
    case PrimitiveType::kS8: data<int8_t>()[i] = static_cast<int8_t>(v); return;
    case PrimitiveType::kS16: data<int16_t>()[i] = static_cast<int16_t>(v); return;
    case PrimitiveType::kS32: data<int32_t>()[i] = static_cast<int32_t>(v); return;
    case PrimitiveType::kS64: data<int64_t>()[i] = v; return;
    case PrimitiveType::kU8: data<uint8_t>()[i] = static_cast<uint8_t>(v); return;
    case PrimitiveType::kU16: data<uint16_t>()[i] = static_cast<uint16_t>(v); return;
    case PrimitiveType::kU32: data<uint32_t>()[i] = static_cast<uint32_t>(v); return;
    case PrimitiveType::kU64: data<uint64_t>()[i] = static_cast<uint64_t>(v); return;
    case PrimitiveType::kF32:
    case PrimitiveType::kF64:
    case PrimitiveType::kBF16:
    case PrimitiveType::kF16:
    case PrimitiveType::kC64:
    case PrimitiveType::kC128: SetFromDouble(i, static_cast<double>(v)); return;
    default: return;
  }
}

bool Literal::operator==(const Literal& other) const {
  if (!shape_.Compatible(other.shape_)) return false;
  if (raw_size() != other.raw_size() ||
      (raw_size() > 0 && std::memcmp(raw(), other.raw(), raw_size()) != 0)) {
    return false;
  }
  return elements_ == other.elements_;
}

}  // namespace tpuoff::hlo
