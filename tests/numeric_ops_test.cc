// fft against a direct DFT at lengths FFTW factors differently, jaxlib's
// LAPACK custom-calls with hand-computed factors (1-based pivots, info
// codes, layouts), the rng opcode's range, moments and per-iteration state,
// proto round trips of the new attributes, and the errors malformed calls
// give (naming the instruction or the custom-call target).
#include <complex>
#include <numeric>

#include "gmock/gmock.h"
#include "hlo/proto/proto_io.h"
#include "hlo/text/text_printer.h"
#include "runtime/emulator/lapack_traits.h"
#include "runtime/emulator/ops_lapack.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using ::testing::HasSubstr;

// ---------------------------------------------------------------- fft

TEST(Fft, MatchesDirectDftAtOddAndMixedLengths) {
  // 2-D complex transform of a [3, 5, 6] array over its last two dims,
  // and the inverse back; compared with the O(n^2) definition.
  const int64_t b = 3, n0 = 5, n1 = 6;
  std::vector<double> re(b * n0 * n1), im(b * n0 * n1);
  for (size_t i = 0; i < re.size(); ++i) {
    re[i] = std::sin(0.37 * i) + 0.1 * i;
    im[i] = std::cos(1.3 * i);
  }
  const std::string text = R"(HloModule f
    ENTRY e { r = f64[3,5,6] parameter(0) i = f64[3,5,6] parameter(1)
      c = c128[3,5,6] complex(r, i)
      f = c128[3,5,6] fft(c), fft_type=FFT, fft_length={5,6}
      g = c128[3,5,6] fft(f), fft_type=IFFT, fft_length={5,6}
      fr = f64[3,5,6] real(f) fi = f64[3,5,6] imag(f) gr = f64[3,5,6] real(g)
      ROOT t = (f64[3,5,6], f64[3,5,6], f64[3,5,6]) tuple(fr, fi, gr) })";
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {Lit(PrimitiveType::kF64, {b, n0, n1}, re),
                          Lit(PrimitiveType::kF64, {b, n0, n1}, im)});
  ASSERT_TRUE(r.ok()) << r.status();
  for (int64_t k = 0; k < b; ++k) {
    for (int64_t u = 0; u < n0; ++u) {
      for (int64_t v = 0; v < n1; ++v) {
        std::complex<double> sum = 0;
        for (int64_t x = 0; x < n0; ++x) {
          for (int64_t y = 0; y < n1; ++y) {
            const int64_t i = (k * n0 + x) * n1 + y;
            const double ang = -2 * M_PI * (double(u * x) / n0 + double(v * y) / n1);
            sum += std::complex<double>(re[i], im[i]) * std::polar(1.0, ang);
          }
        }
        const int64_t o = (k * n0 + u) * n1 + v;
        EXPECT_NEAR(r->outputs[0].GetAsDouble(o), sum.real(), 1e-9) << o;
        EXPECT_NEAR(r->outputs[1].GetAsDouble(o), sum.imag(), 1e-9) << o;
        EXPECT_NEAR(r->outputs[2].GetAsDouble(o), re[o], 1e-12) << o;
      }
    }
  }
}

TEST(Fft, RealTransformOfOddLengthKeepsHalfPlusOne) {
  // RFFT of length 7 has 4 outputs; IRFFT of them restores the signal.
  std::vector<double> x = {3, -1, 4, 1, -5, 9, 2};
  auto m = Parse(R"(HloModule f
    ENTRY e { x = f32[7] parameter(0)
      h = c64[4] fft(x), fft_type=RFFT, fft_length={7}
      b = f32[7] fft(h), fft_type=IRFFT, fft_length={7}
      hr = f32[4] real(h) hi = f32[4] imag(h)
      ROOT t = (f32[4], f32[4], f32[7]) tuple(hr, hi, b) })");
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {F32({7}, x)});
  ASSERT_TRUE(r.ok()) << r.status();
  for (int64_t k = 0; k < 4; ++k) {
    std::complex<double> s = 0;
    for (int64_t j = 0; j < 7; ++j) s += x[j] * std::polar(1.0, -2 * M_PI * k * j / 7);
    EXPECT_NEAR(r->outputs[0].GetAsDouble(k), s.real(), 1e-5);
    EXPECT_NEAR(r->outputs[1].GetAsDouble(k), s.imag(), 1e-5);
  }
  for (int64_t j = 0; j < 7; ++j) EXPECT_NEAR(r->outputs[2].GetAsDouble(j), x[j], 1e-5);
}

