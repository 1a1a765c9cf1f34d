#include "hlo/spmd/mesh.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hlo/ir/mesh_replica_groups.h"

namespace tpuoff::hlo {

Mesh Mesh::Grid(std::vector<int64_t> sizes, std::vector<std::string> names) {
  Mesh m;
  m.num_devices = 1;
  for (int64_t s : sizes) m.num_devices *= s;
  m.axis_sizes = std::move(sizes);
  m.axis_names = std::move(names);
  if (!m.axis_names.empty()) m.axis_name = m.axis_names[0];
  return m;
}

int64_t Mesh::num_axes() const {
  return axis_sizes.empty() ? 1 : static_cast<int64_t>(axis_sizes.size());
}

int64_t Mesh::axis_size(int64_t axis) const {
  return axis_sizes.empty() ? num_devices : axis_sizes[axis];
}

std::string Mesh::name(int64_t axis) const {
  if (axis < static_cast<int64_t>(axis_names.size())) return axis_names[axis];
  if (axis_sizes.empty()) return axis_name;
  static const char* kNames[] = {"x", "y", "z"};
  return axis < 3 ? kNames[axis] : absl::StrCat("a", axis);
}

std::string Mesh::ShapeString() const {
  if (axis_sizes.empty()) return absl::StrCat(num_devices);
  return absl::StrJoin(axis_sizes, "x");
}

AxisSet Mesh::AllAxes() const {
  AxisSet all(num_axes());
  std::iota(all.begin(), all.end(), 0);
  return all;
}

int64_t Mesh::Size(const AxisSet& axes) const {
  int64_t n = 1;
  for (int64_t a : axes) n *= axis_size(a);
  return n;
}

std::vector<int64_t> Mesh::Coordinates(int64_t device) const {
  std::vector<int64_t> c(num_axes());
  for (int64_t a = num_axes() - 1; a >= 0; --a) {
    c[a] = device % axis_size(a);
    device /= axis_size(a);
  }
  return c;
}

int64_t Mesh::Device(const std::vector<int64_t>& coords) const {
  int64_t d = 0;
  for (int64_t a = 0; a < num_axes(); ++a) d = d * axis_size(a) + coords[a];
  return d;
}

int64_t Mesh::IndexAlong(int64_t device, const AxisSet& axes) const {
  const std::vector<int64_t> c = Coordinates(device);
  int64_t index = 0;
  for (int64_t a : axes) index = index * axis_size(a) + c[a];
  return index;
}

ReplicaGroups Mesh::Groups(const AxisSet& axes) const {
  std::vector<int64_t> sizes;
  for (int64_t a = 0; a < num_axes(); ++a) sizes.push_back(axis_size(a));
  std::vector<int> selected(axes.begin(), axes.end());
  ReplicaGroups g;
  g.groups = MeshReplicaGroups(sizes, selected);
  return g;
}

absl::Status ValidateMesh(const Mesh& mesh) {
  if (mesh.num_devices < 1 || mesh.num_devices > kMaxMeshDevices) {
    return absl::InvalidArgumentError(absl::StrCat("mesh: the number of devices must be in [1, ",
                                                   kMaxMeshDevices, "], got ",
                                                   mesh.num_devices));
  }
  if (mesh.axis_sizes.empty()) return absl::OkStatus();
  int64_t product = 1;
  for (int64_t s : mesh.axis_sizes) {
    if (s < 1 || s > kMaxMeshDevices) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh ", mesh.ShapeString(), ": every axis size must be >= 1"));
    }
    product *= s;
    if (product > kMaxMeshDevices) break;
  }
  if (product != mesh.num_devices) {
    return absl::InvalidArgumentError(absl::StrCat("mesh ", mesh.ShapeString(), " has ",
                                                   product, " devices, not ",
                                                   mesh.num_devices));
  }
  if (!mesh.axis_names.empty() && mesh.axis_names.size() != mesh.axis_sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("mesh ", mesh.ShapeString(), ": ",
                                                   mesh.axis_names.size(), " axis names for ",
                                                   mesh.axis_sizes.size(), " axes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Mesh> ParseMeshShape(absl::string_view text) {
  std::vector<int64_t> sizes;
  int64_t product = 1;
  for (absl::string_view part : absl::StrSplit(text, 'x')) {
    int64_t v = 0;
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char ch) {
      return ch >= '0' && ch <= '9';
    });
    if (!digits || !absl::SimpleAtoi(part, &v) || v < 1 || v > kMaxMeshDevices) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh '", text, "': expected N or AxB (sizes in [1, ", kMaxMeshDevices, "])"));
    }
    product *= v;
    if (product > kMaxMeshDevices) {
      return absl::InvalidArgumentError(absl::StrCat("mesh '", text, "' has more than ",
                                                     kMaxMeshDevices, " devices"));
    }
    sizes.push_back(v);
  }
  if (sizes.size() == 1) {
    Mesh m;
    m.num_devices = sizes[0];
    return m;
  }
  return Mesh::Grid(std::move(sizes));
}

