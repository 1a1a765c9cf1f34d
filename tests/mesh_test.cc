// hlo/spmd/mesh: parsing mesh shapes, the row-major partition <-> coordinate
// mapping, replica groups of axis subsets, the tiled sharding of arrays
// split over several axes, the v6e chip order jax's create_device_mesh
// gives, and the collectives of a 2-D sharded kernel (their groups name the
// devices of their axis only).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/spmd/mesh.h"
#include "hlo/spmd/sharding_util.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_sharded.h"

namespace tpuoff::hlo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MeshTest, ParseShapes) {
  struct Row {
    std::string text;
    std::string shape;
    int64_t devices, axes;
  };
  for (const Row& r : {Row{"8", "8", 8, 1}, Row{"2x4", "2x4", 8, 2}, Row{"4x2", "4x2", 8, 2},
                       Row{"16x16", "16x16", 256, 2}, Row{"1", "1", 1, 1},
                       Row{"2x2x2", "2x2x2", 8, 3}, Row{"4096", "4096", 4096, 1}}) {
    absl::StatusOr<Mesh> m = ParseMeshShape(r.text);
    ASSERT_TRUE(m.ok()) << r.text << ": " << m.status();
    EXPECT_EQ(m->ShapeString(), r.shape);
    EXPECT_EQ(m->num_devices, r.devices) << r.text;
    EXPECT_EQ(m->num_axes(), r.axes) << r.text;
    EXPECT_TRUE(ValidateMesh(*m).ok()) << r.text;
  }
  for (const char* bad : {"", "0", "2x0", "x4", "2x", "2*4", "-2", "4097", "64x65", "2x 4",
                          "0x10"}) {
    absl::StatusOr<Mesh> m = ParseMeshShape(bad);
    EXPECT_FALSE(m.ok()) << "'" << bad << "'";
    if (!m.ok()) EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MeshTest, RowMajorCoordinates) {
  const Mesh m = Mesh::Grid({2, 4});
  EXPECT_THAT(m.Coordinates(0), ElementsAre(0, 0));
  EXPECT_THAT(m.Coordinates(5), ElementsAre(1, 1));
  EXPECT_THAT(m.Coordinates(7), ElementsAre(1, 3));
  for (int64_t d = 0; d < 8; ++d) {
    EXPECT_EQ(m.Device(m.Coordinates(d)), d);
    EXPECT_EQ(m.IndexAlong(d, {0}), d / 4);
    EXPECT_EQ(m.IndexAlong(d, {1}), d % 4);
    EXPECT_EQ(m.IndexAlong(d, {0, 1}), d);
    EXPECT_EQ(m.IndexAlong(d, {1, 0}), (d % 4) * 2 + d / 4);  // first listed major
    EXPECT_EQ(m.IndexAlong(d, {}), 0);
  }
  EXPECT_EQ(m.Size({0}), 2);
  EXPECT_EQ(m.Size({1}), 4);
  EXPECT_EQ(m.Size({}), 1);
}

TEST(MeshTest, ReplicaGroupsOfAxes) {
  const Mesh m = Mesh::Grid({2, 4});
  using G = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(m.Groups({1}).groups, (G{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(m.Groups({0}).groups, (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.Groups({0, 1}).groups, (G{{0, 1, 2, 3, 4, 5, 6, 7}}));
  const Mesh pod = Mesh::Grid({16, 16});
  const ReplicaGroups rows = pod.Groups({1});
  ASSERT_EQ(rows.groups.size(), 16u);
  EXPECT_EQ(rows.groups[3].front(), 48);
  EXPECT_EQ(rows.groups[3].back(), 63);
  const ReplicaGroups cols = pod.Groups({0});
  ASSERT_EQ(cols.groups.size(), 16u);
  EXPECT_EQ(cols.groups[2][1], 18);
}

TEST(MeshTest, ShardingOfArraysSplitOverAxes) {
  const Mesh m = Mesh::Grid({2, 4});
  // [B,T,V] with B over axis 0 and V over axis 1: tiles [2,1,4], devices in
  // partition order.
  HloSharding s = MeshSharding(m, 3, {{0, {0}}, {2, {1}}});
  EXPECT_THAT(s.tile_assignment_dims, ElementsAre(2, 1, 4));
  EXPECT_THAT(s.devices, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_FALSE(s.replicate_on_last_tile_dim);
  // [B,T] with B over axis 0 only: replicated over axis 1.
  s = MeshSharding(m, 2, {{0, {0}}});
  EXPECT_THAT(s.tile_assignment_dims, ElementsAre(2, 1, 4));
  EXPECT_TRUE(s.replicate_on_last_tile_dim);
  // V over axis 0 and B over axis 1: the transposed device order.
  s = MeshSharding(m, 3, {{0, {1}}, {2, {0}}});
  EXPECT_THAT(s.tile_assignment_dims, ElementsAre(4, 1, 2));
  EXPECT_THAT(s.devices, ElementsAre(0, 4, 1, 5, 2, 6, 3, 7));
  for (int64_t d = 0; d < 8; ++d) {
    absl::StatusOr<std::vector<int64_t>> tile = TileIndexOfDevice(s, 3, d);
    ASSERT_TRUE(tile.ok()) << tile.status();
    EXPECT_THAT(*tile, ElementsAre(d % 4, 0, d / 4)) << d;
  }
  EXPECT_EQ(MeshSharding(m, 2, {}).type, HloSharding::Type::kReplicated);
}

// jax/_src/mesh_utils.py on v6e: the tray ring for 8 chips whatever the
// mesh shape; the 4x4 ring when one axis spans 16 chips; the torus mapping
// otherwise (identity for 16x16, x major for a 1-D 256).
TEST(MeshTest, V6eChipOrderAsJaxLaysItOut) {
  const std::vector<int64_t> ring8 = {0, 1, 2, 3, 7, 6, 5, 4};
  EXPECT_EQ(V6eChipOrder(*ParseMeshShape("8")), ring8);
  EXPECT_EQ(V6eChipOrder(*ParseMeshShape("2x4")), ring8);
  EXPECT_EQ(V6eChipOrder(*ParseMeshShape("4x2")), ring8);
  EXPECT_EQ(DescribeChipOrder(*ParseMeshShape("2x4")), "0:0 1:1 2:2 3:3 4:7 5:6 6:5 7:4");
  EXPECT_EQ(V6eChipOrder(*ParseMeshShape("4")), (std::vector<int64_t>{0, 1, 3, 2}));
  const std::vector<int64_t> ring16 = {0, 1, 2, 3, 7, 6, 5, 9, 10, 11, 15, 14, 13, 12, 8, 4};
  EXPECT_EQ(V6eChipOrder(*ParseMeshShape("16")), ring16);
  EXPECT_EQ(V6eChipOrder(*ParseMeshShape("1x16")), ring16);
  std::vector<int64_t> iota16(16);
  for (int64_t i = 0; i < 16; ++i) iota16[i] = i;
  EXPECT_EQ(V6eChipOrder(*ParseMeshShape("4x4")), iota16);
  const std::vector<int64_t> pod = V6eChipOrder(*ParseMeshShape("16x16"));
  for (int64_t p = 0; p < 256; ++p) ASSERT_EQ(pod[p], p) << p;
  const std::vector<int64_t> flat = V6eChipOrder(*ParseMeshShape("256"));
  for (int64_t p = 0; p < 256; ++p) ASSERT_EQ(flat[p], 16 * (p % 16) + p / 16) << p;
  // No v6e slice of 6 chips: sequential.
  EXPECT_EQ(V6eChipOrder(*ParseMeshShape("2x3")), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

// On 2x4 batch×vocab the vocab merge all-reduces over {0..3},{4..7} and the
// token sums over {0,4},{1,5},...; nothing spans the whole mesh.
TEST(MeshTest, CollectivesCarryTheGroupsOfTheirAxis) {
  kernels::GrpoConfig c;
  c.batch = 4;
  c.seq = 6;
  c.vocab = 37;
  c.block_size = 8;
  kernels::ShardingSpec s;
  s.mesh = Mesh::Grid({2, 4});
  s.axis_kinds = {kernels::ShardKind::kBatch, kernels::ShardKind::kVocab};
  auto m = kernels::BuildShardedKernel(
      {kernels::KernelKind::kGrpoTiled, kernels::KernelMode::kFwdBwd, c}, s);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->num_partitions(), 8);
  int vocab_groups = 0, token_groups = 0;
  for (const auto& comp : (*m)->computations()) {
    for (const auto& instr : comp->instructions()) {
      if (instr->opcode() != HloOpcode::kAllReduce) continue;
      const auto& g = instr->attrs().replica_groups.groups;
      ASSERT_FALSE(g.empty()) << instr->name();
      if (g.size() == 2 && g[0] == std::vector<int64_t>{0, 1, 2, 3}) {
        ++vocab_groups;
      } else if (g.size() == 4 && g[0] == std::vector<int64_t>{0, 4}) {
        ++token_groups;
      } else {
        ADD_FAILURE() << instr->name() << " has groups of size " << g[0].size();
      }
    }
  }
  EXPECT_EQ(vocab_groups, 2);  // pmax and the stacked psum of the statistics
  EXPECT_EQ(token_groups, 2);  // Σ mask and the loss
  // Per-device logits block: B 4/2, V ceil(37/4).
  EXPECT_EQ((*m)->entry()->parameter(0)->shape().dimensions(),
            (std::vector<int64_t>{2, 6, 10}));
}

}  // namespace
}  // namespace tpuoff::hlo