// ---------------------------------------------------------------- LAPACK

constexpr char kLapackHead[] = "HloModule l\nENTRY e {\n";

TEST(LapackCustomCalls, GetrfPivotsAreOneBasedAndFactorsPacked) {
  // [[0, 1], [2, 3]] swaps its rows: ipiv = {2, 2}, LU = [[2, 3], [0, 1]].
  const std::string text = std::string(kLapackHead) + R"(
    a = f32[2,2]{1,0} parameter(0)
    lu = (f32[2,2]{0,1}, s32[2]{0}, s32[]) custom-call(a), custom_call_target="lapack_sgetrf_ffi", operand_layout_constraints={f32[2,2]{0,1}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI, backend_config={}
    f = f32[2,2]{0,1} get-tuple-element(lu), index=0
    p = s32[2]{0} get-tuple-element(lu), index=1
    i = s32[] get-tuple-element(lu), index=2
    ROOT t = (f32[2,2]{0,1}, s32[2]{0}, s32[]) tuple(f, p, i) })";
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {F32({2, 2}, {0, 1, 2, 3})});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(r->outputs[0], F32({2, 2}, {2, 3, 0, 1}), 0, "lu");
  ExpectNear(r->outputs[1], S32({2}, {2, 2}), 0, "ipiv");
  ExpectNear(r->outputs[2], S32({}, {0}), 0, "info");
}

TEST(LapackCustomCalls, PotrfReportsNotPositiveDefiniteInInfo) {
  // Batch of two: [[4, 2], [2, 3]] factors (upper triangle left as given);
  // [[1, 2], [2, 1]] fails at its second pivot: info 2.
  const std::string text = std::string(kLapackHead) + R"(
    a = f32[2,2,2]{2,1,0} parameter(0)
    c = (f32[2,2,2]{1,2,0}, s32[2]{0}) custom-call(a), custom_call_target="lapack_spotrf_ffi", operand_layout_constraints={f32[2,2,2]{1,2,0}}, api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}
    l = f32[2,2,2]{1,2,0} get-tuple-element(c), index=0
    i = s32[2]{0} get-tuple-element(c), index=1
    ROOT t = (f32[2,2,2]{1,2,0}, s32[2]{0}) tuple(l, i) })";
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {F32({2, 2, 2}, {4, 2, 2, 3, 1, 2, 2, 1})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->outputs[0].GetAsDouble(0), 2, 1e-6);
  EXPECT_NEAR(r->outputs[0].GetAsDouble(1), 2, 1e-6);  // upper: untouched
  EXPECT_NEAR(r->outputs[0].GetAsDouble(2), 1, 1e-6);
  EXPECT_NEAR(r->outputs[0].GetAsDouble(3), M_SQRT2, 1e-6);
  ExpectNear(r->outputs[1], S32({2}, {0, 2}), 0, "info");
}

