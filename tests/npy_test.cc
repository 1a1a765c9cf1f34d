// .npy parsing, conversion to literals and writing, on hand-made byte strings.
#include "tools/io/npy.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/ir/float16.h"

namespace tpuoff::tools {
namespace {

using ::testing::HasSubstr;
using hlo::PrimitiveType;
using hlo::Shape;

// Bytes of a .npy file: magic, version, little-endian header length, the
// header text padded with spaces + '\n' to a 64-byte boundary, the payload.
std::string MakeNpy(const std::string& dict, const std::string& payload,
                    int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  size_t total = prefix + header.size() + 1;
  header.append((total + 63) / 64 * 64 - total, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  const uint32_t len = header.size();
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  }
  return out + header + payload;
}

template <typename T>
std::string Payload(const std::vector<T>& values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), values.data(), s.size());
  return s;
}

std::string Dict(const std::string& descr, const std::string& shape,
                 const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran +
         ", 'shape': " + shape + ", }";
}

// What numpy writes for np.save(f, np.array([1, 2], dtype='<i4')): a
// 118-byte header (0x76) so the payload starts at offset 128.
const std::string kNumpyInt32Pair =
    std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
    "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }" +
    std::string(60, ' ') + "\n" + std::string("\x01\0\0\0\x02\0\0\0", 8);

TEST(NpyParseTest, ReadsWhatNumpyWrites) {
  ASSERT_EQ(kNumpyInt32Pair.size(), 136u);
  auto a = ParseNpy(kNumpyInt32Pair, "pair.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dtype(), NpyDtype::kInt32);
  EXPECT_EQ(a->shape(), (std::vector<int64_t>{2}));
  auto lit = NpyToLiteral(*a, Shape(PrimitiveType::kS32, {2}), "pair.npy");
  ASSERT_TRUE(lit.ok()) << lit.status();
  EXPECT_EQ(lit->GetAsInt64(0), 1);
  EXPECT_EQ(lit->GetAsInt64(1), 2);
}

TEST(NpyParseTest, Float32MatrixVersion1And2) {
  const std::vector<float> v = {1.5f, -2.f, 3.25f, 4.f, 5.f, 6.f};
  for (int major : {1, 2, 3}) {
    auto a = ParseNpy(MakeNpy(Dict("<f4", "(2, 3)"), Payload(v), major), "m.npy");
    ASSERT_TRUE(a.ok()) << "v" << major << ": " << a.status();
    EXPECT_EQ(a->shape(), (std::vector<int64_t>{2, 3}));
    auto lit = NpyToLiteral(*a, Shape(PrimitiveType::kF32, {2, 3}), "m.npy");
    ASSERT_TRUE(lit.ok()) << lit.status();
    for (int i = 0; i < 6; ++i) EXPECT_EQ(lit->GetAsDouble(i), v[i]) << i;
  }
}

TEST(NpyParseTest, ScalarAndEmptyShapes) {
  auto s = ParseNpy(MakeNpy(Dict("<f8", "()"), Payload<double>({2.5})), "s.npy");
  ASSERT_TRUE(s.ok()) << s.status();
  auto lit = NpyToLiteral(*s, Shape::Scalar(PrimitiveType::kF32), "s.npy");
  ASSERT_TRUE(lit.ok()) << lit.status();
  EXPECT_EQ(lit->GetAsDouble(0), 2.5);

  auto e = ParseNpy(MakeNpy(Dict("<f4", "(0, 4)"), ""), "e.npy");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->num_elements(), 0);
}

