// jaxlib's LAPACK eigen- and singular-value custom-calls: syevd/heevd,
// gesdd, gesvd, geev, gees, gehrd, sytrd/hetrd, with jaxlib's conventions
// (geev's real eigenvectors unpacked into complex ones, -4 in info for a
// non-finite input, the singular vectors of mode 'N' not computed).
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "runtime/emulator/lapack_traits.h"
#include "runtime/emulator/ops_lapack.h"

namespace tpuoff::runtime::lapack_internal {
namespace {

using hlo::PrimitiveType;
using hlo::Shape;
using lapack::FromColMajor;
using lapack::IsComplexT;
using lapack::ToColMajor;
using lapack::Traits;

template <typename T>
const T* In(const Call& c, int i) {
  return static_cast<const T*>((*c.in)[i]);
}
template <typename T>
T* Out(const Call& c, int i) {
  return static_cast<T*>((*c.out)[i]);
}

PrimitiveType RealType(PrimitiveType t) { return hlo::ComplexComponentType(t); }
PrimitiveType ComplexType(PrimitiveType t) {
  return t == PrimitiveType::kF32 ? PrimitiveType::kC64 : PrimitiveType::kC128;
}

// Checks `c` takes one [batch..., n, n] (or m x n when !square) operand and
// returns results of the given shapes (tail dims after the batch dims).
absl::StatusOr<Batch> CheckShapes(const Call& c, bool square,
                                  const std::vector<std::pair<PrimitiveType, std::vector<int64_t>>>& results) {
  if (c.operand_shapes.size() != 1 || c.result_shapes.size() != results.size()) {
    return c.Error(absl::StrCat("takes 1 operand and returns ", results.size(), " results"));
  }
  const Shape& x = c.operand_shapes[0];
  if (x.rank() < 2) return c.Error(absl::StrCat("operand ", x.ToString(), " is not a matrix"));
  Batch b;
  b.rows = x.dimensions(x.rank() - 2);
  b.cols = x.dimensions(x.rank() - 1);
  for (int64_t i = 0; i + 2 < x.rank(); ++i) b.count *= x.dimensions(i);
  if (square && b.rows != b.cols) return c.Error(absl::StrCat("operand ", x.ToString(), " is not square"));
  if (b.rows > (1 << 30) || b.cols > (1 << 30)) return c.Error("operand too large for LAPACK");
  for (size_t i = 0; i < results.size(); ++i) {
    std::vector<int64_t> dims(x.dimensions().begin(), x.dimensions().end() - 2);
    dims.insert(dims.end(), results[i].second.begin(), results[i].second.end());
    const Shape want(results[i].first, dims);
    if (!c.result_shapes[i].Compatible(want)) {
      return c.Error(absl::StrCat("result ", i, " is ", c.result_shapes[i].ToString(),
                                  ", expected ", want.ToString()));
    }
  }
  return b;
}

template <typename T>
bool AllFinite(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(std::real(p[i])) || !std::isfinite(std::imag(p[i]))) return false;
  }
  return true;
}

// syevd/heevd, and XLA's "Eigh" (`xla` true: results (v, w), no info).
template <typename T>
absl::Status Heevd(const Call& c, bool xla = false) {
  using R = typename lapack::RealOf<T>::type;
  ASSIGN_OR_RETURN(const char uplo, c.CharAttr("uplo", "LU"));
  ASSIGN_OR_RETURN(const char mode, c.CharAttr("mode", "NV"));
  const PrimitiveType t = c.operand_shapes[0].element_type();
  const int64_t n = c.operand_shapes[0].rank() >= 2 ? c.operand_shapes[0].dimensions().back() : 0;
  std::vector<std::pair<PrimitiveType, std::vector<int64_t>>> shapes = {{t, {n, n}},
                                                                        {RealType(t), {n}}};
  if (!xla) shapes.push_back({PrimitiveType::kS32, {}});
  ASSIGN_OR_RETURN(Batch b, CheckShapes(c, true, shapes));
  std::vector<T> a(n * n);
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0;
    ToColMajor(In<T>(c, 0) + i * n * n, n, n, a.data());
    if (n > 0) Traits<T>::heevd(mode, uplo, n, a.data(), Out<R>(c, 1) + i * n, &info);
    if (xla && info != 0) {
      // No info output: a failed decomposition is NaN, as jax makes it.
      std::fill(a.begin(), a.end(), T(std::numeric_limits<R>::quiet_NaN()));
      std::fill(Out<R>(c, 1) + i * n, Out<R>(c, 1) + (i + 1) * n,
                std::numeric_limits<R>::quiet_NaN());
    }
    FromColMajor(a.data(), n, n, Out<T>(c, 0) + i * n * n);
    if (!xla) Out<int>(c, 2)[i] = info;
  }
  return absl::OkStatus();
}