TEST(LapackCustomCalls, TrsmGtsvSyevdGesddGeev) {
  const std::string text = std::string(kLapackHead) + R"(
    a = f32[2,2]{1,0} parameter(0)
    b = f32[1,2]{1,0} parameter(1)
    dl = f32[3]{0} parameter(2)
    d = f32[3]{0} parameter(3)
    du = f32[3]{0} parameter(4)
    rhs = f32[3,1]{1,0} parameter(5)
    sym = f32[2,2]{1,0} parameter(6)
    rot = f32[2,2]{1,0} parameter(7)
    x = f32[1,2]{0,1} custom-call(a, b), custom_call_target="lapack_strsm_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={diag = 85 : ui8, side = 82 : ui8, trans_x = 84 : ui8, uplo = 76 : ui8}
    g = (f32[3]{0}, f32[3]{0}, f32[3]{0}, f32[3,1]{0,1}, s32[]) custom-call(dl, d, du, rhs), custom_call_target="lapack_sgtsv_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={}
    gx = f32[3,1]{0,1} get-tuple-element(g), index=3
    e = (f32[2,2]{0,1}, f32[2]{0}, s32[]) custom-call(sym), custom_call_target="lapack_ssyevd_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={mode = 86 : ui8, uplo = 76 : ui8}
    w = f32[2]{0} get-tuple-element(e), index=1
    s = (f32[2,2]{0,1}, f32[2]{0}, f32[2,2]{0,1}, f32[2,2]{0,1}, s32[]) custom-call(sym), custom_call_target="lapack_sgesdd_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={mode = 65 : ui8}
    sv = f32[2]{0} get-tuple-element(s), index=1
    v = (f32[2]{0}, f32[2]{0}, c64[2,2]{0,1}, c64[2,2]{0,1}, s32[]) custom-call(rot), custom_call_target="lapack_sgeev_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={compute_left = 78 : ui8, compute_right = 86 : ui8}
    wi = f32[2]{0} get-tuple-element(v), index=1
    ROOT t = (f32[1,2]{0,1}, f32[3,1]{0,1}, f32[2]{0}, f32[2]{0}, f32[2]{0}) tuple(x, gx, w, sv, wi) })";
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {F32({2, 2}, {1, 9, 3, 1}), F32({1, 2}, {5, 7}),
                          F32({3}, {0, 1, 1}), F32({3}, {2, 2, 2}), F32({3}, {1, 1, 0}),
                          F32({3, 1}, {4, 8, 8}), F32({2, 2}, {3, 0, 0, -4}),
                          F32({2, 2}, {0, -1, 1, 0})});
  ASSERT_TRUE(r.ok()) << r.status();
  // x op(A) = b with A unit lower [[1, 0], [3, 1]] transposed: x [[1, 3], [0, 1]] = [5, 7].
  ExpectNear(r->outputs[0], F32({1, 2}, {5, -8}), 1e-6, "trsm");
  ExpectNear(r->outputs[1], F32({3, 1}, {1, 2, 3}), 1e-6, "gtsv");
  ExpectNear(r->outputs[2], F32({2}, {-4, 3}), 1e-6, "syevd (ascending)");
  ExpectNear(r->outputs[3], F32({2}, {4, 3}), 1e-6, "gesdd (descending)");
  ExpectNear(r->outputs[4], F32({2}, {1, -1}), 1e-6, "geev imaginary parts");
}

TEST(XlaLinalgCustomCalls, QrReflectorsLuAndEighAsJaxLowersThemForTpu) {
  // Qr of [3, 4]^T: beta -5, tau 1.6, v = [1, 0.5] (LAPACK's and XLA's
  // Householder convention); Q's column [-0.6, -0.8]. LU of [[0, 1], [2, 3]]:
  // 0-based pivots {1, 1}, permutation {1, 0}. Eigh of diag(3, -4).
  const std::string text = std::string(kLapackHead) + R"(
    a = f32[2,1]{1,0} parameter(0)
    b = f32[2,2]{1,0} parameter(1)
    s = f32[2,2]{1,0} parameter(2)
    qr = (f32[2,1]{1,0}, f32[1]{0}) custom-call(a), custom_call_target="Qr"
    r = f32[2,1]{1,0} get-tuple-element(qr), index=0
    tau = f32[1]{0} get-tuple-element(qr), index=1
    q = f32[2,1]{1,0} custom-call(r, tau), custom_call_target="ProductOfElementaryHouseholderReflectors"
    lu = (f32[2,2]{1,0}, s32[2]{0}, s32[2]{0}) custom-call(b), custom_call_target="LuDecomposition", api_version=API_VERSION_STATUS_RETURNING
    f = f32[2,2]{1,0} get-tuple-element(lu), index=0
    p = s32[2]{0} get-tuple-element(lu), index=1
    perm = s32[2]{0} get-tuple-element(lu), index=2
    e = (f32[2,2]{1,0}, f32[2]{0}) custom-call(s), custom_call_target="Eigh", backend_config="1,1,100,1e-6"
    w = f32[2]{0} get-tuple-element(e), index=1
    ROOT t = (f32[2,1]{1,0}, f32[1]{0}, f32[2,1]{1,0}, f32[2,2]{1,0}, s32[2]{0}, s32[2]{0}, f32[2]{0}) tuple(r, tau, q, f, p, perm, w) })";
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {F32({2, 1}, {3, 4}), F32({2, 2}, {0, 1, 2, 3}), F32({2, 2}, {3, 0, 0, -4})});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(r->outputs[0], F32({2, 1}, {-5, 0.5}), 1e-6, "qr");
  ExpectNear(r->outputs[1], F32({1}, {1.6}), 1e-6, "tau");
  ExpectNear(r->outputs[2], F32({2, 1}, {-0.6, -0.8}), 1e-6, "q");
  ExpectNear(r->outputs[3], F32({2, 2}, {2, 3, 0, 1}), 0, "lu");
  ExpectNear(r->outputs[4], S32({2}, {1, 1}), 0, "pivots");
  ExpectNear(r->outputs[5], S32({2}, {1, 0}), 0, "permutation");
  ExpectNear(r->outputs[6], F32({2}, {-4, 3}), 1e-6, "eigenvalues");
}

