// NumPy arrays <-> hlo::Literal without copies: inputs are borrowed (the
// emulator never writes an argument), outputs hand the runtime's buffer to
// NumPy, which frees it with the array.
#ifndef TPUOFF_PYTHON_SRC_ARRAYS_H_
#define TPUOFF_PYTHON_SRC_ARRAYS_H_

#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "absl/status/statusor.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/shape.h"

namespace tpuoff::python {

// Any CPU array nanobind can import (DLPack or the buffer protocol), read-only.
using InputArray = nanobind::ndarray<nanobind::ro, nanobind::device::cpu>;

// The NumPy name of an element type ("float32", "int32", "bool"; bf16 is
// "bfloat16", which the Python side maps to ml_dtypes).
std::string NumpyTypeName(hlo::PrimitiveType type);

// A literal of `shape` viewing `array`'s memory. INVALID_ARGUMENT naming
// `what` when the array cannot be borrowed as it is: another element type
// (bf16 takes uint16 arrays holding the raw bits, which is how the Python
// side passes ml_dtypes.bfloat16 arrays), another shape, not C-contiguous,
// or not aligned to its element size. Nothing is ever converted or copied.
absl::StatusOr<hlo::Literal> BorrowInput(const std::string& what, const InputArray& array,
                                         const hlo::Shape& shape);

// A NumPy array over the literal's bytes that owns the literal (moved to the
// heap and deleted with the array). bf16 comes out as uint16 bits, c64 and
// c128 as complex64 and complex128 (every array type has a NumPy type);
// None for a token.
nanobind::object OutputArray(hlo::Literal literal);

}  // namespace tpuoff::python

#endif  // TPUOFF_PYTHON_SRC_ARRAYS_H_
