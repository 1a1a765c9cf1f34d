// NumPy .npy files (format 1.0, 2.0 and 3.0 headers) <-> hlo::Literal.
//
// Read: little-endian, C order; dtypes float32, float64, int32, int64, bool,
// uint8. Anything else (big-endian, fortran_order, object/structured or an
// unknown dtype) is rejected with a message naming the file and the problem.
// The data size must match the header's shape exactly, and nothing is
// allocated from header values before they are checked against the bytes
// actually present.
//
// Conversion into a requested hlo::Shape: float32/float64 -> f32/f64/bf16/f16
// (round to nearest even), int32/int64/uint8 -> any integer type when every
// value is in range, bool and 0/1 uint8 -> pred. Other pairings are errors
// that name the expected shape and the accepted dtypes.
//
// Write: array literals only; bf16/f16 are written as float32, pred as bool,
// sN/uN as intN/uintN, f32/f64 as themselves.
#ifndef TPUOFF_TOOLS_IO_NPY_H_
#define TPUOFF_TOOLS_IO_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/shape.h"

namespace tpuoff::tools {

enum class NpyDtype { kBool, kUint8, kInt32, kInt64, kFloat32, kFloat64 };

// "float32", "bool", ...
absl::string_view NpyDtypeName(NpyDtype dtype);
int64_t NpyItemSize(NpyDtype dtype);

// A parsed .npy file; owns the file bytes, data() views the array payload.
class NpyArray {
 public:
  NpyDtype dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t num_elements() const;
  absl::string_view data() const {
    return absl::string_view(bytes_).substr(data_offset_);
  }
  // "(2, 3)" as numpy prints shapes.
  std::string ShapeString() const;

 private:
  friend absl::StatusOr<NpyArray> ParseNpy(std::string bytes,
                                           absl::string_view filename);
  NpyDtype dtype_ = NpyDtype::kFloat32;
  std::vector<int64_t> shape_;
  std::string bytes_;
  size_t data_offset_ = 0;
};

// Parses .npy bytes; `filename` prefixes every error (INVALID_ARGUMENT for
// malformed files, UNIMPLEMENTED for valid but unsupported ones).
absl::StatusOr<NpyArray> ParseNpy(std::string bytes, absl::string_view filename);
// ReadFile + ParseNpy.
absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path);

// Converts to a literal of exactly `shape` (an array shape). Errors name the
// file, what it holds and what was expected.
absl::StatusOr<hlo::Literal> NpyToLiteral(const NpyArray& array,
                                          const hlo::Shape& shape,
                                          absl::string_view filename);

// The .npy dtypes accepted for an element type, e.g. "float32 or float64";
// empty when none is.
std::string AcceptedNpyDtypes(hlo::PrimitiveType type);

// The .npy dtype a literal of `type` is written as (descr like "<f4").
absl::StatusOr<std::string> NpyDescrForType(hlo::PrimitiveType type);

// Serializes an array literal as a format 1.0 .npy file (2.0 if the header
// does not fit); the header is padded so the data starts 64-byte aligned.
absl::StatusOr<std::string> LiteralToNpy(const hlo::Literal& literal);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_NPY_H_
