// The Fortran LAPACK/BLAS routines (Debian liblapack/libblas, 32-bit
// integers) behind jaxlib's CPU custom-calls, with gfortran's hidden
// character-length arguments, and one traits struct per element type so the
// kernels are written once. Matrices are column-major, as LAPACK wants.
#ifndef TPUOFF_RUNTIME_EMULATOR_LAPACK_API_H_
#define TPUOFF_RUNTIME_EMULATOR_LAPACK_API_H_

#include <complex>
#include <cstddef>

namespace tpuoff::runtime::lapack {

using c32 = std::complex<float>;
using c64 = std::complex<double>;
using L = std::size_t;  // hidden Fortran string length

extern "C" {
#define TPUOFF_LAPACK_DECLARE(p, T, R)                                                          \
  void p##getrf_(const int* m, const int* n, T* a, const int* lda, int* ipiv, int* info);      \
  void p##potrf_(const char* uplo, const int* n, T* a, const int* lda, int* info, L);          \
  void p##geqrf_(const int* m, const int* n, T* a, const int* lda, T* tau, T* work,            \
                 const int* lwork, int* info);                                                  \
  void p##trsm_(const char* side, const char* uplo, const char* transa, const char* diag,      \
                const int* m, const int* n, const T* alpha, const T* a, const int* lda, T* b,  \
                const int* ldb, L, L, L, L);                                                    \
  void p##gehrd_(const int* n, const int* ilo, const int* ihi, T* a, const int* lda, T* tau,   \
                 T* work, const int* lwork, int* info);                                         \
  void p##gtsv_(const int* n, const int* nrhs, T* dl, T* d, T* du, T* b, const int* ldb,       \
                int* info);
TPUOFF_LAPACK_DECLARE(s, float, float)
TPUOFF_LAPACK_DECLARE(d, double, double)
TPUOFF_LAPACK_DECLARE(c, c32, float)
TPUOFF_LAPACK_DECLARE(z, c64, double)
#undef TPUOFF_LAPACK_DECLARE

// Real-only and complex-only spellings.
#define TPUOFF_LAPACK_REAL(p, T)                                                                \
  void p##orgqr_(const int* m, const int* n, const int* k, T* a, const int* lda,               \
                 const T* tau, T* work, const int* lwork, int* info);                           \
  void p##ormqr_(const char* side, const char* trans, const int* m, const int* n,              \
                 const int* k, const T* a, const int* lda, const T* tau, T* c, const int* ldc, \
                 T* work, const int* lwork, int* info, L, L);                                   \
  void p##geqp3_(const int* m, const int* n, T* a, const int* lda, int* jpvt, T* tau, T* work, \
                 const int* lwork, int* info);                                                  \
  void p##syevd_(const char* jobz, const char* uplo, const int* n, T* a, const int* lda, T* w, \
                 T* work, const int* lwork, int* iwork, const int* liwork, int* info, L, L);    \
  void p##gesdd_(const char* jobz, const int* m, const int* n, T* a, const int* lda, T* s,     \
                 T* u, const int* ldu, T* vt, const int* ldvt, T* work, const int* lwork,       \
                 int* iwork, int* info, L);                                                     \
  void p##gesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, T* a,        \
                 const int* lda, T* s, T* u, const int* ldu, T* vt, const int* ldvt, T* work,   \
                 const int* lwork, int* info, L, L);                                            \
  void p##geev_(const char* jobvl, const char* jobvr, const int* n, T* a, const int* lda,      \
                T* wr, T* wi, T* vl, const int* ldvl, T* vr, const int* ldvr, T* work,          \
                const int* lwork, int* info, L, L);                                             \
  void p##gees_(const char* jobvs, const char* sort, void* select, const int* n, T* a,         \
                const int* lda, int* sdim, T* wr, T* wi, T* vs, const int* ldvs, T* work,       \
                const int* lwork, int* bwork, int* info, L, L);                                 \
  void p##sytrd_(const char* uplo, const int* n, T* a, const int* lda, T* d, T* e, T* tau,     \
                 T* work, const int* lwork, int* info, L);
TPUOFF_LAPACK_REAL(s, float)
TPUOFF_LAPACK_REAL(d, double)
#undef TPUOFF_LAPACK_REAL

#define TPUOFF_LAPACK_COMPLEX(p, T, R)                                                          \
  void p##ungqr_(const int* m, const int* n, const int* k, T* a, const int* lda,               \
                 const T* tau, T* work, const int* lwork, int* info);                           \
  void p##unmqr_(const char* side, const char* trans, const int* m, const int* n,              \
                 const int* k, const T* a, const int* lda, const T* tau, T* c, const int* ldc, \
                 T* work, const int* lwork, int* info, L, L);                                   \
  void p##geqp3_(const int* m, const int* n, T* a, const int* lda, int* jpvt, T* tau, T* work, \
                 const int* lwork, R* rwork, int* info);                                        \
  void p##heevd_(const char* jobz, const char* uplo, const int* n, T* a, const int* lda, R* w, \
                 T* work, const int* lwork, R* rwork, const int* lrwork, int* iwork,            \
                 const int* liwork, int* info, L, L);                                           \
  void p##gesdd_(const char* jobz, const int* m, const int* n, T* a, const int* lda, R* s,     \
                 T* u, const int* ldu, T* vt, const int* ldvt, T* work, const int* lwork,       \
                 R* rwork, int* iwork, int* info, L);                                           \
  void p##gesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, T* a,        \
                 const int* lda, R* s, T* u, const int* ldu, T* vt, const int* ldvt, T* work,   \
                 const int* lwork, R* rwork, int* info, L, L);                                  \
  void p##geev_(const char* jobvl, const char* jobvr, const int* n, T* a, const int* lda,      \
                T* w, T* vl, const int* ldvl, T* vr, const int* ldvr, T* work,                  \
                const int* lwork, R* rwork, int* info, L, L);                                   \
  void p##gees_(const char* jobvs, const char* sort, void* select, const int* n, T* a,         \
                const int* lda, int* sdim, T* w, T* vs, const int* ldvs, T* work,               \
                const int* lwork, R* rwork, int* bwork, int* info, L, L);                       \
  void p##hetrd_(const char* uplo, const int* n, T* a, const int* lda, R* d, R* e, T* tau,     \
                 T* work, const int* lwork, int* info, L);
TPUOFF_LAPACK_COMPLEX(c, c32, float)
TPUOFF_LAPACK_COMPLEX(z, c64, double)
#undef TPUOFF_LAPACK_COMPLEX
}

}  // namespace tpuoff::runtime::lapack

#endif  // TPUOFF_RUNTIME_EMULATOR_LAPACK_API_H_
