// jaxlib's LAPACK custom-calls: dispatch, attribute parsing, and the
// factorizations and solves (getrf, potrf, geqrf, geqp3, orgqr/ungqr,
// ormqr/unmqr, trsm, gtsv). The eigen- and singular-value routines are in
// ops_lapack_eig.cc.
#include "runtime/emulator/ops_lapack.h"

#include <climits>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "hlo/analysis/buffer_plan.h"
#include "hlo/ir/status_macros.h"
#include "runtime/emulator/lapack_traits.h"

namespace tpuoff::runtime {
namespace {
thread_local std::string* lapack_argument_error = nullptr;
}  // namespace
}  // namespace tpuoff::runtime

// LAPACK's and BLAS's error hook (XERBLA), replacing the reference one
// (which prints and stops the program): remember the first error of the
// thread; the routine returns with info < 0 and the kernel reports it.
extern "C" void xerbla_(const char* name, const int* info, std::size_t len) {
  if (tpuoff::runtime::lapack_argument_error != nullptr) return;
  std::string n(name, strnlen(name, len));
  while (!n.empty() && n.back() == ' ') n.pop_back();
  tpuoff::runtime::lapack_argument_error =
      new std::string(absl::StrCat(n, ": parameter ", info ? *info : 0));
}

namespace tpuoff::runtime {

std::string lapack::TakeArgumentError() {
  if (lapack_argument_error == nullptr) return "";
  std::string e = std::move(*lapack_argument_error);
  delete lapack_argument_error;
  lapack_argument_error = nullptr;
  return e;
}

namespace lapack_internal {

using hlo::PrimitiveType;
using hlo::Shape;
using lapack::FromColMajor;
using lapack::ToColMajor;
using lapack::Traits;

absl::Status Call::Error(absl::string_view msg) const {
  return absl::InvalidArgumentError(absl::StrCat("custom-call \"", instr->attrs().custom_call_target,
                                                 "\" (%", instr->name(), "): ", msg));
}

absl::StatusOr<char> Call::CharAttr(const std::string& name, absl::string_view allowed) const {
  auto it = attrs.find(name);
  if (it == attrs.end()) return Error(absl::StrCat("backend_config has no attribute ", name));
  const char c = static_cast<char>(it->second);
  if (it->second < 0 || it->second > 127 || allowed.find(c) == absl::string_view::npos) {
    return Error(absl::StrCat("attribute ", name, " = ", it->second, " is not one of '",
                              allowed, "'"));
  }
  return c;
}

absl::StatusOr<std::map<std::string, int64_t>> ParseFfiAttributes(absl::string_view config) {
  std::map<std::string, int64_t> out;
  absl::string_view s = absl::StripAsciiWhitespace(config);
  if (s.empty()) return out;
  if (!absl::ConsumePrefix(&s, "{") || !absl::ConsumeSuffix(&s, "}")) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend_config '", config, "' is not an attribute dictionary {...}"));
  }
  if (absl::StripAsciiWhitespace(s).empty()) return out;
  for (absl::string_view entry : absl::StrSplit(s, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(entry, '=');
    if (kv.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("backend_config entry '", entry, "' is not name = value"));
    }
    const std::string name(absl::StripAsciiWhitespace(kv[0]));
    // `76 : ui8`, `true`, `-1 : i32`.
    std::vector<absl::string_view> vt = absl::StrSplit(kv[1], ':');
    const absl::string_view v = absl::StripAsciiWhitespace(vt[0]);
    int64_t value = 0;
    if (v == "true" || v == "false") {
      value = v == "true";
    } else if (!absl::SimpleAtoi(v, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("backend_config attribute ", name, " = '", v, "' is not an integer"));
    }
    out[name] = value;
  }
  return out;
}

namespace {

// Matrices of a [batch..., rows, cols] shape.
absl::StatusOr<Batch> MatrixBatch(const Call& c, const Shape& s, absl::string_view what) {
  if (s.rank() < 2) {
    return c.Error(absl::StrCat(what, " ", s.ToString(), " must have at least 2 dimensions"));
  }
  Batch b;
  b.rows = s.dimensions(s.rank() - 2);
  b.cols = s.dimensions(s.rank() - 1);
  for (int64_t i = 0; i + 2 < s.rank(); ++i) b.count *= s.dimensions(i);
  if (b.rows > INT_MAX || b.cols > INT_MAX) {
    return c.Error(absl::StrCat(what, " ", s.ToString(), " is larger than LAPACK's int"));
  }
  return b;
}

// `s` is [batch..., tail...] with the batch dims of `m` (a matrix shape).
absl::Status NeedBatchShape(const Call& c, const Shape& s, const Shape& m, PrimitiveType t,
                            std::vector<int64_t> tail, absl::string_view what) {
  std::vector<int64_t> dims(m.dimensions().begin(), m.dimensions().end() - 2);
  dims.insert(dims.end(), tail.begin(), tail.end());
  if (s.element_type() != t || s.dimensions() != dims) {
    return c.Error(absl::StrCat(what, " is ", s.ToString(), ", expected ",
                                Shape(t, dims).ToString()));
  }
  return absl::OkStatus();
}

absl::Status NeedCounts(const Call& c, size_t operands, size_t results) {
  if (c.operand_shapes.size() != operands || c.result_shapes.size() != results) {
    return c.Error(absl::StrCat("takes ", operands, " operand(s) and returns ", results,
                                " result(s); got ", c.operand_shapes.size(), " and ",
                                c.result_shapes.size()));
  }
  return absl::OkStatus();
}

template <typename T>
const T* In(const Call& c, int i) {
  return static_cast<const T*>((*c.in)[i]);
}
template <typename T>
T* Out(const Call& c, int i) {
  return static_cast<T*>((*c.out)[i]);
}

template <typename T>
absl::Status Getrf(const Call& c) {
  RETURN_IF_ERROR(NeedCounts(c, 1, 3));
  const Shape& x = c.operand_shapes[0];
  ASSIGN_OR_RETURN(Batch b, MatrixBatch(c, x, "operand"));
  const int64_t k = std::min(b.rows, b.cols);
  if (!c.result_shapes[0].Compatible(x)) return c.Error("result 0 must match the operand");
  RETURN_IF_ERROR(NeedBatchShape(c, c.result_shapes[1], x, PrimitiveType::kS32, {k}, "ipiv"));
  RETURN_IF_ERROR(NeedBatchShape(c, c.result_shapes[2], x, PrimitiveType::kS32, {}, "info"));
  const int64_t mn = b.rows * b.cols;
  std::vector<T> a(mn);
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0;
    ToColMajor(In<T>(c, 0) + i * mn, b.rows, b.cols, a.data());
    if (mn > 0) Traits<T>::getrf(b.rows, b.cols, a.data(), Out<int>(c, 1) + i * k, &info);
    FromColMajor(a.data(), b.rows, b.cols, Out<T>(c, 0) + i * mn);
    Out<int>(c, 2)[i] = info;
  }
  return absl::OkStatus();
}

// XLA's "LuDecomposition" (jax's TPU lowering of lax.linalg.lu): getrf with
// jax's 0-based pivots and the row permutation they make.
template <typename T>
absl::Status XlaLu(const Call& c) {
  RETURN_IF_ERROR(NeedCounts(c, 1, 3));
  const Shape& x = c.operand_shapes[0];
  ASSIGN_OR_RETURN(Batch b, MatrixBatch(c, x, "operand"));
  const int64_t k = std::min(b.rows, b.cols);
  if (!c.result_shapes[0].Compatible(x)) return c.Error("result 0 must match the operand");
  RETURN_IF_ERROR(NeedBatchShape(c, c.result_shapes[1], x, PrimitiveType::kS32, {k}, "pivots"));
  RETURN_IF_ERROR(
      NeedBatchShape(c, c.result_shapes[2], x, PrimitiveType::kS32, {b.rows}, "permutation"));
  const int64_t mn = b.rows * b.cols;
  std::vector<T> a(mn);
  std::vector<int> ipiv(std::max<int64_t>(1, k));
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0;
    ToColMajor(In<T>(c, 0) + i * mn, b.rows, b.cols, a.data());
    if (mn > 0) Traits<T>::getrf(b.rows, b.cols, a.data(), ipiv.data(), &info);
    FromColMajor(a.data(), b.rows, b.cols, Out<T>(c, 0) + i * mn);
    int* piv = Out<int>(c, 1) + i * k;
    int* perm = Out<int>(c, 2) + i * b.rows;
    for (int64_t r = 0; r < b.rows; ++r) perm[r] = static_cast<int>(r);
    for (int64_t j = 0; j < k; ++j) {
      piv[j] = mn > 0 ? ipiv[j] - 1 : static_cast<int>(j);
      std::swap(perm[j], perm[piv[j]]);
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Potrf(const Call& c) {
  RETURN_IF_ERROR(NeedCounts(c, 1, 2));
  ASSIGN_OR_RETURN(const char uplo, c.CharAttr("uplo", "LU"));
  const Shape& x = c.operand_shapes[0];
  ASSIGN_OR_RETURN(Batch b, MatrixBatch(c, x, "operand"));
  if (b.rows != b.cols) return c.Error(absl::StrCat("operand ", x.ToString(), " is not square"));
  if (!c.result_shapes[0].Compatible(x)) return c.Error("result 0 must match the operand");
  RETURN_IF_ERROR(NeedBatchShape(c, c.result_shapes[1], x, PrimitiveType::kS32, {}, "info"));
  const int64_t nn = b.rows * b.rows;
  std::vector<T> a(nn);
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0;
    ToColMajor(In<T>(c, 0) + i * nn, b.rows, b.rows, a.data());
    if (nn > 0) Traits<T>::potrf(uplo, b.rows, a.data(), &info);
    FromColMajor(a.data(), b.rows, b.rows, Out<T>(c, 0) + i * nn);
    Out<int>(c, 1)[i] = info;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Geqrf(const Call& c) {
  RETURN_IF_ERROR(NeedCounts(c, 1, 2));
  const Shape& x = c.operand_shapes[0];
  ASSIGN_OR_RETURN(Batch b, MatrixBatch(c, x, "operand"));
  const int64_t k = std::min(b.rows, b.cols);
  if (!c.result_shapes[0].Compatible(x)) return c.Error("result 0 must match the operand");
  RETURN_IF_ERROR(NeedBatchShape(c, c.result_shapes[1], x, x.element_type(), {k}, "tau"));
  const int64_t mn = b.rows * b.cols;
  std::vector<T> a(mn);
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0;
    ToColMajor(In<T>(c, 0) + i * mn, b.rows, b.cols, a.data());
    if (mn > 0) Traits<T>::geqrf(b.rows, b.cols, a.data(), Out<T>(c, 1) + i * k, &info);
    FromColMajor(a.data(), b.rows, b.cols, Out<T>(c, 0) + i * mn);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Geqp3(const Call& c) {
  RETURN_IF_ERROR(NeedCounts(c, 2, 3));
  const Shape& x = c.operand_shapes[0];
  ASSIGN_OR_RETURN(Batch b, MatrixBatch(c, x, "operand"));
  const int64_t k = std::min(b.rows, b.cols);
  RETURN_IF_ERROR(NeedBatchShape(c, c.operand_shapes[1], x, PrimitiveType::kS32, {b.cols}, "jpvt"));
  if (!c.result_shapes[0].Compatible(x)) return c.Error("result 0 must match the operand");
  if (!c.result_shapes[1].Compatible(c.operand_shapes[1])) return c.Error("result 1 must match jpvt");
  RETURN_IF_ERROR(NeedBatchShape(c, c.result_shapes[2], x, x.element_type(), {k}, "tau"));
  const int64_t mn = b.rows * b.cols;
  std::vector<T> a(mn);
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0;
    int* jpvt = Out<int>(c, 1) + i * b.cols;
    std::memcpy(jpvt, In<int>(c, 1) + i * b.cols, b.cols * sizeof(int));
    ToColMajor(In<T>(c, 0) + i * mn, b.rows, b.cols, a.data());
    if (mn > 0) Traits<T>::geqp3(b.rows, b.cols, a.data(), jpvt, Out<T>(c, 2) + i * k, &info);
    FromColMajor(a.data(), b.rows, b.cols, Out<T>(c, 0) + i * mn);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Orgqr(const Call& c) {
  RETURN_IF_ERROR(NeedCounts(c, 2, 1));
  const Shape& x = c.operand_shapes[0];
  ASSIGN_OR_RETURN(Batch b, MatrixBatch(c, x, "operand"));
  const Shape& tau = c.operand_shapes[1];
  const int64_t k = tau.rank() > 0 ? tau.dimensions(tau.rank() - 1) : -1;
  RETURN_IF_ERROR(NeedBatchShape(c, tau, x, x.element_type(), {k}, "tau"));
  if (k > b.cols || b.cols > b.rows) {
    return c.Error(absl::StrCat("needs k <= n <= m, got m=", b.rows, " n=", b.cols, " k=", k));
  }
  if (!c.result_shapes[0].Compatible(x)) return c.Error("result must match the operand");
  const int64_t mn = b.rows * b.cols;
  std::vector<T> a(mn);
  for (int64_t i = 0; i < b.count; ++i) {
    int info = 0;
    ToColMajor(In<T>(c, 0) + i * mn, b.rows, b.cols, a.data());
    if (mn > 0) Traits<T>::orgqr(b.rows, b.cols, k, a.data(), In<T>(c, 1) + i * k, &info);
    FromColMajor(a.data(), b.rows, b.cols, Out<T>(c, 0) + i * mn);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Ormqr(const Call& c) {
  RETURN_IF_ERROR(NeedCounts(c, 3, 1));
  const auto left = c.attrs.find("left");
  const auto transpose = c.attrs.find("transpose");
  if (left == c.attrs.end() || transpose == c.attrs.end()) {
    return c.Error("backend_config needs left and transpose");
  }
  const Shape& cs = c.operand_shapes[2];
  ASSIGN_OR_RETURN(Batch cb, MatrixBatch(c, cs, "c"));
  ASSIGN_OR_RETURN(Batch ab, MatrixBatch(c, c.operand_shapes[0], "a"));
  const Shape& tau = c.operand_shapes[1];
  const int64_t k = tau.rank() > 0 ? tau.dimensions(tau.rank() - 1) : -1;
  RETURN_IF_ERROR(NeedBatchShape(c, tau, cs, cs.element_type(), {k}, "tau"));
  const int64_t order = left->second ? cb.rows : cb.cols;
  if (ab.count != cb.count || ab.rows != order || k > order || k > ab.cols ||
      c.operand_shapes[0].element_type() != cs.element_type()) {
    return c.Error(absl::StrCat("a ", c.operand_shapes[0].ToString(), " and tau ",
                                tau.ToString(), " do not fit c ", cs.ToString()));
  }
  if (!c.result_shapes[0].Compatible(cs)) return c.Error("result must match c");
  const char side = left->second ? 'L' : 'R';
  const char trans = transpose->second ? (lapack::IsComplexT<T>::value ? 'C' : 'T') : 'N';
  const int64_t an = ab.rows * ab.cols, cn = cb.rows * cb.cols;
  std::vector<T> a(an), m(cn);
  for (int64_t i = 0; i < cb.count; ++i) {
    int info = 0;
    ToColMajor(In<T>(c, 0) + i * an, ab.rows, ab.cols, a.data());
    ToColMajor(In<T>(c, 2) + i * cn, cb.rows, cb.cols, m.data());
    if (cn > 0 && k > 0) {
      Traits<T>::ormqr(side, trans, cb.rows, cb.cols, k, a.data(), std::max<int64_t>(1, ab.rows),
                       In<T>(c, 1) + i * k, m.data(), &info);
    }
    FromColMajor(m.data(), cb.rows, cb.cols, Out<T>(c, 0) + i * cn);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Trsm(const Call& c) {
  RETURN_IF_ERROR(NeedCounts(c, 2, 1));
  ASSIGN_OR_RETURN(const char side, c.CharAttr("side", "LR"));
  ASSIGN_OR_RETURN(const char uplo, c.CharAttr("uplo", "LU"));
  ASSIGN_OR_RETURN(const char trans, c.CharAttr("trans_x", "NTC"));
  ASSIGN_OR_RETURN(const char diag, c.CharAttr("diag", "NU"));
  const Shape& as = c.operand_shapes[0];
  const Shape& bs = c.operand_shapes[1];
  ASSIGN_OR_RETURN(Batch ab, MatrixBatch(c, as, "a"));
  ASSIGN_OR_RETURN(Batch bb, MatrixBatch(c, bs, "b"));
  const int64_t order = side == 'L' ? bb.rows : bb.cols;
  if (ab.count != bb.count || ab.rows != order || ab.cols != order ||
      as.element_type() != bs.element_type()) {
    return c.Error(absl::StrCat("a ", as.ToString(), " does not fit b ", bs.ToString()));
  }
  if (!c.result_shapes[0].Compatible(bs)) return c.Error("result must match b");
  const int64_t an = ab.rows * ab.cols, bn = bb.rows * bb.cols;
  std::vector<T> a(an), m(bn);
  for (int64_t i = 0; i < bb.count; ++i) {
    ToColMajor(In<T>(c, 0) + i * an, ab.rows, ab.cols, a.data());
    ToColMajor(In<T>(c, 1) + i * bn, bb.rows, bb.cols, m.data());
    if (bn > 0) {
      Traits<T>::trsm(side, uplo, trans, diag, bb.rows, bb.cols, a.data(),
                      std::max<int64_t>(1, ab.rows), m.data());
    }
    FromColMajor(m.data(), bb.rows, bb.cols, Out<T>(c, 0) + i * bn);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Gtsv(const Call& c) {
  RETURN_IF_ERROR(NeedCounts(c, 4, 5));
  const Shape& bs = c.operand_shapes[3];
  ASSIGN_OR_RETURN(Batch bb, MatrixBatch(c, bs, "b"));
  for (int i = 0; i < 3; ++i) {
    RETURN_IF_ERROR(NeedBatchShape(c, c.operand_shapes[i], bs, bs.element_type(), {bb.rows},
                                   absl::StrCat("diagonal operand ", i)));
    if (!c.result_shapes[i].Compatible(c.operand_shapes[i])) {
      return c.Error(absl::StrCat("result ", i, " must match operand ", i));
    }
  }
  if (!c.result_shapes[3].Compatible(bs)) return c.Error("result 3 must match b");
  RETURN_IF_ERROR(NeedBatchShape(c, c.result_shapes[4], bs, PrimitiveType::kS32, {}, "info"));
  const int64_t n = bb.rows, bn = bb.rows * bb.cols;
  std::vector<T> m(bn);
  for (int64_t i = 0; i < bb.count; ++i) {
    T* dl = Out<T>(c, 0) + i * n;
    T* d = Out<T>(c, 1) + i * n;
    T* du = Out<T>(c, 2) + i * n;
    for (int j = 0; j < 3; ++j) std::memcpy(Out<T>(c, j) + i * n, In<T>(c, j) + i * n, n * sizeof(T));
    int info = 0;
    ToColMajor(In<T>(c, 3) + i * bn, bb.rows, bb.cols, m.data());
    // dl[0] is not part of the sub-diagonal (jax's convention).
    if (n > 0 && bb.cols > 0) Traits<T>::gtsv(n, bb.cols, dl + 1, d, du, m.data(), &info);
    FromColMajor(m.data(), bb.rows, bb.cols, Out<T>(c, 3) + i * bn);
    Out<int>(c, 4)[i] = info;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Run(const Call& c) {
  const std::string& r = c.routine;
  if (r == "getrf") return Getrf<T>(c);
  if (r == "xla_lu") return XlaLu<T>(c);
  if (r == "potrf") return Potrf<T>(c);
  if (r == "geqrf") return Geqrf<T>(c);
  if (r == "geqp3") return Geqp3<T>(c);
  if (r == "orgqr" || r == "ungqr") return Orgqr<T>(c);
  if (r == "ormqr" || r == "unmqr") return Ormqr<T>(c);
  if (r == "trsm") return Trsm<T>(c);
  if (r == "gtsv") return Gtsv<T>(c);
  bool handled = false;
  RETURN_IF_ERROR(RunEigenRoutine<T>(c, &handled));
  if (!handled) {
    return absl::UnimplementedError(absl::StrCat(
        "custom-call target \"", c.instr->attrs().custom_call_target, "\" (%", c.instr->name(),
        ") is not supported by the emulator"));
  }
  return absl::OkStatus();
}

// "lapack_sgetrf_ffi" -> ('s', "getrf").
bool SplitTarget(absl::string_view target, char* prefix, std::string* routine) {
  if (!absl::ConsumePrefix(&target, "lapack_") || !absl::ConsumeSuffix(&target, "_ffi") ||
      target.size() < 2) {
    return false;
  }
  *prefix = target[0];
  *routine = std::string(target.substr(1));
  return *prefix == 's' || *prefix == 'd' || *prefix == 'c' || *prefix == 'z';
}

}  // namespace
}  // namespace lapack_internal

// XLA's own linear-algebra custom-calls (what jax lowers qr/eigh/lu to on
// TPU; XLA's QrExpander / EighExpander define them) and the routine that
// computes each: "Qr" gives (a, taus) as geqrf, the reflector product is
// orgqr, "Eigh" is syevd/heevd, "LuDecomposition" getrf.
const char* XlaLinalgRoutine(absl::string_view target) {
  if (target == "Qr") return "geqrf";
  if (target == "ProductOfElementaryHouseholderReflectors") return "orgqr";
  if (target == "Eigh") return "xla_eigh";
  if (target == "LuDecomposition") return "xla_lu";
  return nullptr;
}

bool IsLapackTarget(absl::string_view target) {
  if (XlaLinalgRoutine(target) != nullptr) return true;
  char p;
  std::string r;
  if (!lapack_internal::SplitTarget(target, &p, &r)) return false;
  static const char* kRoutines[] = {"getrf", "potrf", "geqrf", "geqp3", "orgqr", "ungqr",
                                    "ormqr", "unmqr", "trsm",  "gtsv",  "syevd", "heevd",
                                    "gesdd", "gesvd", "geev",  "gees",  "gehrd", "sytrd",
                                    "hetrd"};
  for (const char* k : kRoutines) {
    if (r == k) return true;
  }
  return false;
}

absl::Status LapackCustomCall(const hlo::HloInstruction& instr, const std::vector<const void*>& in,
                              const std::vector<void*>& out) {
  using namespace lapack_internal;  // NOLINT
  Call c;
  c.instr = &instr;
  c.in = &in;
  c.out = &out;
  for (const hlo::HloInstruction* o : instr.operands()) {
    for (const Shape& s : hlo::LeafShapes(o->shape())) c.operand_shapes.push_back(s);
  }
  c.result_shapes = hlo::LeafShapes(instr.shape());
  if (c.operand_shapes.size() != in.size() || c.result_shapes.size() != out.size()) {
    return c.Error("operand or result leaves do not match the buffers");
  }
  char prefix = 0;
  if (const char* routine = XlaLinalgRoutine(instr.attrs().custom_call_target)) {
    // Typed by the operand; Eigh's backend_config is "lower,sort,max_iter,tol".
    c.routine = routine;
    if (c.operand_shapes.empty()) return c.Error("needs an operand");
    switch (c.operand_shapes[0].element_type()) {
      case PrimitiveType::kF32: prefix = 's'; break;
      case PrimitiveType::kF64: prefix = 'd'; break;
      case PrimitiveType::kC64: prefix = 'c'; break;
      case PrimitiveType::kC128: prefix = 'z'; break;
      default: return c.Error("operands must be f32, f64, c64 or c128");
    }
    if (c.routine == "xla_eigh") {
      std::vector<std::string> parts = absl::StrSplit(instr.attrs().backend_config, ',');
      int64_t lower = 0;
      if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &lower)) {
        return c.Error(absl::StrCat("backend_config '", instr.attrs().backend_config,
                                    "' is not lower,sort_eigenvalues,max_iter,tol"));
      }
      c.attrs["uplo"] = lower ? 'L' : 'U';
      c.attrs["mode"] = 'V';
    }
  } else if (!SplitTarget(instr.attrs().custom_call_target, &prefix, &c.routine)) {
    return c.Error("is not a LAPACK target");
  } else {
    auto attrs = ParseFfiAttributes(instr.attrs().backend_config);
    if (!attrs.ok()) return c.Error(attrs.status().message());
    c.attrs = *std::move(attrs);
  }
  const PrimitiveType want = prefix == 's'   ? PrimitiveType::kF32
                             : prefix == 'd' ? PrimitiveType::kF64
                             : prefix == 'c' ? PrimitiveType::kC64
                                             : PrimitiveType::kC128;
  if (c.operand_shapes.empty() || c.operand_shapes.front().element_type() != want) {
    return c.Error(absl::StrCat("operands must be ", hlo::PrimitiveTypeName(want)));
  }
  lapack::TakeArgumentError();  // none pending from elsewhere
  absl::Status s;
  switch (prefix) {
    case 's': s = Run<float>(c); break;
    case 'd': s = Run<double>(c); break;
    case 'c': s = Run<lapack::c32>(c); break;
    default: s = Run<lapack::c64>(c); break;
  }
  const std::string rejected = lapack::TakeArgumentError();
  if (s.ok() && !rejected.empty()) {
    return absl::InternalError(absl::StrCat(
        "custom-call \"", instr.attrs().custom_call_target, "\" (%", instr.name(),
        "): LAPACK rejected an argument (", rejected, ")"));
  }
  return s;
}

}  // namespace tpuoff::runtime
