// dot through Eigen. Operands become [batch, M, K] and [batch, K, N] stacks
// in the accumulation type (f32, or f64 when any side is f64): the source
// itself when it is already that type with its dimensions in either order
// (a transposed operand is read as column-major), a contiguous conversion
// (bf16/f16) in that case, else a permuting pack. The product of each fixed
// block of rows runs single-threaded in Eigen, blocks are spread over the
// emulator's pool, so results do not depend on the thread count. bf16 x bf16 dots
// run on oneDNN's native bf16 matmul instead where the CPU has one
// (runtime/emulator/gemm.h), on the bf16 operands as stored.
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Core>
#include <algorithm>
#include <complex>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "runtime/cpu/elementwise_kernels.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/parallel.h"
#include "runtime/emulator/gemm.h"
#include "runtime/emulator/ops.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::PrimitiveType;
using hlo::Shape;

// Rows of C per task: a fixed partition (results do not depend on the thread
// count), large enough that Eigen packs each B panel for many rows.
constexpr int64_t kDotRowBlock = 256;
// Fewer row-block tasks than this also split the columns, in blocks of
// kDotColBlock (a multiple of Eigen's 4- and 8-column kernels).
constexpr int64_t kDotMinTasks = 4;
constexpr int64_t kDotColBlock = 128;

// Packs `s` permuted by `perm` (packed dim i = source dim perm[i]) into T.
template <typename T>
void Pack(const void* src, const Shape& s, const std::vector<int64_t>& perm,
          T* dst) {
  const int64_t n = s.num_elements();
  if (n == 0) return;
  const int64_t rank = s.rank();
  const PrimitiveType type = s.element_type();
  const int64_t width = hlo::ByteWidth(type);
  const LoadKernel load = GetLoadKernel(type);
  // Floats below f64 load straight into float; anything else goes through
  // f64 (exact for integers up to 2^53).
  const bool via_float = type == PrimitiveType::kF32 ||
                         type == PrimitiveType::kBF16 || type == PrimitiveType::kF16;
  const UnaryKernel to_f64 =
      via_float ? nullptr : GetConvertKernel(type, PrimitiveType::kF64).value();
  const std::vector<int64_t> strides = rank ? s.Strides() : std::vector<int64_t>{};
  const int64_t cols = rank ? s.dimensions(perm[rank - 1]) : 1;
  const int64_t minor_stride = rank ? strides[perm[rank - 1]] : 1;
  std::vector<int64_t> row_dims;
  for (int64_t i = 0; i + 1 < rank; ++i) row_dims.push_back(s.dimensions(perm[i]));
  std::vector<int64_t> idx(std::max<int64_t>(rank - 1, 0), 0);
  std::vector<uint64_t> raw(cols);
  std::vector<double> dtmp(cols);
  for (int64_t row = 0; row * cols < n; ++row) {
    int64_t base = 0;
    for (int64_t i = 0; i + 1 < rank; ++i) base += idx[i] * strides[perm[i]];
    const uint8_t* p = static_cast<const uint8_t*>(src) + base * width;
    T* d = dst + row * cols;
    if (via_float) {
      const float* f = reinterpret_cast<const float*>(raw.data());
      load(p, minor_stride, raw.data(), cols);
      for (int64_t c = 0; c < cols; ++c) d[c] = static_cast<T>(f[c]);
    } else {
      load(p, minor_stride, raw.data(), cols);
      to_f64(raw.data(), dtmp.data(), cols);
      for (int64_t c = 0; c < cols; ++c) d[c] = static_cast<T>(dtmp[c]);
    }
    for (int64_t i = static_cast<int64_t>(row_dims.size()) - 1; i >= 0; --i) {
      if (++idx[i] < row_dims[i]) break;
      idx[i] = 0;
    }
  }
}

struct DotGeometry {
  std::vector<int64_t> lhs_perm, rhs_perm;  // [batch, m, k] and [batch, k, n]
  int64_t batch = 1, m = 1, k = 1, n = 1;
  size_t num_batch = 0, num_m = 0, num_k = 0;  // dims in each group
};