TEST(LapackCustomCalls, ArgumentErrorsAreRecordedNotFatal) {
  // The reference XERBLA would stop the process; ours records the error.
  float a[4] = {1, 2, 3, 4};
  int ipiv[2], info = 0;
  lapack::TakeArgumentError();
  lapack::Traits<float>::getrf(-1, 2, a, ipiv, &info);
  EXPECT_EQ(info, -1);
  EXPECT_EQ(lapack::TakeArgumentError(), "SGETRF: parameter 1");
  EXPECT_EQ(lapack::TakeArgumentError(), "");
}

TEST(LapackCustomCalls, MalformedCallsNameTheTarget) {
  struct Case {
    std::string call;
    absl::StatusCode code;
    std::string message;
  } cases[] = {
      {R"(c = (f32[2,2]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_spotrf_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={})",
       absl::StatusCode::kInvalidArgument, "has no attribute uplo"},
      {R"(c = (f32[2,2]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_spotrf_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 77 : ui8})",
       absl::StatusCode::kInvalidArgument, "uplo = 77"},
      {R"(c = (f32[2,2]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_spotrf_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={uplo 76})",
       absl::StatusCode::kInvalidArgument, "not name = value"},
      {R"(c = (f32[2,2]{0,1}, s32[3]) custom-call(a), custom_call_target="lapack_sgetrf_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={})",
       absl::StatusCode::kInvalidArgument, "takes 1 operand(s) and returns 3"},
      {R"(c = (f32[2,2]{0,1}, s32[3]{0}, s32[]) custom-call(a), custom_call_target="lapack_sgetrf_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={})",
       absl::StatusCode::kInvalidArgument, "ipiv is s32[3]"},
      {R"(c = (f64[2,2]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_dpotrf_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8})",
       absl::StatusCode::kInvalidArgument, "operands must be f64"},
      {R"(c = f32[2,2]{0,1} custom-call(a), custom_call_target="lapack_sfoo_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={})",
       absl::StatusCode::kUnimplemented, "\"lapack_sfoo_ffi\" (%c) is not supported"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.call);
    auto m = Parse(std::string(kLapackHead) + "  a = f32[2,2]{1,0} parameter(0)\n  ROOT " + c.call +
                   "\n}");
    ASSERT_NE(m, nullptr);
    auto r = RunModule(*m, {F32({2, 2}, {4, 2, 2, 3})});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("%c"));
  }
}

// ---------------------------------------------------------------- rng