// gesdd (`qr` false) and gesvd (`qr` true).
template <typename T>
absl::Status Svd(const Call& c, bool qr) {
  using R = typename lapack::RealOf<T>::type;
  ASSIGN_OR_RETURN(const char mode, c.CharAttr("mode", "ASN"));
  const Shape& x = c.operand_shapes.empty() ? Shape() : c.operand_shapes[0];
  if (c.result_shapes.size() != 5 || x.rank() < 2) return c.Error("expects (a, s, u, vt, info)");
  const int64_t m = x.dimensions(x.rank() - 2), n = x.dimensions(x.rank() - 1);
  const int64_t k = std::min(m, n);
  const Shape& us = c.result_shapes[2];
  const Shape& vs = c.result_shapes[3];
  if (us.rank() < 2 || vs.rank() < 2) return c.Error("u and vt must be matrices");
  const int64_t ucols = us.dimensions().back(), vrows = vs.dimensions(vs.rank() - 2);
  if (mode == 'A' && (ucols != m || vrows != n)) return c.Error("mode A needs u [m, m] and vt [n, n]");
  if (mode == 'S' && (ucols != k || vrows != k)) return c.Error("mode S needs u [m, k] and vt [k, n]");
  const PrimitiveType t = x.element_type();
  ASSIGN_OR_RETURN(Batch b, CheckShapes(c, false, {{t, {m, n}}, {RealType(t), {k}},
                                                   {t, {m, ucols}}, {t, {vrows, n}},
                                                   {PrimitiveType::kS32, {}}}));
  std::vector<T> a(m * n), u(m * ucols), vt(vrows * n);
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0;
    ToColMajor(In<T>(c, 0) + i * m * n, m, n, a.data());
    std::fill(u.begin(), u.end(), T(0));
    std::fill(vt.begin(), vt.end(), T(0));
    if (m * n > 0) {
      const int ldvt = static_cast<int>(std::max<int64_t>(1, vrows));
      if (qr) {
        Traits<T>::gesvd(mode, m, n, a.data(), Out<R>(c, 1) + i * k, u.data(), m, vt.data(), ldvt,
                         &info);
      } else {
        Traits<T>::gesdd(mode, m, n, a.data(), Out<R>(c, 1) + i * k, u.data(), m, vt.data(), ldvt,
                         &info);
      }
    }
    FromColMajor(a.data(), m, n, Out<T>(c, 0) + i * m * n);
    FromColMajor(u.data(), m, ucols, Out<T>(c, 2) + i * m * ucols);
    FromColMajor(vt.data(), vrows, n, Out<T>(c, 3) + i * vrows * n);
    Out<int>(c, 4)[i] = info;
  }
  return absl::OkStatus();
}

// LAPACK's real eigenvectors (a complex pair as the columns re, im) as
// complex columns, as jaxlib unpacks them. Column-major n x n.
template <typename R>
void UnpackEigenvectors(int64_t n, const R* wi, const R* packed, std::complex<R>* out) {
  for (int64_t j = 0; j < n;) {
    if (wi[j] == 0 || std::isnan(wi[j]) || j + 1 == n) {
      for (int64_t i = 0; i < n; ++i) out[j * n + i] = {packed[j * n + i], 0};
      ++j;
    } else {
      for (int64_t i = 0; i < n; ++i) {
        out[j * n + i] = {packed[j * n + i], packed[(j + 1) * n + i]};
        out[(j + 1) * n + i] = {packed[j * n + i], -packed[(j + 1) * n + i]};
      }
      j += 2;
    }
  }
}