DotGeometry Geometry(const HloInstruction& instr) {
  const hlo::DotDimensionNumbers& d = instr.attrs().dot;
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  DotGeometry g;
  auto free_dims = [](const Shape& s, const std::vector<int64_t>& a,
                      const std::vector<int64_t>& b) {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < s.rank(); ++i) {
      if (std::find(a.begin(), a.end(), i) == a.end() &&
          std::find(b.begin(), b.end(), i) == b.end()) {
        out.push_back(i);
      }
    }
    return out;
  };
  const auto lf = free_dims(ls, d.lhs_batch_dimensions, d.lhs_contracting_dimensions);
  const auto rf = free_dims(rs, d.rhs_batch_dimensions, d.rhs_contracting_dimensions);
  g.num_batch = d.lhs_batch_dimensions.size();
  g.num_m = lf.size();
  g.num_k = d.lhs_contracting_dimensions.size();
  for (int64_t i : d.lhs_batch_dimensions) {
    g.lhs_perm.push_back(i);
    g.batch *= ls.dimensions(i);
  }
  for (int64_t i : lf) {
    g.lhs_perm.push_back(i);
    g.m *= ls.dimensions(i);
  }
  for (int64_t i : d.lhs_contracting_dimensions) {
    g.lhs_perm.push_back(i);
    g.k *= ls.dimensions(i);
  }
  g.rhs_perm = d.rhs_batch_dimensions;
  for (int64_t i : d.rhs_contracting_dimensions) g.rhs_perm.push_back(i);
  for (int64_t i : rf) {
    g.rhs_perm.push_back(i);
    g.n *= rs.dimensions(i);
  }
  return g;
}

// Scratch arrays from the recycling host allocator (runtime/cpu/host_memory.h):
// a dot inside a loop over vocab tiles converts operands of the same sizes
// every iteration, and fresh memory would cost page faults each time.
template <typename T>
class HostArray {
 public:
  HostArray() = default;
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;
  ~HostArray() { HostFree(p_); }
  // Uninitialised; nullptr when the host is out of memory.
  T* Allocate(int64_t n) {
    HostFree(p_);
    p_ = static_cast<T*>(HostAlloc(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)));
    return p_;
  }

 private:
  T* p_ = nullptr;
};

absl::Status HostExhausted(int64_t bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat("dot: host memory exhausted allocating ", bytes, " bytes of scratch"));
}

// A [batch, rows, cols] stack of matrices in T: row-major, or column-major
// when the source stores each matrix transposed.
template <typename T>
struct Operand {
  const T* data = nullptr;
  bool col_major = false;
  HostArray<T> storage;  // when data is not the source itself
};

// Whether `perm` (packed dims: batch, then group 1, then group 2, sizes
// nb, n1, n2) reads the source in order (0) or with the two groups swapped,
// each in order (1: every matrix stored transposed); -1 otherwise.
int Layout(const std::vector<int64_t>& perm, size_t nb, size_t n1) {
  const size_t r = perm.size(), n2 = r - nb - n1;
  bool identity = true, swapped = true;
  for (size_t i = 0; i < r; ++i) {
    identity &= perm[i] == static_cast<int64_t>(i);
    int64_t want = static_cast<int64_t>(i);  // batch dims stay
    if (i >= nb && i < nb + n1) want = static_cast<int64_t>(i + n2);
    if (i >= nb + n1) want = static_cast<int64_t>(i - n1);
    swapped &= perm[i] == want;
  }
  return identity ? 0 : swapped ? 1 : -1;
}

// The operand as matrices of T: the source itself when it already is T in
// a usable layout, else converted in source order (a contiguous pass), else
// packed through the permutation.
template <typename T>
absl::Status MakeOperand(const void* src, const Shape& s, const std::vector<int64_t>& perm,
                         size_t nb, size_t n1, Operand<T>* op) {
  const int layout = Layout(perm, nb, n1);
  const int64_t n = s.num_elements();
  const PrimitiveType type = s.element_type();
  const bool same = (std::is_same_v<T, float> && type == PrimitiveType::kF32) ||
                    (std::is_same_v<T, double> && type == PrimitiveType::kF64);
  op->col_major = layout == 1;
  if (layout >= 0 && same) {
    op->data = static_cast<const T*>(src);
    return absl::OkStatus();
  }
  T* data = op->storage.Allocate(n);
  if (data == nullptr) return HostExhausted(n * sizeof(T));
  op->data = data;
  const bool half = type == PrimitiveType::kBF16 || type == PrimitiveType::kF16;
  if (layout >= 0 && half && std::is_same_v<T, float>) {
    GetLoadKernel(type)(src, 1, data, n);  // 16-bit floats -> f32
    return absl::OkStatus();
  }
  op->col_major = false;
  Pack<T>(src, s, perm, data);
  return absl::OkStatus();
}

