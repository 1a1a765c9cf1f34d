// cholesky and triangular-solve on Eigen, with XLA's semantics: only the
// named triangle of the operand is read; cholesky's other triangle is zero
// and a matrix that is not positive definite comes out all NaN (XLA's
// expander); triangular-solve solves op(a) x = b (left_side) or
// x op(a) = b with op = identity, transpose or adjoint, and a unit
// diagonal assumed when asked. Batched over the leading dimensions.
#include <Eigen/Dense>

#include <complex>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/emulator/ops_extra.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::PrimitiveType;
using hlo::TriangularTranspose;

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <typename T>
void Cholesky(const HloInstruction& instr, const T* in, T* out) {
  const hlo::Shape& s = instr.shape();
  const int64_t n = s.dimensions(s.rank() - 1);
  const int64_t batch = n == 0 ? 0 : s.num_elements() / (n * n);
  const bool lower = instr.attrs().lower;
  using Real = typename Eigen::NumTraits<T>::Real;
  for (int64_t b = 0; b < batch; ++b) {
    Eigen::Map<const RowMatrix<T>> a(in + b * n * n, n, n);
    Eigen::Map<RowMatrix<T>> r(out + b * n * n, n, n);
    bool ok;
    if (lower) {
      Eigen::LLT<RowMatrix<T>, Eigen::Lower> llt(a);
      ok = llt.info() == Eigen::Success;
      r = llt.matrixL();
    } else {
      Eigen::LLT<RowMatrix<T>, Eigen::Upper> llt(a);
      ok = llt.info() == Eigen::Success;
      r = llt.matrixU();
    }
    if (!ok) r.setConstant(T(std::numeric_limits<Real>::quiet_NaN()));
  }
}

template <typename T>
void TriangularSolve(const HloInstruction& instr, const T* a_data, const T* b_data, T* out) {
  const hlo::HloAttributes& at = instr.attrs();
  const hlo::Shape& bs = instr.shape();
  const int64_t rows = bs.dimensions(bs.rank() - 2), cols = bs.dimensions(bs.rank() - 1);
  const int64_t m = at.left_side ? rows : cols;
  const int64_t batch = rows * cols == 0 ? 0 : bs.num_elements() / (rows * cols);
  // XLA's expander treats anything but NO_TRANSPOSE as a transpose.
  const bool transpose = at.transpose_a != TriangularTranspose::kNoTranspose;
  const bool conjugate = at.transpose_a == TriangularTranspose::kAdjoint;
  // op(a) as a dense matrix (the unread triangle zero): lower triangular
  // when a's lower triangle is used untransposed, or its upper one transposed.
  const bool op_lower = at.lower != transpose;
  RowMatrix<T> op(m, m);
  for (int64_t k = 0; k < batch; ++k) {
    Eigen::Map<const RowMatrix<T>> a(a_data + k * m * m, m, m);
    op.setZero();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        const bool in_triangle = at.lower ? j <= i : j >= i;
        if (!in_triangle) continue;
        T v = i == j && at.unit_diagonal ? T(1) : a(i, j);
        if (conjugate) v = Eigen::numext::conj(v);
        if (transpose) {
          op(j, i) = v;
        } else {
          op(i, j) = v;
        }
      }
    }
    Eigen::Map<RowMatrix<T>> x(out + k * rows * cols, rows, cols);
    x = Eigen::Map<const RowMatrix<T>>(b_data + k * rows * cols, rows, cols);
    if (at.left_side) {
      if (op_lower) {
        op.template triangularView<Eigen::Lower>().solveInPlace(x);
      } else {
        op.template triangularView<Eigen::Upper>().solveInPlace(x);
      }
    } else if (op_lower) {
      op.template triangularView<Eigen::Lower>().template solveInPlace<Eigen::OnTheRight>(x);
    } else {
      op.template triangularView<Eigen::Upper>().template solveInPlace<Eigen::OnTheRight>(x);
    }
  }
}

absl::Status UnsupportedType(const HloInstruction& instr) {
  return absl::UnimplementedError(absl::StrCat(
      hlo::HloOpcodeString(instr.opcode()), " (%", instr.name(), ") of ",
      hlo::PrimitiveTypeName(instr.shape().element_type()),
      " is not supported by the emulator (f32, f64, c64, c128)"));
}

}  // namespace

absl::Status CholeskyKernel(const HloInstruction& instr, const void* in, void* out) {
  switch (instr.shape().element_type()) {
    case PrimitiveType::kF32:
      Cholesky(instr, static_cast<const float*>(in), static_cast<float*>(out));
      return absl::OkStatus();
    case PrimitiveType::kF64:
      Cholesky(instr, static_cast<const double*>(in), static_cast<double*>(out));
      return absl::OkStatus();
    case PrimitiveType::kC64:
      Cholesky(instr, static_cast<const std::complex<float>*>(in),
               static_cast<std::complex<float>*>(out));
      return absl::OkStatus();
    case PrimitiveType::kC128:
      Cholesky(instr, static_cast<const std::complex<double>*>(in),
               static_cast<std::complex<double>*>(out));
      return absl::OkStatus();
    default:
      return UnsupportedType(instr);
  }
}

absl::Status TriangularSolveKernel(const HloInstruction& instr, const void* a, const void* b,
                                   void* out) {
  switch (instr.shape().element_type()) {
    case PrimitiveType::kF32:
      TriangularSolve(instr, static_cast<const float*>(a), static_cast<const float*>(b),
                      static_cast<float*>(out));
      return absl::OkStatus();
    case PrimitiveType::kF64:
      TriangularSolve(instr, static_cast<const double*>(a), static_cast<const double*>(b),
                      static_cast<double*>(out));
      return absl::OkStatus();
    case PrimitiveType::kC64:
      TriangularSolve(instr, static_cast<const std::complex<float>*>(a),
                      static_cast<const std::complex<float>*>(b),
                      static_cast<std::complex<float>*>(out));
      return absl::OkStatus();
    case PrimitiveType::kC128:
      TriangularSolve(instr, static_cast<const std::complex<double>*>(a),
                      static_cast<const std::complex<double>*>(b),
                      static_cast<std::complex<double>*>(out));
      return absl::OkStatus();
    default:
      return UnsupportedType(instr);
  }
}

}  // namespace tpuoff::runtime
