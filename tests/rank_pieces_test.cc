// What a rank of a distributed run reads and combines on its own: a device's
// piece of a global .npy read by offset (ReadNpyBox at PieceBoxOf) equals
// the piece SplitGlobal cuts from the whole array, uneven and 2-D tilings,
// replicated and converted dtypes included; and collectives computed for
// some members only (PerformCollectiveLeaf) give those members' bits of the
// all-members result.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hlo/spmd/sharding_util.h"
#include "runtime/device/collectives.h"
#include "runtime/device/sharding_io.h"
#include "tools/io/npy.h"

namespace tpuoff {
namespace {

using hlo::HloSharding;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/rank_pieces_", name, ".npy");
}

void WriteNpy(const std::string& path, const Literal& lit, bool bf16_as_f32) {
  tools::NpyWriteOptions o;
  o.bf16_as_float32 = bf16_as_f32;
  auto bytes = tools::LiteralToNpy(lit, o);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::ofstream(path, std::ios::binary) << *bytes;
}

TEST(RankPiecesTest, BoxReadEqualsSplitPiece) {
  const std::vector<int64_t> dims = {3, 5, 11};
  std::vector<float> v(3 * 5 * 11);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i) - 7.0f;
  const Literal f32 = Literal::FromVector<float>(PrimitiveType::kF32, dims, v);
  const std::string f32_path = TempPath("f32");
  WriteNpy(f32_path, f32, true);
  const std::vector<HloSharding> shardings = {
      hlo::SplitSharding(3, 2, 4),              // uneven: 11 over 4 (last padded)
      hlo::SplitSharding(3, 0, 2),              // rows over 2 (uneven 3)
      HloSharding::IotaTiled({1, 2, 2}),        // 2-D
      HloSharding::Replicated()};
  for (const HloSharding& s : shardings) {
    for (PrimitiveType type : {PrimitiveType::kF32, PrimitiveType::kBF16}) {
      // The whole array as the single process reads it (bf16 converted).
      auto global = tools::ReadNpyAsLiteral(f32_path, Shape(type, dims));
      ASSERT_TRUE(global.ok()) << global.status();
      auto local = hlo::ShardShape(global->shape(), s);
      ASSERT_TRUE(local.ok()) << local.status();
      int64_t n = 1;
      for (int64_t t : s.tile_assignment_dims) n *= t;
      if (s.tile_assignment_dims.empty()) n = 4;  // replicated: any count
      auto pieces = runtime::SplitGlobal(*global, s, *local, n);
      ASSERT_TRUE(pieces.ok()) << pieces.status();
      for (int64_t d = 0; d < n; ++d) {
        auto box = runtime::PieceBoxOf(s, global->shape(), *local, d);
        ASSERT_TRUE(box.ok()) << box.status();
        auto read = tools::ReadNpyBox(f32_path, global->shape(), box->origin, box->extent,
                                      box->dims, *local);
        ASSERT_TRUE(read.ok()) << read.status();
        ASSERT_EQ(read->raw_size(), (*pieces)[d].raw_size());
        EXPECT_EQ(std::memcmp(read->raw(), (*pieces)[d].raw(), read->raw_size()), 0)
            << "device " << d << " type " << hlo::PrimitiveTypeName(type) << " tiles "
            << s.tile_assignment_dims.size();
      }
      // A part of the split: the last device(s) only, as a rank holds them.
      auto part = runtime::SplitGlobal(*global, s, *local, n, n / 2, n - n / 2);
      ASSERT_TRUE(part.ok()) << part.status();
      ASSERT_EQ(static_cast<int64_t>(part->size()), n - n / 2);
      EXPECT_TRUE(part->back() == pieces->back());
    }
  }
  // A file of another shape is refused, naming it.
  auto wrong = tools::ReadNpyBox(f32_path, Shape(PrimitiveType::kF32, {3, 5, 12}), {0, 0, 0},
                                 {1, 1, 1}, {1, 1, 1}, Shape(PrimitiveType::kF32, {1, 1, 1}));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find(f32_path), std::string::npos);
  std::remove(f32_path.c_str());
}

// Every member's output computed with all outputs, or one member at a time
// (the others nullptr, as on a rank that holds only that member): equal bits.
TEST(RankPiecesTest, PartialOutputsMatchFullCombine) {
  const std::vector<int64_t> group = {4, 1, 6};
  const size_t g = group.size();
  const int64_t count = 37;
  std::vector<std::vector<float>> ins(g, std::vector<float>(g * count));
  for (size_t m = 0; m < g; ++m) {
    for (size_t i = 0; i < ins[m].size(); ++i) ins[m][i] = 1.0f / (3.0f + m + 0.37f * i);
  }
  using Kind = runtime::CollectiveOp::Kind;
  for (Kind kind : {Kind::kAllReduce, Kind::kReduceScatter, Kind::kAllGather, Kind::kAllToAll,
                    Kind::kCollectivePermute}) {
    runtime::CollectiveOp op;
    op.kind = kind;
    op.type = PrimitiveType::kF32;
    const bool bytes = kind == Kind::kAllGather || kind == Kind::kAllToAll ||
                       kind == Kind::kCollectivePermute;
    op.count = bytes ? count * 4 : count;
    op.pairs = {{4, 1}, {1, 6}};  // device 4 gets zeros
    const int64_t out_bytes = kind == Kind::kAllGather || kind == Kind::kAllToAll
                                  ? g * count * 4
                                  : count * 4;
    std::vector<const void*> in_ptrs;
    for (auto& v : ins) in_ptrs.push_back(v.data());
    std::vector<std::string> full(g, std::string(out_bytes, '\x55'));
    std::vector<void*> outs;
    for (auto& o : full) outs.push_back(o.data());
    runtime::PerformCollectiveLeaf(op, group, in_ptrs, outs);
    for (size_t m = 0; m < g; ++m) {
      std::string one(out_bytes, '\x55');
      std::vector<void*> only(g, nullptr);
      only[m] = one.data();
      runtime::PerformCollectiveLeaf(op, group, in_ptrs, only);
      EXPECT_EQ(one, full[m]) << "kind " << static_cast<int>(kind) << " member " << m;
    }
  }
}

}  // namespace
}  // namespace tpuoff