// The accumulator array `c` as the dot's result at `out` (nothing to do
// when c is the result itself).
template <typename T>
absl::Status StoreResult(PrimitiveType acc_type, PrimitiveType out_type, const T* c, void* out,
                         int64_t out_n) {
  if (out_type == acc_type) return absl::OkStatus();
  ASSIGN_OR_RETURN(UnaryKernel conv, GetConvertKernel(acc_type, out_type));
  HostArray<uint64_t> converted;
  uint64_t* tmp = converted.Allocate(out_n);
  if (tmp == nullptr) return HostExhausted(out_n * 8);
  conv(c, tmp, out_n);
  GetStoreKernel(out_type)(tmp, out, out_n);
  return absl::OkStatus();
}

// C = A * B into `c` (out_n elements of T), then stored as `out_type` at
// `out` (in place when T is the output type).
template <typename T>
absl::Status FloatDot(const HloInstruction& instr, const DotGeometry& g, const void* lhs,
                      const void* rhs, void* out, int num_threads) {
  const PrimitiveType acc_type = std::is_same_v<T, float> ? PrimitiveType::kF32
                                                          : PrimitiveType::kF64;
  const PrimitiveType out_type = instr.shape().element_type();
  const int64_t out_n = g.batch * g.m * g.n;
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  HostArray<T> scratch;
  T* c = out_type == acc_type ? static_cast<T*>(out) : scratch.Allocate(out_n);
  if (c == nullptr) return HostExhausted(out_n * sizeof(T));
  if (out_n == 0) return absl::OkStatus();
  // bf16 x bf16 with oneDNN's native bf16 matmul where this CPU has one
  // (avx512_bf16, AMX; runtime/emulator/gemm.h), straight from the bf16
  // operands. Everything else converts to the accumulation type and runs on
  // Eigen: on AVX2 hosts oneDNN's f32 matmul, run as the same fixed block
  // grid, measured 10-20% slower than Eigen's here (2-core AMD EPYC,
  // grpo_fused_linear f32, 3 interleaved runs each).
  if (std::is_same_v<T, float> && g.k > 0 && ls.element_type() == PrimitiveType::kBF16 &&
      rs.element_type() == PrimitiveType::kBF16 && GemmWorthIt(g.batch, g.m, g.k, g.n) &&
      GemmNativeBf16()) {
    const int la = Layout(g.lhs_perm, g.num_batch, g.num_m);
    const int lb = Layout(g.rhs_perm, g.num_batch, g.num_k);
    if (la >= 0 && lb >= 0) {
      RETURN_IF_ERROR(Gemm(g.batch, g.m, g.k, g.n, {lhs, GemmType::kBf16, la == 1},
                           {rhs, GemmType::kBf16, lb == 1}, reinterpret_cast<float*>(c),
                           num_threads));
      return StoreResult(acc_type, out_type, c, out, out_n);
    }
  }
  Operand<T> a, b;
  RETURN_IF_ERROR(MakeOperand(lhs, ls, g.lhs_perm, g.num_batch, g.num_m, &a));
  RETURN_IF_ERROR(MakeOperand(rhs, rs, g.rhs_perm, g.num_batch, g.num_k, &b));
  if (g.k > 0) {
    MatMul<T>(g, a, b, c, num_threads);
  } else {
    std::fill(c, c + out_n, T(0));
  }
  return StoreResult(acc_type, out_type, c, out, out_n);
}

