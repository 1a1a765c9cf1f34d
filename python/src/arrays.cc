#include "python/src/arrays.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace nb = nanobind;

namespace tpuoff::python {
namespace {

using hlo::PrimitiveType;
using nb::dlpack::dtype_code;

// The DLPack type an array of `type` has on the NumPy side (bf16: uint16).
nb::dlpack::dtype DlpackType(PrimitiveType type) {
  auto make = [](dtype_code code, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  };
  switch (type) {
    case PrimitiveType::kPred: return make(dtype_code::Bool, 8);
    case PrimitiveType::kS8: return make(dtype_code::Int, 8);
    case PrimitiveType::kS16: return make(dtype_code::Int, 16);
    case PrimitiveType::kS32: return make(dtype_code::Int, 32);
    case PrimitiveType::kS64: return make(dtype_code::Int, 64);
    case PrimitiveType::kU8: return make(dtype_code::UInt, 8);
    case PrimitiveType::kU16: return make(dtype_code::UInt, 16);
    case PrimitiveType::kU32: return make(dtype_code::UInt, 32);
    case PrimitiveType::kU64: return make(dtype_code::UInt, 64);
    case PrimitiveType::kF16: return make(dtype_code::Float, 16);
    case PrimitiveType::kF32: return make(dtype_code::Float, 32);
    case PrimitiveType::kF64: return make(dtype_code::Float, 64);
    case PrimitiveType::kBF16: return make(dtype_code::UInt, 16);
    case PrimitiveType::kC64: return make(dtype_code::Complex, 64);
    case PrimitiveType::kC128: return make(dtype_code::Complex, 128);
    // Not arrays: no NumPy type (every array type has one above; the
    // switch lists every enumerator, so a new one is a -Wswitch warning).
    case PrimitiveType::kInvalid:
    case PrimitiveType::kTuple:
    case PrimitiveType::kToken: break;
  }
  return make(dtype_code::Int, 0);
}

std::string DlpackTypeName(const nb::dlpack::dtype& t) {
  const char* kind = "?";
  switch (static_cast<dtype_code>(t.code)) {
    case dtype_code::Int: kind = "int"; break;
    case dtype_code::UInt: kind = "uint"; break;
    case dtype_code::Float: kind = "float"; break;
    case dtype_code::Bfloat: kind = "bfloat"; break;
    case dtype_code::Complex: kind = "complex"; break;
    case dtype_code::Bool: return "bool";
    default: break;
  }
  return absl::StrCat(kind, static_cast<int>(t.bits));
}

std::string ShapeText(const InputArray& a) {
  std::vector<int64_t> dims;
  for (size_t i = 0; i < a.ndim(); ++i) dims.push_back(static_cast<int64_t>(a.shape(i)));
  return absl::StrCat("(", absl::StrJoin(dims, ", "), dims.size() == 1 ? ",)" : ")");
}

}  // namespace

std::string NumpyTypeName(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kPred: return "bool";
    case PrimitiveType::kBF16: return "bfloat16";
    case PrimitiveType::kF16: return "float16";
    case PrimitiveType::kF32: return "float32";
    case PrimitiveType::kF64: return "float64";
    case PrimitiveType::kC64: return "complex64";
    case PrimitiveType::kC128: return "complex128";
    default: break;
  }
  const nb::dlpack::dtype t = DlpackType(type);
  return t.bits == 0 ? std::string(hlo::PrimitiveTypeName(type)) : DlpackTypeName(t);
}

absl::StatusOr<hlo::Literal> BorrowInput(const std::string& what, const InputArray& a,
                                         const hlo::Shape& shape) {
  const std::string expected =
      absl::StrCat(what, ": the parameter is ", shape.ToString(), " (numpy ",
                   NumpyTypeName(shape.element_type()), ", shape (",
                   absl::StrJoin(shape.dimensions(), ", "), shape.rank() == 1 ? ",))" : "))");
  const nb::dlpack::dtype want = DlpackType(shape.element_type());
  if (want.bits == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(expected, ", which cannot be passed from Python"));
  }
  if (a.dtype() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        expected, "; got a ", DlpackTypeName(a.dtype()),
        " array. tpuoff.run borrows inputs and never converts them: pass "
        "x.astype(<that dtype>)"));
  }
  bool same_shape = static_cast<int64_t>(a.ndim()) == shape.rank();
  for (int64_t i = 0; same_shape && i < shape.rank(); ++i) {
    same_shape = static_cast<int64_t>(a.shape(i)) == shape.dimensions(i);
  }
  if (!same_shape) {
    return absl::InvalidArgumentError(
        absl::StrCat(expected, "; got shape ", ShapeText(a)));
  }
  // C order: each stride (in elements) is the product of the later
  // dimensions; dimensions of size 1 may have any stride, and an array
  // without elements any strides (NumPy gives empty arrays zero strides).
  int64_t expected_stride = 1;
  for (int64_t i = shape.rank() - 1; i >= 0 && shape.num_elements() > 0; --i) {
    const int64_t n = shape.dimensions(i);
    if (n != 1 && a.stride(i) != expected_stride) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": the array is not C-contiguous (shape ", ShapeText(a),
          ", strides in elements differ from row-major). tpuoff.run borrows "
          "inputs and never copies them: pass np.ascontiguousarray(x)"));
    }
    expected_stride *= n;
  }
  const auto address = reinterpret_cast<uintptr_t>(a.data());
  const int64_t width = hlo::ByteWidth(shape.element_type());
  if (shape.num_elements() > 0 && address % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": the array's data is not aligned to its ", width,
        "-byte elements. tpuoff.run borrows inputs and never copies them: pass "
        "np.require(x, requirements='CA')"));
  }
  return hlo::Literal::BorrowArray(shape, a.data());
}

nb::object OutputArray(hlo::Literal literal) {
  if (!literal.shape().IsArray()) return nb::none();  // a token leaf
  auto owned = std::make_unique<hlo::Literal>(std::move(literal));
  const hlo::Shape& shape = owned->shape();
  std::vector<size_t> dims(shape.dimensions().begin(), shape.dimensions().end());
  void* data = owned->raw();
  const nb::dlpack::dtype type = DlpackType(shape.element_type());
  nb::capsule owner(owned.get(), [](void* p) noexcept { delete static_cast<hlo::Literal*>(p); });
  owned.release();
  return nb::ndarray<nb::numpy>(data, dims.size(), dims.data(), owner, nullptr, type).cast();
}

}  // namespace tpuoff::python
