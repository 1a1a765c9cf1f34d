// One interface over the s/d/c/z LAPACK routines (lapack_api.h), and the
// row-major <-> column-major moves of a batch's matrices. Internal to the
// ops_lapack*.cc kernels.
#ifndef TPUOFF_RUNTIME_EMULATOR_LAPACK_TRAITS_H_
#define TPUOFF_RUNTIME_EMULATOR_LAPACK_TRAITS_H_

#include <algorithm>
#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/emulator/lapack_api.h"

namespace tpuoff::runtime::lapack {

// The first argument error LAPACK or BLAS reported (through XERBLA) on
// this thread since the last call, e.g. "SGETRF: parameter 1"; cleared by
// the call. The reference XERBLA stops the program; ops_lapack.cc replaces
// it with one that records the error and lets the routine return.
std::string TakeArgumentError();

template <typename T>
struct IsComplexT : std::false_type {};
template <typename R>
struct IsComplexT<std::complex<R>> : std::true_type {};
template <typename T>
struct RealOf {
  using type = T;
};
template <typename R>
struct RealOf<std::complex<R>> {
  using type = R;
};

// Row-major [rows, cols] (logical) -> column-major, and back.
template <typename T>
void ToColMajor(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
  }
}
template <typename T>
void FromColMajor(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[j * rows + i];
  }
}

// LAPACK's optimal workspace from a query (lwork = -1), at least 1.
template <typename T>
int WorkSize(const T& query) {
  const double v = static_cast<double>(std::real(query));
  return v < 1 ? 1 : static_cast<int>(v);
}

template <typename T>
struct Traits;

#define TPUOFF_COMMON_TRAITS(p, T)                                                          \
  static void getrf(int m, int n, T* a, int* ipiv, int* info) {                             \
    p##getrf_(&m, &n, a, &m, ipiv, info);                                                   \
  }                                                                                         \
  static void potrf(char uplo, int n, T* a, int* info) { p##potrf_(&uplo, &n, a, &n, info, 1); } \
  static void geqrf(int m, int n, T* a, T* tau, int* info) {                                \
    T q{};                                                                                  \
    int lwork = -1;                                                                         \
    p##geqrf_(&m, &n, a, &m, tau, &q, &lwork, info);                                        \
    lwork = WorkSize(q);                                                                    \
    std::vector<T> work(lwork);                                                             \
    p##geqrf_(&m, &n, a, &m, tau, work.data(), &lwork, info);                               \
  }                                                                                         \
  static void trsm(char side, char uplo, char trans, char diag, int m, int n, const T* a,  \
                   int lda, T* b) {                                                         \
    const T one(1);                                                                         \
    p##trsm_(&side, &uplo, &trans, &diag, &m, &n, &one, a, &lda, b, &m, 1, 1, 1, 1);        \
  }                                                                                         \
  static void gehrd(int n, int ilo, int ihi, T* a, T* tau, int* info) {                     \
    T q{};                                                                                  \
    int lwork = -1;                                                                         \
    p##gehrd_(&n, &ilo, &ihi, a, &n, tau, &q, &lwork, info);                                \
    lwork = WorkSize(q);                                                                    \
    std::vector<T> work(lwork);                                                             \
    p##gehrd_(&n, &ilo, &ihi, a, &n, tau, work.data(), &lwork, info);                       \
  }                                                                                         \
  static void gtsv(int n, int nrhs, T* dl, T* d, T* du, T* b, int* info) {                  \
    p##gtsv_(&n, &nrhs, dl, d, du, b, &n, info);                                            \
  }


// Routines spelled differently for real and complex types, behind one
// signature (complex-only workspaces allocated inside).
#define TPUOFF_REAL_TRAITS(p, T)                                                             \
  static void orgqr(int m, int n, int k, T* a, const T* tau, int* info) {                    \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    p##orgqr_(&m, &n, &k, a, &m, tau, &q, &lwork, info);                                     \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##orgqr_(&m, &n, &k, a, &m, tau, work.data(), &lwork, info);                            \
  }                                                                                          \
  static void ormqr(char side, char trans, int m, int n, int k, const T* a, int lda,         \
                    const T* tau, T* c, int* info) {                                         \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    p##ormqr_(&side, &trans, &m, &n, &k, a, &lda, tau, c, &m, &q, &lwork, info, 1, 1);       \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##ormqr_(&side, &trans, &m, &n, &k, a, &lda, tau, c, &m, work.data(), &lwork, info, 1, 1); \
  }                                                                                          \
  static void geqp3(int m, int n, T* a, int* jpvt, T* tau, int* info) {                      \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    p##geqp3_(&m, &n, a, &m, jpvt, tau, &q, &lwork, info);                                   \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##geqp3_(&m, &n, a, &m, jpvt, tau, work.data(), &lwork, info);                          \
  }                                                                                          \
  static void heevd(char jobz, char uplo, int n, T* a, T* w, int* info) {                    \
    T q{};                                                                                   \
    int iq = 0, lwork = -1, liwork = -1;                                                     \
    p##syevd_(&jobz, &uplo, &n, a, &n, w, &q, &lwork, &iq, &liwork, info, 1, 1);             \
    lwork = WorkSize(q);                                                                     \
    liwork = iq < 1 ? 1 : iq;                                                                \
    std::vector<T> work(lwork);                                                              \
    std::vector<int> iwork(liwork);                                                          \
    p##syevd_(&jobz, &uplo, &n, a, &n, w, work.data(), &lwork, iwork.data(), &liwork, info, 1, 1); \
  }                                                                                          \
  static void gesdd(char jobz, int m, int n, T* a, T* s, T* u, int ldu, T* vt, int ldvt,     \
                    int* info) {                                                             \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    std::vector<int> iwork(8 * std::max(1, std::min(m, n)));                                 \
    p##gesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, &q, &lwork, iwork.data(), info, 1); \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##gesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work.data(), &lwork, iwork.data(), \
              info, 1);                                                                      \
  }                                                                                          \
  static void gesvd(char job, int m, int n, T* a, T* s, T* u, int ldu, T* vt, int ldvt,      \
                    int* info) {                                                             \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    p##gesvd_(&job, &job, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, &q, &lwork, info, 1, 1);     \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##gesvd_(&job, &job, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work.data(), &lwork, info, 1, 1); \
  }                                                                                          \
  static void hetrd(char uplo, int n, T* a, T* d, T* e, T* tau, int* info) {                 \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    p##sytrd_(&uplo, &n, a, &n, d, e, tau, &q, &lwork, info, 1);                             \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##sytrd_(&uplo, &n, a, &n, d, e, tau, work.data(), &lwork, info, 1);                    \
  }                                                                                          \
  /* Real Schur form: eigenvalues as (wr, wi). */                                            \
  static void gees(char jobvs, int n, T* a, int* sdim, T* wr, T* wi, T* vs, int* info) {     \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    char sort = 'N';                                                                         \
    p##gees_(&jobvs, &sort, nullptr, &n, a, &n, sdim, wr, wi, vs, &n, &q, &lwork, nullptr,   \
             info, 1, 1);                                                                    \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##gees_(&jobvs, &sort, nullptr, &n, a, &n, sdim, wr, wi, vs, &n, work.data(), &lwork,   \
             nullptr, info, 1, 1);                                                           \
  }                                                                                          \
  static void geev(char jobvl, char jobvr, int n, T* a, T* wr, T* wi, T* vl, T* vr,          \
                   int* info) {                                                              \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    p##geev_(&jobvl, &jobvr, &n, a, &n, wr, wi, vl, &n, vr, &n, &q, &lwork, info, 1, 1);     \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##geev_(&jobvl, &jobvr, &n, a, &n, wr, wi, vl, &n, vr, &n, work.data(), &lwork, info, 1, 1); \
  }

