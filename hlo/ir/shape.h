// Array and tuple shapes. Arrays carry a minor-to-major layout; the default
// (and the only one the emulator computes in) is row-major.
#ifndef TPUOFF_HLO_IR_SHAPE_H_
#define TPUOFF_HLO_IR_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "hlo/ir/primitive_type.h"

namespace tpuoff::hlo {

class Shape {
 public:
  Shape() = default;  // invalid
  // An array shape with the row-major layout.
  Shape(PrimitiveType type, std::vector<int64_t> dims);
  static Shape Scalar(PrimitiveType type) { return Shape(type, {}); }
  static Shape Tuple(std::vector<Shape> elements);
  static Shape Token();

  PrimitiveType element_type() const { return type_; }
  bool IsArray() const { return IsArrayType(type_); }
  bool IsTuple() const { return type_ == PrimitiveType::kTuple; }
  bool IsToken() const { return type_ == PrimitiveType::kToken; }
  bool IsValid() const { return type_ != PrimitiveType::kInvalid; }

  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  const std::vector<int64_t>& dimensions() const { return dims_; }
  int64_t dimensions(int64_t i) const { return dims_[i]; }
  void set_dimension(int64_t i, int64_t size) { dims_[i] = size; }
  int64_t num_elements() const;  // arrays only; 1 for scalars
  int64_t byte_size() const;     // arrays: elements * width; tuples: 0
  // Sum of the byte sizes of all array leaves (tuples recursively).
  int64_t total_leaf_bytes() const;

  const std::vector<Shape>& tuple_shapes() const { return tuple_; }
  const Shape& tuple_shapes(int64_t i) const { return tuple_[i]; }
  std::vector<Shape>* mutable_tuple_shapes() { return &tuple_; }
  int64_t tuple_size() const { return static_cast<int64_t>(tuple_.size()); }

  const std::vector<int64_t>& minor_to_major() const { return layout_; }
  void set_minor_to_major(std::vector<int64_t> layout) {
    layout_ = std::move(layout);
  }
  // The memory space of the layout (XLA's `S(n)`; on TPU 1 is VMEM), as
  // XLA's optimised modules carry it. An annotation only: 0 for every
  // module tpuoff builds, ignored by Compatible() and ==.
  int64_t memory_space() const { return memory_space_; }
  void set_memory_space(int64_t space) { memory_space_ = space; }
  bool HasDefaultLayout() const;  // row-major, recursively for tuples
  void SetDefaultLayout();        // recursively

  // Row-major strides in elements.
  std::vector<int64_t> Strides() const;

  // "f32[2,3]" / "(f32[], s32[4])"; with layouts "f32[2,3]{1,0}" (and a
  // memory space other than 0 as XLA prints it: "f32[2,3]{1,0:S(1)}").
  std::string ToString(bool print_layout = false) const;

  // Equality of types and dimensions (layouts ignored).
  bool Compatible(const Shape& other) const;
  bool operator==(const Shape& other) const;  // also compares layouts
  bool operator!=(const Shape& other) const { return !(*this == other); }

 private:
  PrimitiveType type_ = PrimitiveType::kInvalid;
  std::vector<int64_t> dims_;
  std::vector<int64_t> layout_;  // minor_to_major
  int64_t memory_space_ = 0;
  std::vector<Shape> tuple_;
};

// Row-major linear index of a multi-dimensional index.
inline int64_t LinearIndex(absl::Span<const int64_t> index,
                           absl::Span<const int64_t> strides) {
  int64_t linear = 0;
  for (size_t i = 0; i < index.size(); ++i) linear += index[i] * strides[i];
  return linear;
}

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_SHAPE_H_