TEST(Rng, UniformRangeMomentsAndStatePerIteration) {
  // Three loop iterations each draw 4000 uniforms in [-2, 6) and 4000
  // standard normals: every draw differs (the state advances), the values
  // stay in range, and the moments are those of the distributions.
  auto m = Parse(std::string("HloModule r\n") + kF32Reducers + R"(
    cond { cp = (s32[], f32[3,4000], f32[3,4000]) parameter(0) ci = s32[] get-tuple-element(cp), index=0
           three = s32[] constant(3) ROOT lt = pred[] compare(ci, three), direction=LT }
    body { bp = (s32[], f32[3,4000], f32[3,4000]) parameter(0) i = s32[] get-tuple-element(bp), index=0
           u = f32[3,4000] get-tuple-element(bp), index=1 n = f32[3,4000] get-tuple-element(bp), index=2
           lo = f32[] constant(-2) hi = f32[] constant(6) zero = f32[] constant(0) one = f32[] constant(1)
           du = f32[4000] rng(lo, hi), distribution=rng_uniform
           dn = f32[4000] rng(zero, one), distribution=rng_normal
           ru = f32[1,4000] reshape(du) rn = f32[1,4000] reshape(dn) z = s32[] constant(0)
           u2 = f32[3,4000] dynamic-update-slice(u, ru, i, z)
           n2 = f32[3,4000] dynamic-update-slice(n, rn, i, z)
           c1 = s32[] constant(1) i2 = s32[] add(i, c1)
           ROOT t = (s32[], f32[3,4000], f32[3,4000]) tuple(i2, u2, n2) }
    ENTRY e { z = s32[] constant(0) f = f32[] constant(0)
      b = f32[3,4000] broadcast(f), dimensions={}
      init = (s32[], f32[3,4000], f32[3,4000]) tuple(z, b, b)
      w = (s32[], f32[3,4000], f32[3,4000]) while(init), condition=cond, body=body
      u = f32[3,4000] get-tuple-element(w), index=1 n = f32[3,4000] get-tuple-element(w), index=2
      ROOT t = (f32[3,4000], f32[3,4000]) tuple(u, n) })");
  ASSERT_NE(m, nullptr);
  auto r1 = RunModule(*m, {});
  auto r2 = RunModule(*m, {});
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_TRUE(r1->outputs[0] == r2->outputs[0]) << "each run starts from XLA's initial state";
  const Literal& u = r1->outputs[0];
  const Literal& n = r1->outputs[1];
  for (int row = 0; row < 3; ++row) {
    double su = 0, sn = 0, sn2 = 0;
    for (int64_t j = 0; j < 4000; ++j) {
      const double v = u.GetAsDouble(row * 4000 + j);
      ASSERT_GE(v, -2);
      ASSERT_LT(v, 6);
      su += v;
      const double g = n.GetAsDouble(row * 4000 + j);
      sn += g;
      sn2 += g * g;
    }
    // Means within 5 standard errors, the normal's variance within 10%.
    EXPECT_NEAR(su / 4000, 2, 5 * (8 / std::sqrt(12.0)) / std::sqrt(4000.0)) << row;
    EXPECT_NEAR(sn / 4000, 0, 5 / std::sqrt(4000.0)) << row;
    EXPECT_NEAR(sn2 / 4000, 1, 0.1) << row;
    if (row > 0) {
      EXPECT_NE(u.GetAsDouble(row * 4000), u.GetAsDouble((row - 1) * 4000));
    }
  }
}

// ---------------------------------------------------------------- formats