absl::Status CheckAxisSet(const Mesh& mesh, const AxisSet& axes, absl::string_view what) {
  std::vector<bool> seen(mesh.num_axes(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= mesh.num_axes()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": mesh ", mesh.ShapeString(),
                                                     " has no axis ", a));
    }
    if (seen[a]) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": mesh axis '", mesh.name(a), "' used twice"));
    }
    seen[a] = true;
  }
  return absl::OkStatus();
}

HloSharding MeshSharding(const Mesh& mesh, int64_t rank,
                         const std::vector<std::pair<int64_t, AxisSet>>& dim_axes) {
  std::vector<int64_t> tiles(rank, 1);
  std::vector<AxisSet> per_dim(rank);
  std::vector<bool> used(mesh.num_axes(), false);
  for (const auto& [dim, axes] : dim_axes) {
    for (int64_t a : axes) {
      per_dim[dim].push_back(a);
      used[a] = true;
      tiles[dim] *= mesh.axis_size(a);
    }
  }
  int64_t split = 1;
  for (int64_t t : tiles) split *= t;
  if (split <= 1) return HloSharding::Replicated();
  std::vector<int64_t> perm;
  for (const AxisSet& axes : per_dim) perm.insert(perm.end(), axes.begin(), axes.end());
  int64_t replicas = 1;
  for (int64_t a = 0; a < mesh.num_axes(); ++a) {
    if (!used[a]) {
      perm.push_back(a);
      replicas *= mesh.axis_size(a);
    }
  }
  HloSharding s;
  s.type = HloSharding::Type::kTiled;
  s.tile_assignment_dims = tiles;
  if (replicas > 1) {
    s.tile_assignment_dims.push_back(replicas);
    s.replicate_on_last_tile_dim = true;
  }
  s.iota_form = true;
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) {
    s.iota_reshape_dims = {mesh.num_devices};
  } else {
    for (int64_t a = 0; a < mesh.num_axes(); ++a) s.iota_reshape_dims.push_back(mesh.axis_size(a));
    s.iota_transpose_perm = perm;
  }
  s.devices = ExpandIotaDevices(s.iota_reshape_dims, s.iota_transpose_perm);
  return s;
}