// C[b] = A[b] * B[b] for [m, k] x [k, n] matrices, blocks of C spread over
// the emulator's pool (runtime/cpu/parallel.h: no OpenMP team whose idle
// threads busy-wait between the many small dots of a loop): row blocks of
// kDotRowBlock, and when they are too few to share (an RNN step's [16, K]
// x [K, N]) column blocks of kDotColBlock too. The grid is a function of
// the shape and each block's product is single-threaded, so results do
// not depend on the thread count.
template <typename T>
void MatMul(const DotGeometry& g, const Operand<T>& a, const Operand<T>& b, T* c, int threads) {
  using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  using Stride = Eigen::OuterStride<>;
  const int64_t blocks = (g.m + kDotRowBlock - 1) / kDotRowBlock;
  const int64_t col_blocks = g.batch * blocks < kDotMinTasks && g.n >= 2 * kDotColBlock
                                 ? (g.n + kDotColBlock - 1) / kDotColBlock
                                 : 1;
  const int64_t col_block = col_blocks == 1 ? g.n : kDotColBlock;
  const int64_t tasks = g.batch * blocks * col_blocks;
  const int nt = g.batch * g.m * g.n * g.k < (1 << 18) ? 1 : std::max(1, threads);
  ParallelFor(nt, tasks, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bi = t / (blocks * col_blocks);
      const int64_t r0 = (t / col_blocks % blocks) * kDotRowBlock;
      const int64_t n0 = t % col_blocks * col_block;
      const int64_t rows = std::min(kDotRowBlock, g.m - r0);
      const int64_t cols = std::min(col_block, g.n - n0);
      Eigen::Map<RowMat, 0, Stride> C(c + (bi * g.m + r0) * g.n + n0, rows, cols, Stride(g.n));
      const T* ab = a.data + bi * g.m * g.k;
      const T* bb = b.data + bi * g.k * g.n;
      auto times_b = [&](const auto& A) {
        if (b.col_major) {
          C.noalias() = A * Eigen::Map<const ColMat>(bb + n0 * g.k, g.k, cols);
        } else {
          C.noalias() = A * Eigen::Map<const RowMat, 0, Stride>(bb + n0, g.k, cols, Stride(g.n));
        }
      };
      if (a.col_major) {
        times_b(Eigen::Map<const ColMat, 0, Stride>(ab + r0, rows, g.k, Stride(g.m)));
      } else {
        times_b(Eigen::Map<const RowMat>(ab + r0 * g.k, rows, g.k));
      }
    }
  });
}

// Complex dot (either side complex; a real side is converted): both
// operands become contiguous [batch, m, k] / [batch, k, n] stacks of
// std::complex<T>, multiplied by Eigen like the real case.
template <typename T>
absl::Status ComplexDot(const HloInstruction& instr, const DotGeometry& g, const void* lhs,
                        const void* rhs, void* out, int num_threads) {
  using Z = std::complex<T>;
  const PrimitiveType zt = std::is_same_v<T, float> ? PrimitiveType::kC64 : PrimitiveType::kC128;
  auto pack = [&](const void* src, const Shape& s, const std::vector<int64_t>& perm,
                  Operand<Z>* op) -> absl::Status {
    const int64_t n = s.num_elements();
    Z* dst = op->storage.Allocate(n);
    if (dst == nullptr) return HostExhausted(n * sizeof(Z));
    op->data = dst;
    if (n == 0) return absl::OkStatus();
    // Source order in Z, then the permutation.
    HostArray<uint8_t> raw;
    HostArray<Z> conv;
    uint8_t* r = raw.Allocate(n * ComputeWidth(s.element_type()));
    Z* c = conv.Allocate(n);
    if (r == nullptr || c == nullptr) return HostExhausted(n * (sizeof(Z) + kMaxComputeWidth));
    GetLoadKernel(s.element_type())(src, 1, r, n);
    ASSIGN_OR_RETURN(UnaryKernel to_z, GetConvertKernel(s.element_type(), zt));
    to_z(r, c, n);
    const int64_t rank = s.rank();
    const std::vector<int64_t> strides = rank ? s.Strides() : std::vector<int64_t>{};
    std::vector<int64_t> idx(rank, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t from = 0;
      for (int64_t d = 0; d < rank; ++d) from += idx[d] * strides[perm[d]];
      dst[i] = c[from];
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < s.dimensions(perm[d])) break;
        idx[d] = 0;
      }
    }
    return absl::OkStatus();
  };
  Operand<Z> a, b;
  RETURN_IF_ERROR(pack(lhs, instr.operand(0)->shape(), g.lhs_perm, &a));
  RETURN_IF_ERROR(pack(rhs, instr.operand(1)->shape(), g.rhs_perm, &b));
  const PrimitiveType out_type = instr.shape().element_type();
  const int64_t out_n = g.batch * g.m * g.n;
  HostArray<Z> scratch;
  Z* c = out_type == zt ? static_cast<Z*>(out) : scratch.Allocate(out_n);
  if (c == nullptr) return HostExhausted(out_n * sizeof(Z));
  if (out_n == 0) return absl::OkStatus();
  if (g.k > 0) {
    MatMul<Z>(g, a, b, c, num_threads);
  } else {
    std::fill(c, c + out_n, Z(0));
  }
  if (out_type == zt) return absl::OkStatus();
  ASSIGN_OR_RETURN(UnaryKernel conv, GetConvertKernel(zt, out_type));
  HostArray<uint8_t> converted;
  uint8_t* tmp = converted.Allocate(out_n * kMaxComputeWidth);
  if (tmp == nullptr) return HostExhausted(out_n * kMaxComputeWidth);
  conv(c, tmp, out_n);
  GetStoreKernel(out_type)(tmp, out, out_n);
  return absl::OkStatus();
}

}  // namespace