TEST(NumericOpsFormats, ProtoRoundTripKeepsEveryAttribute) {
  const std::string text = R"(HloModule p
ENTRY e {
  c = c64[2,8]{1,0} parameter(0)
  a = f32[3,3]{1,0} parameter(1)
  x = f32[4,3]{1,0} parameter(2)
  s = f32[3]{0} parameter(3)
  k = u64[3]{0} parameter(4)
  f = c64[2,8]{1,0} fft(c), fft_type=IFFT, fft_length={2,8}
  l = f32[3,3]{1,0} cholesky(a), lower=true
  t = f32[3,3]{1,0} triangular-solve(l, a), left_side=true, lower=true, unit_diagonal=true, transpose_a=ADJOINT
  b = (f32[4,3]{1,0}, f32[3]{0}, f32[3]{0}) batch-norm-training(x, s, s), epsilon=0.25, feature_index=1
  g = (u64[3]{0}, u8[5]{0}) rng-bit-generator(k), algorithm=rng_three_fry, origin={({"g.0" {0}}, {})}
  st = u64[2]{0} rng-get-and-update-state(), delta=40
  d = f32[4,3]{1,0} domain(x), domain={kind="sharding", entry={maximal device=1}, exit={replicated}}
  n = s32[] get-dimension-size(d), dimensions={0}
  cc = (f32[3,3]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_spotrf_ffi", operand_layout_constraints={f32[3,3]{0,1}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 85 : ui8}
  ROOT r = (c64[2,8]{1,0}, f32[3,3]{1,0}, (f32[4,3]{1,0}, f32[3]{0}, f32[3]{0}), (u64[3]{0}, u8[5]{0}), u64[2]{0}, s32[], (f32[3,3]{0,1}, s32[])) tuple(f, t, b, g, st, n, cc), origin={({"r.0"}, {}, ({}, {}, {"r.2" {1,2}}), ({}, {}), {}, {}, ({}, {}))}
})";
  auto m = hlo::ParseHloText(text);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string printed = hlo::PrintModule(**m);
  for (const char* attr : {"fft_type=IFFT, fft_length={2,8}", "lower=true", "unit_diagonal=true",
                           "transpose_a=ADJOINT", "epsilon=0.25, feature_index=1",
                           "algorithm=rng_three_fry", "origin={({\"g.0\" {0}}, {})}", "delta=40",
                           "entry={maximal device=1}, exit={replicated}}", "dimensions={0}",
                           "operand_layout_constraints={f32[3,3]{0,1}}",
                           "output_to_operand_aliasing={{0}: (0, {})}",
                           "({}, {}, {\"r.2\" {1,2}})"}) {
    EXPECT_THAT(printed, HasSubstr(attr));
  }
  auto bytes = hlo::ModuleToProtoBytes(**m);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = hlo::ModuleFromProtoBytes(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(hlo::PrintModule(**back), printed);
}

TEST(NumericOpsFormats, VerifierErrorsNameTheInstruction) {
  // Well-formed text, inconsistent shapes or attributes: the verifier's
  // message names the computation, the instruction and the rule.
  struct Case {
    const char* body;
    const char* message;
  } cases[] = {
      {"ROOT r = c64[4] fft(p), fft_type=FFT, fft_length={4}", "FFT and IFFT need a complex operand"},
      {"ROOT r = c64[3] fft(c), fft_type=RFFT, fft_length={4}", "RFFT needs an f32 or f64 operand"},
      {"ROOT r = c64[4] fft(c), fft_type=FFT, fft_length={8}", "does not end in fft_length {8}"},
      {"ROOT r = f32[4,3] triangular-solve(m, m), left_side=true", "differs from the inferred"},
      {"ROOT r = f32[4,4] cholesky(v)", "must be a batch of square matrices"},
      {"ROOT r = (f32[4,4], f32[4], f32[4]) batch-norm-training(m, p, p), epsilon=0.1, feature_index=2",
       "feature_index 2 out of range"},
      {"ROOT r = f32[4,4] batch-norm-inference(m, p, p, p, v), epsilon=0.1, feature_index=1",
       "operand 4 must be f32[4]"},
      {"ROOT r = (u64[2], c64[3]) rng-bit-generator(k), algorithm=rng_philox",
       "output type c64 is not"},
      {"ROOT r = f32[4] rng(p, p), distribution=rng_uniform", "operands must be two scalars"},
      {"ROOT r = s32[] get-dimension-size(p), dimensions={3}", "within the rank of f32[4]"},
      {"ROOT r = f32[4] negate(p), origin={({\"a\"}, {\"b\"})}", "origin= does not match"},
      {"ROOT r = f32[4] custom-call(p), custom_call_target=\"x\", output_to_operand_aliasing={{}: (2, {})}",
       "operand 2 (no such operand or index)"},
      {"ROOT r = f32[4] custom-call(p), custom_call_target=\"x\", operand_layout_constraints={f32[4]{0}, f32[4]{0}}",
       "has 2 shapes for 1 operands"},
      {"ROOT r = f32[4] custom-call(p), custom_call_target=\"x\", operand_layout_constraints={f32[5]{0}}",
       "is not compatible with operand 0"},
  };
  for (const Case& c : cases) {
    const std::string text = absl::StrCat(
        "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  c = c64[4] parameter(1)\n"
        "  m = f32[4,4] parameter(2)\n  k = u64[2] parameter(3)\n  v = f32[4,3] parameter(4)\n  ",
        c.body, "\n}\n");
    auto m = hlo::ParseHloText(text, "bad.hlo");
    ASSERT_TRUE(m.ok()) << c.body << ": " << m.status();
    const absl::Status s = hlo::VerifyModule(**m);
    ASSERT_FALSE(s.ok()) << c.body;
    EXPECT_THAT(std::string(s.message()), HasSubstr("instruction r: ")) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << s;
  }
}

}  // namespace
}  // namespace tpuoff::runtime