TEST(NpyParseTest, RejectsMalformedAndUnsupported) {
  const std::string good = MakeNpy(Dict("<f4", "(2,)"), Payload<float>({1, 2}));
  struct Case {
    const char* name;
    std::string bytes;
    absl::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"empty", "", absl::StatusCode::kInvalidArgument, "magic"},
      {"bad magic", "\x93NUMPX\x01\x00", absl::StatusCode::kInvalidArgument,
       "magic"},
      {"truncated header", good.substr(0, 40),
       absl::StatusCode::kInvalidArgument, "header claims"},
      {"truncated data", good.substr(0, good.size() - 1),
       absl::StatusCode::kInvalidArgument, "needs 8 data bytes but the file holds 7"},
      {"extra data", good + "x", absl::StatusCode::kInvalidArgument,
       "the file holds 9"},
      {"lying shape", MakeNpy(Dict("<f4", "(1000000, 1000000)"),
                              Payload<float>({1, 2})),
       absl::StatusCode::kInvalidArgument, "needs 4000000000000 data bytes"},
      {"overflowing shape",
       MakeNpy(Dict("<f4", "(1099511627776, 1099511627776, 1099511627776)"),
               ""),
       absl::StatusCode::kInvalidArgument, "impossibly large"},
      {"huge dim", MakeNpy(Dict("<f4", "(99999999999999999999999,)"), ""),
       absl::StatusCode::kInvalidArgument, "dimension too large"},
      {"fortran order",
       MakeNpy(Dict("<f4", "(2, 1)", "True"), Payload<float>({1, 2})),
       absl::StatusCode::kUnimplemented, "fortran_order"},
      {"big endian", MakeNpy(Dict(">f4", "(2,)"), Payload<float>({1, 2})),
       absl::StatusCode::kUnimplemented, "big-endian"},
      {"object", MakeNpy(Dict("|O", "(2,)"), std::string(16, '\0')),
       absl::StatusCode::kUnimplemented, "object"},
      {"unicode", MakeNpy(Dict("<U1", "(2,)"), std::string(8, '\0')),
       absl::StatusCode::kUnimplemented, "unsupported .npy dtype '<U1'"},
      {"structured",
       MakeNpy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
               std::string(4, '\0')),
       absl::StatusCode::kUnimplemented, "structured"},
      {"missing key", MakeNpy("{'descr': '<f4', 'shape': (2,), }",
                              Payload<float>({1, 2})),
       absl::StatusCode::kInvalidArgument, "missing one of"},
      {"unknown key",
       MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), "
               "'x': 1}",
               Payload<float>({1, 2})),
       absl::StatusCode::kInvalidArgument, "unexpected or repeated key 'x'"},
      {"bad shape text", MakeNpy(Dict("<f4", "(2; 3)"), ""),
       absl::StatusCode::kInvalidArgument, "expected ',' or ')'"},
      {"version 4", std::string("\x93NUMPY\x04\x00\x00\x00", 10),
       absl::StatusCode::kUnimplemented, "version 4.0"},
  };
  for (const Case& c : cases) {
    auto a = ParseNpy(c.bytes, "bad.npy");
    ASSERT_FALSE(a.ok()) << c.name;
    EXPECT_EQ(a.status().code(), c.code) << c.name << ": " << a.status();
    EXPECT_THAT(std::string(a.status().message()), HasSubstr("bad.npy"))
        << c.name;
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(c.message))
        << c.name;
  }
}

TEST(NpyConvertTest, Float32ToBf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even (1.0);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1+2^-6).
  const std::vector<float> v = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -0.3f};
  auto a = ParseNpy(MakeNpy(Dict("<f4", "(3,)"), Payload(v)), "x.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  auto lit = NpyToLiteral(*a, Shape(PrimitiveType::kBF16, {3}), "x.npy");
  ASSERT_TRUE(lit.ok()) << lit.status();
  EXPECT_EQ(lit->GetAsDouble(0), 1.0);
  EXPECT_EQ(lit->GetAsDouble(1), 1.0 + 1.0 / 64);
  EXPECT_EQ(lit->GetAsDouble(2), hlo::RoundToBf16(-0.3f));
}