#define TPUOFF_COMPLEX_TRAITS(p, T, R)                                                       \
  static void orgqr(int m, int n, int k, T* a, const T* tau, int* info) {                    \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    p##ungqr_(&m, &n, &k, a, &m, tau, &q, &lwork, info);                                     \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##ungqr_(&m, &n, &k, a, &m, tau, work.data(), &lwork, info);                            \
  }                                                                                          \
  static void ormqr(char side, char trans, int m, int n, int k, const T* a, int lda,         \
                    const T* tau, T* c, int* info) {                                         \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    p##unmqr_(&side, &trans, &m, &n, &k, a, &lda, tau, c, &m, &q, &lwork, info, 1, 1);       \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##unmqr_(&side, &trans, &m, &n, &k, a, &lda, tau, c, &m, work.data(), &lwork, info, 1, 1); \
  }                                                                                          \
  static void geqp3(int m, int n, T* a, int* jpvt, T* tau, int* info) {                      \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    std::vector<R> rwork(2 * std::max(1, n));                                                \
    p##geqp3_(&m, &n, a, &m, jpvt, tau, &q, &lwork, rwork.data(), info);                     \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##geqp3_(&m, &n, a, &m, jpvt, tau, work.data(), &lwork, rwork.data(), info);            \
  }                                                                                          \
  static void heevd(char jobz, char uplo, int n, T* a, R* w, int* info) {                    \
    T q{};                                                                                   \
    R rq{};                                                                                  \
    int iq = 0, lwork = -1, lrwork = -1, liwork = -1;                                        \
    p##heevd_(&jobz, &uplo, &n, a, &n, w, &q, &lwork, &rq, &lrwork, &iq, &liwork, info, 1, 1); \
    lwork = WorkSize(q);                                                                     \
    lrwork = WorkSize(rq);                                                                   \
    liwork = iq < 1 ? 1 : iq;                                                                \
    std::vector<T> work(lwork);                                                              \
    std::vector<R> rwork(lrwork);                                                            \
    std::vector<int> iwork(liwork);                                                          \
    p##heevd_(&jobz, &uplo, &n, a, &n, w, work.data(), &lwork, rwork.data(), &lrwork,         \
              iwork.data(), &liwork, info, 1, 1);                                            \
  }                                                                                          \
  static void gesdd(char jobz, int m, int n, T* a, R* s, T* u, int ldu, T* vt, int ldvt,     \
                    int* info) {                                                             \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    const int64_t mn = std::max(1, std::min(m, n)), mx = std::max(1, std::max(m, n));        \
    const int64_t lrwork = jobz == 'N' ? 7 * mn                                              \
                                       : std::max(5 * mn * mn + 5 * mn,                      \
                                                  2 * mx * mn + 2 * mn * mn + mn);           \
    std::vector<R> rwork(lrwork);                                                            \
    std::vector<int> iwork(8 * mn);                                                          \
    p##gesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, &q, &lwork, rwork.data(),         \
              iwork.data(), info, 1);                                                        \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##gesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work.data(), &lwork, rwork.data(), \
              iwork.data(), info, 1);                                                        \
  }                                                                                          \
  static void gesvd(char job, int m, int n, T* a, R* s, T* u, int ldu, T* vt, int ldvt,      \
                    int* info) {                                                             \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    std::vector<R> rwork(5 * std::max(1, std::min(m, n)));                                   \
    p##gesvd_(&job, &job, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, &q, &lwork, rwork.data(),    \
              info, 1, 1);                                                                   \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##gesvd_(&job, &job, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work.data(), &lwork,         \
              rwork.data(), info, 1, 1);                                                     \
  }                                                                                          \
  static void hetrd(char uplo, int n, T* a, R* d, R* e, T* tau, int* info) {                 \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    p##hetrd_(&uplo, &n, a, &n, d, e, tau, &q, &lwork, info, 1);                             \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##hetrd_(&uplo, &n, a, &n, d, e, tau, work.data(), &lwork, info, 1);                    \
  }                                                                                          \
  static void gees(char jobvs, int n, T* a, int* sdim, T* w, T* vs, int* info) {             \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    char sort = 'N';                                                                         \
    std::vector<R> rwork(std::max(1, n));                                                    \
    p##gees_(&jobvs, &sort, nullptr, &n, a, &n, sdim, w, vs, &n, &q, &lwork, rwork.data(),   \
             nullptr, info, 1, 1);                                                           \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##gees_(&jobvs, &sort, nullptr, &n, a, &n, sdim, w, vs, &n, work.data(), &lwork,        \
             rwork.data(), nullptr, info, 1, 1);                                             \
  }                                                                                          \
  static void geev(char jobvl, char jobvr, int n, T* a, T* w, T* vl, T* vr, int* info) {     \
    T q{};                                                                                   \
    int lwork = -1;                                                                          \
    std::vector<R> rwork(2 * std::max(1, n));                                                \
    p##geev_(&jobvl, &jobvr, &n, a, &n, w, vl, &n, vr, &n, &q, &lwork, rwork.data(), info, 1, 1); \
    lwork = WorkSize(q);                                                                     \
    std::vector<T> work(lwork);                                                              \
    p##geev_(&jobvl, &jobvr, &n, a, &n, w, vl, &n, vr, &n, work.data(), &lwork, rwork.data(), \
             info, 1, 1);                                                                    \
  }

template <>
struct Traits<float> {
  TPUOFF_COMMON_TRAITS(s, float)
  TPUOFF_REAL_TRAITS(s, float)
};
template <>
struct Traits<double> {
  TPUOFF_COMMON_TRAITS(d, double)
  TPUOFF_REAL_TRAITS(d, double)
};
template <>
struct Traits<c32> {
  TPUOFF_COMMON_TRAITS(c, c32)
  TPUOFF_COMPLEX_TRAITS(c, c32, float)
};
template <>
struct Traits<c64> {
  TPUOFF_COMMON_TRAITS(z, c64)
  TPUOFF_COMPLEX_TRAITS(z, c64, double)
};
#undef TPUOFF_COMMON_TRAITS
#undef TPUOFF_REAL_TRAITS
#undef TPUOFF_COMPLEX_TRAITS

}  // namespace tpuoff::runtime::lapack

#endif  // TPUOFF_RUNTIME_EMULATOR_LAPACK_TRAITS_H_