namespace {

// Physical (x, y, z) extent of the v6e slices whose chip numbering we know:
// jax numbers chips x minor (sorted by reversed coordinates).
bool V6ePhysicalShape(int64_t chips, std::vector<int64_t>* xyz) {
  switch (chips) {
    case 1: *xyz = {1, 1, 1}; return true;
    case 4: *xyz = {2, 2, 1}; return true;
    case 8: *xyz = {4, 2, 1}; return true;
    case 16: *xyz = {4, 4, 1}; return true;
    case 64: *xyz = {8, 8, 1}; return true;
    case 256: *xyz = {16, 16, 1}; return true;
    default: return false;
  }
}

// jax's _create_device_mesh_for_nd_torus without splitting physical axes:
// logical axes from the last (most network-intensive) to the first each
// take the first subset (most axes first, then combinations order) of the
// unassigned physical axes whose sizes multiply to the axis size. Returns
// false when some axis of size > 1 finds none (jax raises there).
bool TorusOrder(const Mesh& mesh, const std::vector<int64_t>& physical,
                std::vector<int64_t>* order) {
  const int64_t np = static_cast<int64_t>(physical.size());
  std::vector<int64_t> free = physical;
  std::vector<std::vector<int64_t>> assigned(mesh.num_axes());
  for (int64_t a = mesh.num_axes() - 1; a >= 0; --a) {
    const int64_t size = mesh.axis_size(a);
    bool found = false;
    for (int64_t k = np; k >= 1 && !found; --k) {
      // Subsets of k indices in lexicographic order (itertools.combinations).
      std::vector<int64_t> idx(k);
      std::iota(idx.begin(), idx.end(), 0);
      while (true) {
        int64_t product = 1;
        for (int64_t i : idx) product *= free[i];
        if (product == size) {
          assigned[a] = idx;
          for (int64_t i : idx) free[i] = 0;
          found = true;
          break;
        }
        int64_t j = k - 1;
        while (j >= 0 && idx[j] == np - k + j) --j;
        if (j < 0) break;
        ++idx[j];
        for (int64_t m = j + 1; m < k; ++m) idx[m] = idx[m - 1] + 1;
      }
    }
    if (!found && size > 1) return false;
  }
  std::vector<int64_t> transpose;
  for (const auto& axes : assigned) transpose.insert(transpose.end(), axes.begin(), axes.end());
  std::vector<bool> used(np, false);
  for (int64_t t : transpose) used[t] = true;
  for (int64_t t = 0; t < np; ++t) {
    if (!used[t]) transpose.push_back(t);  // size-1 axes nobody took
  }
  // Position p, read row-major over the transposed physical dims, is the
  // chip at those (x, y, z); its jax id is x + X*(y + Y*z).
  order->assign(mesh.num_devices, 0);
  for (int64_t p = 0; p < mesh.num_devices; ++p) {
    std::vector<int64_t> coord(np, 0);
    int64_t rest = p;
    for (int64_t i = np - 1; i >= 0; --i) {
      coord[transpose[i]] = rest % physical[transpose[i]];
      rest /= physical[transpose[i]];
    }
    int64_t id = 0;
    for (int64_t i = np - 1; i >= 0; --i) id = id * physical[i] + coord[i];
    (*order)[p] = id;
  }
  return true;
}

}  // namespace

std::vector<int64_t> V6eChipOrder(const Mesh& mesh) {
  const int64_t n = mesh.num_devices;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  int64_t largest = 0;
  for (int64_t a = 0; a < mesh.num_axes(); ++a) largest = std::max(largest, mesh.axis_size(a));
  // jax/_src/mesh_utils.py, _v5e_create_device_mesh (the handler of both
  // "TPU v5 lite" and "TPU v6 lite"): ring orders of a 2x2 and of a tray of
  // 8 whatever the mesh shape, and of a 4x4 when one axis spans it.
  if (n == 4) return {0, 1, 3, 2};
  if (n == 8) return {0, 1, 2, 3, 7, 6, 5, 4};
  if (n == 16 && largest == 16) {
    return {0, 1, 2, 3, 7, 6, 5, 9, 10, 11, 15, 14, 13, 12, 8, 4};
  }
  // Otherwise create_device_mesh maps the mesh onto the physical torus.
  std::vector<int64_t> physical;
  if (V6ePhysicalShape(n, &physical) && TorusOrder(mesh, physical, &order)) return order;
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::string DescribeChipOrder(const Mesh& mesh) {
  const std::vector<int64_t> order = V6eChipOrder(mesh);
  std::vector<std::string> parts;
  for (size_t i = 0; i < order.size(); ++i) parts.push_back(absl::StrCat(i, ":", order[i]));
  return absl::StrJoin(parts, " ");
}

}  // namespace tpuoff::hlo