template <typename T>
absl::Status Geev(const Call& c) {
  ASSIGN_OR_RETURN(const char jobvl, c.CharAttr("compute_left", "NV"));
  ASSIGN_OR_RETURN(const char jobvr, c.CharAttr("compute_right", "NV"));
  const PrimitiveType t = c.operand_shapes[0].element_type();
  const int64_t n = c.operand_shapes[0].rank() >= 2 ? c.operand_shapes[0].dimensions().back() : 0;
  const int64_t nn = n * n;
  std::vector<T> a(nn);
  if constexpr (IsComplexT<T>::value) {
    ASSIGN_OR_RETURN(Batch b, CheckShapes(c, true, {{t, {n}}, {t, {n, n}}, {t, {n, n}},
                                                    {PrimitiveType::kS32, {}}}));
    std::vector<T> vl(nn), vr(nn), w(n);
    for (int64_t i = 0; i < b.count; ++i) {
      int info = 0;
      std::fill(vl.begin(), vl.end(), T(0));
      std::fill(vr.begin(), vr.end(), T(0));
      std::fill(w.begin(), w.end(), T(0));
      ToColMajor(In<T>(c, 0) + i * nn, n, n, a.data());
      if (!AllFinite(a.data(), nn)) {
        info = -4;
      } else if (n > 0) {
        Traits<T>::geev(jobvl, jobvr, n, a.data(), w.data(), vl.data(), vr.data(), &info);
      }
      std::memcpy(Out<T>(c, 0) + i * n, w.data(), n * sizeof(T));
      FromColMajor(vl.data(), n, n, Out<T>(c, 1) + i * nn);
      FromColMajor(vr.data(), n, n, Out<T>(c, 2) + i * nn);
      Out<int>(c, 3)[i] = info;
    }
  } else {
    using C = std::complex<T>;
    const PrimitiveType ct = ComplexType(t);
    ASSIGN_OR_RETURN(Batch b, CheckShapes(c, true, {{t, {n}}, {t, {n}}, {ct, {n, n}}, {ct, {n, n}},
                                                    {PrimitiveType::kS32, {}}}));
    std::vector<T> vl(nn), vr(nn), wr(n), wi(n);
    std::vector<C> cl(nn), cr(nn);
    for (int64_t i = 0; i < b.count; ++i) {
      int info = 0;
      std::fill(vl.begin(), vl.end(), T(0));
      std::fill(vr.begin(), vr.end(), T(0));
      std::fill(wr.begin(), wr.end(), T(0));
      std::fill(wi.begin(), wi.end(), T(0));
      ToColMajor(In<T>(c, 0) + i * nn, n, n, a.data());
      if (!AllFinite(a.data(), nn)) {
        info = -4;
      } else if (n > 0) {
        Traits<T>::geev(jobvl, jobvr, n, a.data(), wr.data(), wi.data(), vl.data(), vr.data(),
                        &info);
      }
      std::fill(cl.begin(), cl.end(), C(0));
      std::fill(cr.begin(), cr.end(), C(0));
      if (info == 0) {
        UnpackEigenvectors(n, wi.data(), vl.data(), cl.data());
        UnpackEigenvectors(n, wi.data(), vr.data(), cr.data());
      }
      std::memcpy(Out<T>(c, 0) + i * n, wr.data(), n * sizeof(T));
      std::memcpy(Out<T>(c, 1) + i * n, wi.data(), n * sizeof(T));
      FromColMajor(cl.data(), n, n, Out<C>(c, 2) + i * nn);
      FromColMajor(cr.data(), n, n, Out<C>(c, 3) + i * nn);
      Out<int>(c, 4)[i] = info;
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Gees(const Call& c) {
  ASSIGN_OR_RETURN(const char mode, c.CharAttr("mode", "NV"));
  ASSIGN_OR_RETURN(const char sort, c.CharAttr("sort", "NS"));
  if (sort != 'N') return c.Error("ordering eigenvalues (sort = S) is not implemented (as in jaxlib)");
  const PrimitiveType t = c.operand_shapes[0].element_type();
  const int64_t n = c.operand_shapes[0].rank() >= 2 ? c.operand_shapes[0].dimensions().back() : 0;
  const int64_t nn = n * n;
  std::vector<T> a(nn), vs(nn);
  constexpr PrimitiveType s32 = PrimitiveType::kS32;
  const bool cplx = IsComplexT<T>::value;
  std::vector<std::pair<PrimitiveType, std::vector<int64_t>>> shapes = {{t, {n, n}}, {t, {n, n}},
                                                                        {t, {n}}};
  if (!cplx) shapes.push_back({t, {n}});
  shapes.push_back({s32, {}});
  shapes.push_back({s32, {}});
  ASSIGN_OR_RETURN(Batch b, CheckShapes(c, true, shapes));
  const int sdim_out = cplx ? 3 : 4;
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0, sdim = 0;
    std::fill(vs.begin(), vs.end(), T(0));
    ToColMajor(In<T>(c, 0) + i * nn, n, n, a.data());
    if (n > 0) {
      if constexpr (IsComplexT<T>::value) {
        Traits<T>::gees(mode, n, a.data(), &sdim, Out<T>(c, 2) + i * n, vs.data(), &info);
      } else {
        Traits<T>::gees(mode, n, a.data(), &sdim, Out<T>(c, 2) + i * n, Out<T>(c, 3) + i * n,
                        vs.data(), &info);
      }
    }
    FromColMajor(a.data(), n, n, Out<T>(c, 0) + i * nn);
    FromColMajor(vs.data(), n, n, Out<T>(c, 1) + i * nn);
    Out<int>(c, sdim_out)[i] = sdim;
    Out<int>(c, sdim_out + 1)[i] = info;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Gehrd(const Call& c) {
  const auto lo = c.attrs.find("low"), hi = c.attrs.find("high");
  if (lo == c.attrs.end() || hi == c.attrs.end()) return c.Error("backend_config needs low and high");
  const PrimitiveType t = c.operand_shapes[0].element_type();
  const int64_t n = c.operand_shapes[0].rank() >= 2 ? c.operand_shapes[0].dimensions().back() : 0;
  ASSIGN_OR_RETURN(Batch b, CheckShapes(c, true, {{t, {n, n}}, {t, {std::max<int64_t>(0, n - 1)}},
                                                  {PrimitiveType::kS32, {}}}));
  if (n > 0 && (lo->second < 1 || hi->second > n || lo->second > std::max<int64_t>(1, hi->second) ||
                hi->second < std::min<int64_t>(lo->second, n))) {
    return c.Error(absl::StrCat("needs 1 <= low <= high <= ", n, ", got low=", lo->second,
                                " high=", hi->second));
  }
  const int64_t nn = n * n;
  std::vector<T> a(nn), tau(std::max<int64_t>(1, n - 1));
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0;
    ToColMajor(In<T>(c, 0) + i * nn, n, n, a.data());
    if (n > 0) Traits<T>::gehrd(n, lo->second, hi->second, a.data(), tau.data(), &info);
    FromColMajor(a.data(), n, n, Out<T>(c, 0) + i * nn);
    if (n > 1) std::memcpy(Out<T>(c, 1) + i * (n - 1), tau.data(), (n - 1) * sizeof(T));
    Out<int>(c, 2)[i] = info;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Hetrd(const Call& c) {
  using R = typename lapack::RealOf<T>::type;
  ASSIGN_OR_RETURN(const char uplo, c.CharAttr("uplo", "LU"));
  const PrimitiveType t = c.operand_shapes[0].element_type();
  const int64_t n = c.operand_shapes[0].rank() >= 2 ? c.operand_shapes[0].dimensions().back() : 0;
  const int64_t n1 = std::max<int64_t>(0, n - 1);
  ASSIGN_OR_RETURN(Batch b, CheckShapes(c, true, {{t, {n, n}}, {RealType(t), {n}},
                                                  {RealType(t), {n1}}, {t, {n1}},
                                                  {PrimitiveType::kS32, {}}}));
  const int64_t nn = n * n;
  std::vector<T> a(nn), tau(std::max<int64_t>(1, n1));
  std::vector<R> e(std::max<int64_t>(1, n1));
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0;
    ToColMajor(In<T>(c, 0) + i * nn, n, n, a.data());
    if (n > 0) Traits<T>::hetrd(uplo, n, a.data(), Out<R>(c, 1) + i * n, e.data(), tau.data(), &info);
    FromColMajor(a.data(), n, n, Out<T>(c, 0) + i * nn);
    if (n1 > 0) {
      std::memcpy(Out<R>(c, 2) + i * n1, e.data(), n1 * sizeof(R));
      std::memcpy(Out<T>(c, 3) + i * n1, tau.data(), n1 * sizeof(T));
    }
    Out<int>(c, 4)[i] = info;
  }
  return absl::OkStatus();
}

}  // namespace

template <typename T>
absl::Status RunEigenRoutine(const Call& c, bool* handled) {
  *handled = true;
  const std::string& r = c.routine;
  const bool cplx = IsComplexT<T>::value;
  if (r == (cplx ? "heevd" : "syevd")) return Heevd<T>(c);
  if (r == "xla_eigh") return Heevd<T>(c, /*xla=*/true);
  if (r == "gesdd") return Svd<T>(c, false);
  if (r == "gesvd") return Svd<T>(c, true);
  if (r == "geev") return Geev<T>(c);
  if (r == "gees") return Gees<T>(c);
  if (r == "gehrd") return Gehrd<T>(c);
  if (r == (cplx ? "hetrd" : "sytrd")) return Hetrd<T>(c);
  *handled = false;
  return absl::OkStatus();
}

template absl::Status RunEigenRoutine<float>(const Call&, bool*);
template absl::Status RunEigenRoutine<double>(const Call&, bool*);
template absl::Status RunEigenRoutine<lapack::c32>(const Call&, bool*);
template absl::Status RunEigenRoutine<lapack::c64>(const Call&, bool*);

}  // namespace tpuoff::runtime::lapack_internal