TEST(NpyConvertTest, Float64ToF32AndInt64ToS32) {
  auto d = ParseNpy(MakeNpy(Dict("<f8", "(2,)"), Payload<double>({0.1, -1e40})),
                    "d.npy");
  ASSERT_TRUE(d.ok());
  auto f = NpyToLiteral(*d, Shape(PrimitiveType::kF32, {2}), "d.npy");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->data<float>()[0], 0.1f);
  EXPECT_TRUE(std::isinf(f->data<float>()[1]));

  auto i = ParseNpy(
      MakeNpy(Dict("<i8", "(3,)"), Payload<int64_t>({-5, 151935, 2147483647})),
      "i.npy");
  ASSERT_TRUE(i.ok());
  auto s = NpyToLiteral(*i, Shape(PrimitiveType::kS32, {3}), "i.npy");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->data<int32_t>()[0], -5);
  EXPECT_EQ(s->data<int32_t>()[1], 151935);
  EXPECT_EQ(s->data<int32_t>()[2], 2147483647);

  auto big = ParseNpy(MakeNpy(Dict("<i8", "(2,)"),
                              Payload<int64_t>({1, int64_t{1} << 31})),
                      "big.npy");
  ASSERT_TRUE(big.ok());
  auto bad = NpyToLiteral(*big, Shape(PrimitiveType::kS32, {2}), "big.npy");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("element 1 = 2147483648 is out of range for s32"));
}

TEST(NpyConvertTest, BoolAndUint8ToPred) {
  auto b = ParseNpy(MakeNpy(Dict("|b1", "(3,)"), std::string("\1\0\1", 3)),
                    "b.npy");
  ASSERT_TRUE(b.ok()) << b.status();
  auto p = NpyToLiteral(*b, Shape(PrimitiveType::kPred, {3}), "b.npy");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->GetAsInt64(0), 1);
  EXPECT_EQ(p->GetAsInt64(1), 0);
  EXPECT_EQ(p->GetAsInt64(2), 1);

  auto u = ParseNpy(MakeNpy(Dict("|u1", "(2,)"), std::string("\0\7", 2)),
                    "u.npy");
  ASSERT_TRUE(u.ok());
  auto bad = NpyToLiteral(*u, Shape(PrimitiveType::kPred, {2}), "u.npy");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("element 1 is 7"));
}

TEST(NpyConvertTest, WrongShapeOrDtypeNamesWhatWasExpected) {
  auto a = ParseNpy(MakeNpy(Dict("<f4", "(2, 3)"), Payload<float>({1, 2, 3, 4, 5, 6})),
                    "x.npy");
  ASSERT_TRUE(a.ok());
  auto shape = NpyToLiteral(*a, Shape(PrimitiveType::kF32, {3, 2}), "x.npy");
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().message(),
            "x.npy: holds shape (2, 3) float32, expected f32[3,2] (numpy shape "
            "(3, 2), dtype float16, float32, float64 or bfloat16)");
  auto dtype = NpyToLiteral(*a, Shape(PrimitiveType::kS32, {2, 3}), "x.npy");
  ASSERT_FALSE(dtype.ok());
  EXPECT_THAT(std::string(dtype.status().message()),
              HasSubstr("holds float32 data, expected s32[2,3]"));
  EXPECT_THAT(std::string(dtype.status().message()),
              HasSubstr("any integer dtype"));
}

TEST(NpyWriteTest, MatchesNumpyLayoutAndRoundTrips) {
  hlo::Literal pair = hlo::Literal::FromVector<int32_t>(
      PrimitiveType::kS32, {2}, std::vector<int32_t>{1, 2});
  auto bytes = LiteralToNpy(pair);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, kNumpyInt32Pair);

  // bf16 is written as float32 with the exact bf16 values.
  hlo::Literal bf(Shape(PrimitiveType::kBF16, {2, 2}));
  const std::vector<double> vals = {1.0, -2.5, 0.0078125, 3.0e5};
  for (int i = 0; i < 4; ++i) bf.SetFromDouble(i, vals[i]);
  auto bf_bytes = LiteralToNpy(bf);
  ASSERT_TRUE(bf_bytes.ok());
  EXPECT_EQ(bf_bytes->size() % 64, 16u);  // 64-aligned header + 16 data bytes
  auto back = ParseNpy(*bf_bytes, "bf.npy");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype(), NpyDtype::kFloat32);
  EXPECT_EQ(back->shape(), (std::vector<int64_t>{2, 2}));
  auto f = NpyToLiteral(*back, Shape(PrimitiveType::kF32, {2, 2}), "bf.npy");
  ASSERT_TRUE(f.ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(f->GetAsDouble(i), bf.GetAsDouble(i)) << i;
  }

  // pred as bool, scalar shape "()".
  hlo::Literal pred(Shape::Scalar(PrimitiveType::kPred));
  pred.SetFromInt64(0, 1);
  auto pred_bytes = LiteralToNpy(pred);
  ASSERT_TRUE(pred_bytes.ok());
  EXPECT_THAT(*pred_bytes, HasSubstr("'descr': '|b1'"));
  EXPECT_THAT(*pred_bytes, HasSubstr("'shape': ()"));
  EXPECT_EQ(pred_bytes->back(), '\1');

  auto tuple = LiteralToNpy(hlo::Literal::Tuple({}));
  EXPECT_FALSE(tuple.ok());
}

