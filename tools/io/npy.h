// NumPy .npy files (format 1.0, 2.0 and 3.0 headers) <-> hlo::Literal.
//
// Read: little-endian, C order; dtypes bool, int8..int64, uint8..uint64,
// float16, float32, float64, complex64, complex128 and ml_dtypes' bfloat16
// ('<V2'). Anything else (big-endian, fortran_order, object/structured or an
// unknown dtype) is rejected with a message naming the file and the problem.
// The data size must match the header's shape exactly, and nothing is
// allocated from header values before they are checked against the bytes
// actually present.
//
// Conversion into a requested hlo::Shape: the dtype of the same storage is
// copied bit for bit; any float dtype -> f16/bf16/f32/f64 (round to nearest
// even), any integer dtype -> any integer type when every value is in range,
// bool and 0/1 uint8 -> pred, complex64/complex128 (or a float dtype, with a
// zero imaginary part) -> c64/c128. Other pairings are errors that name the
// expected shape and the accepted dtypes.
//
// Write: array literals only, each type as its own dtype (pred as bool, f16
// as float16, c64 as complex64, bf16 as float32 by default or as ml_dtypes'
// bfloat16).
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

enum class NpyDtype {
  kBool, kInt8, kInt16, kInt32, kInt64, kUint8, kUint16, kUint32, kUint64,
  kFloat16, kFloat32, kFloat64,
  kBfloat16,  // ml_dtypes' bfloat16 ('<V2' as np.save writes it)
  kComplex64, kComplex128,
};

struct NpyWriteOptions {
  // bf16 written as float32 (exact) instead of ml_dtypes' bfloat16 ('<V2').
  bool bf16_as_float32 = true;
};

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

// A .npy header: what the data is and where it starts.
struct NpyHeader {
  NpyDtype dtype = NpyDtype::kFloat32;
  std::vector<int64_t> shape;
  int64_t data_offset = 0;
  int64_t data_bytes = 0;
};
// Header dicts longer than this are rejected (numpy's are ~100 bytes).
inline constexpr int64_t kMaxNpyHeaderBytes = int64_t{1} << 20;

// Parses the magic, version and header of a .npy file from its first bytes
// (all of the header must be in `bytes`) and checks that the data the
// header describes is exactly what a file of `file_size` bytes holds.
absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, int64_t file_size,
                                         absl::string_view filename);

// Parses .npy bytes; `filename` prefixes every error (INVALID_ARGUMENT for
// malformed files, UNIMPLEMENTED for valid but unsupported ones).
absl::StatusOr<NpyArray> ParseNpy(std::string bytes, absl::string_view filename);
// Reads a .npy file: a regular file only (RegularFile), whose size is
// checked against its header before any data is read.
absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path);

// Reads a .npy file straight into a literal of exactly `shape`: the header
// is checked (regular file, size, shape and dtype against `shape`) before
// anything is allocated, and the data is read into the literal (converted
// chunk by chunk when the dtypes differ), so the array is in memory once.
absl::StatusOr<hlo::Literal> ReadNpyAsLiteral(const std::string& path, const hlo::Shape& shape);

// Reads only a box of the array at `path`: the file must hold an array of
// `global`'s shape (converted as ReadNpyAsLiteral does). The box of `extent`
// elements at `origin` is read by offset (never the whole file) into a
// literal of shape `piece`, laid out as a row-major array of `dims` (the
// box's rank) with the box at its origin and zeros elsewhere. What a rank of
// a distributed run reads of a global input (runtime/device/sharding_io.h
// PieceBoxOf).
absl::StatusOr<hlo::Literal> ReadNpyBox(const std::string& path, const hlo::Shape& global,
                                        const std::vector<int64_t>& origin,
                                        const std::vector<int64_t>& extent,
                                        const std::vector<int64_t>& dims,
                                        const hlo::Shape& piece);

// Converts to a literal of exactly `shape` (an array shape). Errors name the
// file, what it holds and what was expected.
absl::StatusOr<hlo::Literal> NpyToLiteral(const NpyArray& array,
                                          const hlo::Shape& shape,
                                          absl::string_view filename);

// The .npy dtypes accepted for an element type, e.g. "float32 or float64";
// empty when none is.
std::string AcceptedNpyDtypes(hlo::PrimitiveType type);

// The .npy dtype a literal of `type` is written as (descr like "<f4").
absl::StatusOr<std::string> NpyDescrForType(hlo::PrimitiveType type,
                                            const NpyWriteOptions& options = {});

// Serializes an array literal as a format 1.0 .npy file (2.0 if the header
// does not fit); the header is padded so the data starts 64-byte aligned.
absl::StatusOr<std::string> LiteralToNpy(const hlo::Literal& literal,
                                         const NpyWriteOptions& options = {});

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_NPY_H_
