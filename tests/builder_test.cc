#include "hlo/ir/builder.h"

#include "gtest/gtest.h"
#include "hlo/ir/verifier.h"

namespace tpuoff::hlo {
namespace {

TEST(BuilderTest, SoftmaxRowSums) {
  XlaBuilder b("softmax");
  XlaOp x = b.Parameter(0, Shape(PrimitiveType::kF32, {4, 16}), "x");
  XlaOp mx = b.Reduce(x, b.ConstantF32(-INFINITY), HloOpcode::kMaximum, {1});
  XlaOp e = Exp(Sub(x, b.BroadcastInDim(mx, {4, 16}, {0})));
  XlaOp s = b.Reduce(e, b.ConstantF32(0), HloOpcode::kAdd, {1});
  auto module = b.Build(b.Tuple({mx, s}));
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->entry()->root()->shape().ToString(), "(f32[4], f32[4])");
  EXPECT_TRUE(VerifyModule(**module).ok());
}

TEST(BuilderTest, FirstErrorIsReported) {
  XlaBuilder b("bad");
  XlaOp x = b.Parameter(0, Shape(PrimitiveType::kF32, {4}), "x");
  XlaOp y = b.Parameter(1, Shape(PrimitiveType::kF32, {5}), "y");
  XlaOp z = Add(x, y);  // mismatched dims
  EXPECT_FALSE(z.valid());
  auto module = b.Build(Exp(z));
  ASSERT_FALSE(module.ok());
  EXPECT_NE(module.status().message().find("add"), std::string::npos)
      << module.status();
}

}  // namespace
}  // namespace tpuoff::hlo
