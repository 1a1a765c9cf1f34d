#include "hlo/ir/mesh_replica_groups.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpuoff::hlo {
namespace {

// The mesh split row-major into `factors` (each mesh axis one or more
// consecutive factors): one group per index over the factors not in
// `grouped`, running over `grouped` (in that order). A position's device is
// ids[position], or the position without a list.
std::vector<std::vector<int64_t>> WalkGroups(const std::vector<int64_t>& factors,
                                             const std::vector<int>& grouped,
                                             const std::vector<int64_t>& ids) {
  const int rank = static_cast<int>(factors.size());
  std::vector<int64_t> strides(rank, 1);
  for (int i = rank - 2; i >= 0; --i) strides[i] = strides[i + 1] * factors[i + 1];
  std::vector<int> others;
  for (int i = 0; i < rank; ++i) {
    if (std::find(grouped.begin(), grouped.end(), i) == grouped.end()) others.push_back(i);
  }
  // Visits every index over `axes` (row-major) with its position offset.
  auto walk = [&](const std::vector<int>& axes, auto&& visit) {
    std::vector<int64_t> idx(axes.size(), 0);
    while (true) {
      int64_t pos = 0;
      for (size_t i = 0; i < axes.size(); ++i) pos += idx[i] * strides[axes[i]];
      visit(pos);
      int k = static_cast<int>(axes.size()) - 1;
      for (; k >= 0; --k) {
        if (++idx[k] < factors[axes[k]]) break;
        idx[k] = 0;
      }
      if (k < 0) return;
    }
  };
  std::vector<std::vector<int64_t>> groups;
  walk(others, [&](int64_t base) {
    std::vector<int64_t> group;
    walk(grouped, [&](int64_t off) {
      group.push_back(ids.empty() ? base + off : ids[base + off]);
    });
    groups.push_back(std::move(group));
  });
  return groups;
}

std::string Quoted(const std::string& name) { return absl::StrCat("'", name, "'"); }

}  // namespace

std::vector<std::vector<int64_t>> MeshReplicaGroups(const std::vector<int64_t>& sizes,
                                                    const std::vector<int>& selected) {
  return WalkGroups(sizes, selected, {});
}

absl::StatusOr<std::vector<std::vector<int64_t>>> MeshAxesGroups(const ReplicaGroups& g) {
  const int rank = static_cast<int>(g.mesh_axes.size());
  if (rank == 0) return absl::InvalidArgumentError("a mesh needs at least one axis");
  int64_t total = 1;
  for (const auto& [name, size] : g.mesh_axes) {
    if (size < 1) return absl::InvalidArgumentError(absl::StrCat("mesh axis ", Quoted(name), " has size ", size));
    total *= size;  // the readers bound the product before calling
  }
  if (!g.mesh_device_ids.empty()) {
    if (static_cast<int64_t>(g.mesh_device_ids.size()) != total) {
      return absl::InvalidArgumentError(absl::StrCat("device_ids lists ", g.mesh_device_ids.size(),
                                                     " devices for a mesh of ", total));
    }
    std::vector<int64_t> sorted = g.mesh_device_ids;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < total; ++i) {
      if (sorted[i] != i) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device_ids must be a permutation of 0..", total - 1));
      }
    }
  }
  // The named parts of each mesh axis.
  std::vector<std::vector<int>> on_axis(rank);
  for (size_t r = 0; r < g.mesh_group_axes.size(); ++r) {
    const MeshAxisRef& ref = g.mesh_group_axes[r];
    int found = -1;
    for (int a = 0; a < rank; ++a) {
      if (g.mesh_axes[a].first == ref.name) found = a;
    }
    if (found < 0) {
      return absl::InvalidArgumentError(absl::StrCat(Quoted(ref.name), " is not a mesh axis"));
    }
    if (ref.pre_size > 0) {
      const int64_t n = g.mesh_axes[found].second;
      if (ref.size <= 1 || ref.size >= n || ref.pre_size > n / ref.size ||
          n % (ref.pre_size * ref.size) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sub-axis ", Quoted(ref.name), ":(", ref.pre_size, ")", ref.size,
            " does not fit the axis of size ", n,
            " (needs pre_size >= 1, 1 < size < the axis, pre_size * size dividing it)"));
      }
    }
    on_axis[found].push_back(static_cast<int>(r));
  }
  // Each axis split into factors: a named part is one factor, with the
  // parts before, between and after the named ones as factors of their own.
  std::vector<int64_t> factors;
  std::vector<int> grouped(g.mesh_group_axes.size());
  for (int a = 0; a < rank; ++a) {
    const int64_t n = g.mesh_axes[a].second;
    std::vector<int> refs = on_axis[a];
    if (refs.empty()) {
      factors.push_back(n);
      continue;
    }
    auto pre = [&](int r) { return g.mesh_group_axes[r].pre_size; };
    for (int r : refs) {
      if (pre(r) == 0 && refs.size() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mesh axis ", Quoted(g.mesh_axes[a].first), " is named more than once"));
      }
    }
    if (pre(refs[0]) == 0) {
      grouped[refs[0]] = static_cast<int>(factors.size());
      factors.push_back(n);
      continue;
    }
    std::sort(refs.begin(), refs.end(), [&](int x, int y) { return pre(x) < pre(y); });
    int64_t prefix = 1;
    for (int r : refs) {
      if (pre(r) < prefix || pre(r) % prefix != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sub-axes of ", Quoted(g.mesh_axes[a].first), " overlap"));
      }
      if (pre(r) > prefix) factors.push_back(pre(r) / prefix);
      grouped[r] = static_cast<int>(factors.size());
      factors.push_back(g.mesh_group_axes[r].size);
      prefix = pre(r) * g.mesh_group_axes[r].size;
    }
    if (prefix != n) factors.push_back(n / prefix);
  }
  return WalkGroups(factors, grouped, g.mesh_device_ids);
}

}  // namespace tpuoff::hlo