TEST(NpyDtypesTest, EveryXlaIntegerAndFloatDtypeReadsAndWritesBack) {
  // float16 and ml_dtypes bfloat16 ('<V2') are copied bit for bit.
  const std::vector<uint16_t> f16 = {hlo::F32ToF16(1.5f), hlo::F32ToF16(-0.25f)};
  auto a = ParseNpy(MakeNpy(Dict("<f2", "(2,)"), Payload<uint16_t>(f16)), "h.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  auto h = NpyToLiteral(*a, Shape(PrimitiveType::kF16, {2}), "h.npy");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->GetAsDouble(0), 1.5);
  EXPECT_EQ(h->GetAsDouble(1), -0.25);
  const std::vector<uint16_t> bf = {hlo::F32ToBf16(3.0f), hlo::F32ToBf16(-1e30f)};
  auto b = ParseNpy(MakeNpy(Dict("<V2", "(2,)"), Payload<uint16_t>(bf)), "b.npy");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dtype(), NpyDtype::kBfloat16);
  auto bl = NpyToLiteral(*b, Shape(PrimitiveType::kBF16, {2}), "b.npy");
  ASSERT_TRUE(bl.ok()) << bl.status();
  EXPECT_EQ(bl->GetAsDouble(1), hlo::RoundToBf16(-1e30f));
  // Written back as bfloat16 on request, as float16 always.
  NpyWriteOptions raw;
  raw.bf16_as_float32 = false;
  auto bw = LiteralToNpy(*bl, raw);
  ASSERT_TRUE(bw.ok());
  EXPECT_THAT(*bw, HasSubstr("'descr': '<V2'"));
  EXPECT_EQ(bw->substr(bw->size() - 4), Payload<uint16_t>(bf));
  auto hw = LiteralToNpy(*h);
  ASSERT_TRUE(hw.ok());
  EXPECT_THAT(*hw, HasSubstr("'descr': '<f2'"));
  // Narrow and unsigned integers; values checked against the target range.
  auto i8 = ParseNpy(MakeNpy(Dict("|i1", "(3,)"), Payload<int8_t>({-128, 0, 127})), "i.npy");
  ASSERT_TRUE(i8.ok()) << i8.status();
  auto s16 = NpyToLiteral(*i8, Shape(PrimitiveType::kS16, {3}), "i.npy");
  ASSERT_TRUE(s16.ok()) << s16.status();
  EXPECT_EQ(s16->GetAsInt64(0), -128);
  EXPECT_FALSE(NpyToLiteral(*i8, Shape(PrimitiveType::kU8, {3}), "i.npy").ok());
  auto u64 = ParseNpy(MakeNpy(Dict("<u8", "(1,)"), Payload<uint64_t>({~uint64_t{0}})), "u.npy");
  ASSERT_TRUE(u64.ok());
  auto same = NpyToLiteral(*u64, Shape(PrimitiveType::kU64, {1}), "u.npy");
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->data<uint64_t>()[0], ~uint64_t{0});
  auto narrowed = NpyToLiteral(*u64, Shape(PrimitiveType::kS64, {1}), "u.npy");
  ASSERT_FALSE(narrowed.ok());
  EXPECT_THAT(std::string(narrowed.status().message()), HasSubstr("18446744073709551615"));
}

}  // namespace
}  // namespace tpuoff::tools