absl::Status DotKernel(const HloInstruction& instr, const void* lhs,
                       const void* rhs, void* out, int num_threads) {
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  const PrimitiveType out_type = instr.shape().element_type();
  const DotGeometry g = Geometry(instr);
  const int64_t out_n = g.batch * g.m * g.n;
  const PrimitiveType lt = ls.element_type(), rt = rs.element_type();
  if (hlo::IsComplex(lt) || hlo::IsComplex(rt) || hlo::IsComplex(out_type)) {
    const bool wide = lt == PrimitiveType::kC128 || rt == PrimitiveType::kC128 ||
                      lt == PrimitiveType::kF64 || rt == PrimitiveType::kF64 ||
                      out_type == PrimitiveType::kC128;
    return wide ? ComplexDot<double>(instr, g, lhs, rhs, out, num_threads)
                : ComplexDot<float>(instr, g, lhs, rhs, out, num_threads);
  }
  const bool any_int = !hlo::IsFloatingPoint(ls.element_type()) ||
                       !hlo::IsFloatingPoint(rs.element_type());
  if (any_int) {
    // Integer dot: wrapping int64 accumulation, naive loops (rare, small).
    std::vector<int64_t> a(g.batch * g.m * g.k), b(g.batch * g.k * g.n);
    std::vector<double> ad(a.size()), bd(b.size());
    Pack<double>(lhs, ls, g.lhs_perm, ad.data());
    Pack<double>(rhs, rs, g.rhs_perm, bd.data());
    // (Integers beyond 2^53 lose precision in the packing; not expected.)
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int64_t>(ad[i]);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int64_t>(bd[i]);
    std::vector<uint64_t> c(out_n, 0);
    for (int64_t bi = 0; bi < g.batch; ++bi) {
      for (int64_t i = 0; i < g.m; ++i) {
        for (int64_t j = 0; j < g.n; ++j) {
          uint64_t acc = 0;
          for (int64_t kk = 0; kk < g.k; ++kk) {
            acc += static_cast<uint64_t>(a[(bi * g.m + i) * g.k + kk]) *
                   static_cast<uint64_t>(b[(bi * g.k + kk) * g.n + j]);
          }
          c[(bi * g.m + i) * g.n + j] = acc;
        }
      }
    }
    auto conv = GetConvertKernel(PrimitiveType::kS64, out_type);
    if (!conv.ok()) return conv.status();
    std::vector<uint64_t> tmp(out_n);
    (*conv)(c.data(), tmp.data(), out_n);
    GetStoreKernel(out_type)(tmp.data(), out, out_n);
    return absl::OkStatus();
  }
  const bool use_double = ls.element_type() == PrimitiveType::kF64 ||
                          rs.element_type() == PrimitiveType::kF64 ||
                          out_type == PrimitiveType::kF64;
  return use_double ? FloatDot<double>(instr, g, lhs, rhs, out, num_threads)
                    : FloatDot<float>(instr, g, lhs, rhs, out, num_threads);
}

}  // namespace tpuoff::runtime
