// A dense array (row-major bytes) or a tuple of literals. Used for constants
// and as the host-side value of inputs and outputs.
#ifndef TPUOFF_HLO_IR_LITERAL_H_
#define TPUOFF_HLO_IR_LITERAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "hlo/ir/shape.h"

namespace tpuoff::hlo {

class Literal {
 public:
  Literal() = default;
  explicit Literal(const Shape& shape);  // zero-filled (recursively)
  // Copies are deep (also of adopted storage); moves keep the storage.
  Literal(const Literal& other);
  Literal& operator=(const Literal& other);
  Literal(Literal&&) = default;
  Literal& operator=(Literal&&) = default;

  // An array literal that takes ownership of `data` (byte_size(shape)
  // bytes, released with free_fn) instead of allocating: lets a runtime hand
  // its result buffers over without copying them.
  static Literal AdoptArray(const Shape& shape, void* data, void (*free_fn)(void*));
  // An array literal that views `data` (byte_size(shape) bytes) without
  // owning it: the caller keeps the memory alive while the literal is used.
  // Lets a caller hand its own arrays to a runtime as read-only arguments
  // without copying them (the emulator never writes an argument).
  static Literal BorrowArray(const Shape& shape, const void* data) {
    return AdoptArray(shape, const_cast<void*>(data), nullptr);
  }

  template <typename T>
  static Literal FromVector(PrimitiveType type, std::vector<int64_t> dims,
                            absl::Span<const T> values);
  static Literal ScalarF32(float v);
  static Literal ScalarS32(int32_t v);
  static Literal Tuple(std::vector<Literal> elements);

  const Shape& shape() const { return shape_; }
  Shape* mutable_shape() { return &shape_; }
  int64_t num_elements() const { return shape_.num_elements(); }

  uint8_t* raw() { return adopted_ ? adopted_.get() : bytes_.data(); }
  const uint8_t* raw() const { return adopted_ ? adopted_.get() : bytes_.data(); }
  int64_t raw_size() const {
    return adopted_ ? adopted_size_ : static_cast<int64_t>(bytes_.size());
  }

  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(raw());
  }

  // Element access through double / int64 (bf16, f16 converted; pred 0/1;
  // complex: the real part, set with a zero imaginary part).
  double GetAsDouble(int64_t linear_index) const;
  void SetFromDouble(int64_t linear_index, double value);
  int64_t GetAsInt64(int64_t linear_index) const;
  void SetFromInt64(int64_t linear_index, int64_t value);

  const std::vector<Literal>& tuple_elements() const { return elements_; }
  std::vector<Literal>* mutable_tuple_elements() { return &elements_; }

  bool operator==(const Literal& other) const;  // bitwise, shapes compatible

 private:
  struct Release {
    constexpr Release() noexcept : free_fn(nullptr) {}
    constexpr explicit Release(void (*f)(void*)) noexcept : free_fn(f) {}
    void (*free_fn)(void*);
    void operator()(uint8_t* p) const {
      if (free_fn) free_fn(p);
    }
  };

  Shape shape_;
  std::vector<uint8_t> bytes_;  // owned storage (empty when adopted)
  std::unique_ptr<uint8_t, Release> adopted_;
  int64_t adopted_size_ = 0;
  std::vector<Literal> elements_;
};

template <typename T>
Literal Literal::FromVector(PrimitiveType type, std::vector<int64_t> dims,
                            absl::Span<const T> values) {
  Literal lit(Shape(type, std::move(dims)));
  for (int64_t i = 0; i < lit.num_elements() &&
                      i < static_cast<int64_t>(values.size());
       ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      lit.SetFromDouble(i, static_cast<double>(values[i]));
    } else {
      lit.SetFromInt64(i, static_cast<int64_t>(values[i]));
    }
  }
  return lit;
}

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_LITERAL_H_
