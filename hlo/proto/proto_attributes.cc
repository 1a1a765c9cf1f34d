// OpSharding, replica groups, metadata, frontend attributes and precision
// conversions (see proto_internal.h).
#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/mesh_replica_groups.h"
#include "hlo/proto/proto_internal.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo::proto_internal {
namespace {

bool IsIdentity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Validates an iota (reshape dims, transpose perm) pair and returns the
// product of the reshape dims. An empty perm means identity.
absl::StatusOr<int64_t> CheckIota(const std::vector<int64_t>& reshape,
                                  const std::vector<int64_t>& perm,
                                  absl::string_view where) {
  if (static_cast<int64_t>(reshape.size()) > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": iota_reshape_dims has too many entries"));
  }
  int64_t total = 1;
  for (int64_t d : reshape) {
    if (d < 1 || d > kMaxDevices || total > kMaxDevices / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": iota_reshape_dims [", absl::StrJoin(reshape, ","),
          "] must be positive with at most ", kMaxDevices, " devices"));
    }
    total *= d;
  }
  if (!perm.empty() && !IsPermutation(perm, static_cast<int64_t>(reshape.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": iota_transpose_perm [", absl::StrJoin(perm, ","),
        "] is not a permutation of the ", reshape.size(), " reshape dims"));
  }
  return total;
}

std::vector<int64_t> IdentityPerm(size_t n) {
  std::vector<int64_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = static_cast<int64_t>(i);
  return perm;
}

}  // namespace

// ---- Sharding ----------------------------------------------------------------

void ShardingToProto(const HloSharding& s, xla::OpSharding* proto) {
  switch (s.type) {
    case HloSharding::Type::kReplicated:
      proto->set_type(xla::OpSharding::REPLICATED);
      break;
    case HloSharding::Type::kManual:
      proto->set_type(xla::OpSharding::MANUAL);
      break;
    case HloSharding::Type::kUnknown:
      proto->set_type(xla::OpSharding::UNKNOWN);
      break;
    case HloSharding::Type::kMaximal:
      proto->set_type(xla::OpSharding::MAXIMAL);
      proto->add_tile_assignment_dimensions(1);
      for (int64_t d : s.devices) proto->add_tile_assignment_devices(d);
      break;
    case HloSharding::Type::kTuple:
      proto->set_type(xla::OpSharding::TUPLE);
      for (const HloSharding& t : s.tuple_shardings) {
        ShardingToProto(t, proto->add_tuple_shardings());
      }
      break;
    case HloSharding::Type::kTiled:
      proto->set_type(xla::OpSharding::OTHER);
      for (int64_t d : s.tile_assignment_dims) proto->add_tile_assignment_dimensions(d);
      if (s.iota_form) {
        // XLA writes iota tile assignments in compact form only, with an
        // explicit (possibly identity) permutation.
        for (int64_t d : s.iota_reshape_dims) proto->add_iota_reshape_dims(d);
        const std::vector<int64_t> perm = s.iota_transpose_perm.empty()
                                              ? IdentityPerm(s.iota_reshape_dims.size())
                                              : s.iota_transpose_perm;
        for (int64_t p : perm) proto->add_iota_transpose_perm(static_cast<int32_t>(p));
      } else {
        for (int64_t d : s.devices) proto->add_tile_assignment_devices(d);
      }
      proto->set_replicate_on_last_tile_dim(s.replicate_on_last_tile_dim);
      for (int t : s.last_tile_dims) {
        proto->add_last_tile_dims(static_cast<xla::OpSharding::Type>(t));
      }
      break;
  }
}

absl::StatusOr<HloSharding> ShardingFromProto(const xla::OpSharding& proto,
                                              absl::string_view where) {
  HloSharding s;
  switch (proto.type()) {
    case xla::OpSharding::REPLICATED:
      return HloSharding::Replicated();
    case xla::OpSharding::MANUAL:
      return HloSharding::Manual();
    case xla::OpSharding::UNKNOWN:
      s.type = HloSharding::Type::kUnknown;
      return s;
    case xla::OpSharding::MAXIMAL:
      if (proto.tile_assignment_devices_size() != 1 ||
          proto.tile_assignment_devices(0) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": MAXIMAL sharding needs exactly one non-negative device in "
                   "tile_assignment_devices"));
      }
      s.type = HloSharding::Type::kMaximal;
      s.tile_assignment_dims = {1};
      s.devices = {proto.tile_assignment_devices(0)};
      return s;
    case xla::OpSharding::TUPLE:
      s.type = HloSharding::Type::kTuple;
      for (int i = 0; i < proto.tuple_shardings_size(); ++i) {
        ASSIGN_OR_RETURN(HloSharding t,
                         ShardingFromProto(proto.tuple_shardings(i),
                                           absl::StrCat(where, ".tuple_shardings[", i, "]")));
        s.tuple_shardings.push_back(std::move(t));
      }
      return s;
    case xla::OpSharding::OTHER:
      break;
    default:
      return absl::UnimplementedError(absl::StrCat(
          where, ": sharding type ", static_cast<int>(proto.type()), " is not supported"));
  }
  // OTHER: a tiled sharding.
  s.type = HloSharding::Type::kTiled;
  s.tile_assignment_dims.assign(proto.tile_assignment_dimensions().begin(),
                                proto.tile_assignment_dimensions().end());
  if (s.tile_assignment_dims.empty() ||
      static_cast<int64_t>(s.tile_assignment_dims.size()) > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": tiled sharding needs 1..", kMaxRank, " tile_assignment_dimensions"));
  }
  int64_t tiles = 1;
  for (int64_t d : s.tile_assignment_dims) {
    if (d < 1 || d > kMaxDevices || tiles > kMaxDevices / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": tile_assignment_dimensions [",
          absl::StrJoin(s.tile_assignment_dims, ","), "] must be positive with at most ",
          kMaxDevices, " tiles"));
    }
    tiles *= d;
  }
  if (proto.iota_reshape_dims_size() > 0) {
    s.iota_form = true;
    s.iota_reshape_dims.assign(proto.iota_reshape_dims().begin(),
                               proto.iota_reshape_dims().end());
    s.iota_transpose_perm.assign(proto.iota_transpose_perm().begin(),
                                 proto.iota_transpose_perm().end());
    ASSIGN_OR_RETURN(int64_t total,
                     CheckIota(s.iota_reshape_dims, s.iota_transpose_perm, where));
    if (total != tiles) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": iota_reshape_dims hold ", total, " devices but the tile "
          "assignment has ", tiles));
    }
    // Identity is stored as empty, the IR's canonical form.
    if (IsIdentity(s.iota_transpose_perm)) s.iota_transpose_perm.clear();
    s.devices = ExpandIotaDevices(s.iota_reshape_dims, s.iota_transpose_perm);
  } else {
    if (proto.tile_assignment_devices_size() != tiles) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": tile_assignment_devices has ", proto.tile_assignment_devices_size(),
          " entries for ", tiles, " tiles"));
    }
    for (int64_t d : proto.tile_assignment_devices()) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": negative device ", d, " in tile_assignment_devices"));
      }
      s.devices.push_back(d);
    }
  }
  s.replicate_on_last_tile_dim = proto.replicate_on_last_tile_dim();
  for (int t : proto.last_tile_dims()) {
    if (!xla::OpSharding::Type_IsValid(t)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown sharding type ", t, " in last_tile_dims"));
    }
    s.last_tile_dims.push_back(t);
  }
  const int64_t subgroup_dims = static_cast<int64_t>(s.last_tile_dims.size()) +
                                (s.replicate_on_last_tile_dim ? 1 : 0);
  if (subgroup_dims > static_cast<int64_t>(s.tile_assignment_dims.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": more subgroup dimensions than tile_assignment_dimensions"));
  }
  return s;
}

// ---- Replica groups ----------------------------------------------------------

absl::Status ReplicaGroupsToProto(const ReplicaGroups& groups,
                                  xla::HloInstructionProto* proto) {
  for (const auto& group : groups.groups) {
    xla::ReplicaGroup* g = proto->add_replica_groups();
    for (int64_t id : group) g->add_replica_ids(id);
  }
  if (!groups.mesh_axes.empty()) {
    auto* mesh = proto->mutable_mesh_axes_replica_group_list();
    for (const auto& [name, size] : groups.mesh_axes) {
      auto* axis = mesh->mutable_mesh()->add_axes();
      axis->set_name(name);
      axis->set_size(size);
    }
    if (!groups.mesh_device_iota_reshape.empty()) {
      auto* iota = mesh->mutable_mesh()->mutable_iota_device_ids();
      for (int64_t d : groups.mesh_device_iota_reshape) iota->add_reshape_dims(d);
      for (int64_t p : groups.mesh_device_iota_perm) iota->add_transpose_perm(static_cast<int32_t>(p));
    } else {
      for (int64_t id : groups.mesh_device_ids) mesh->mutable_mesh()->add_device_ids(id);
    }
    for (const MeshAxisRef& ref : groups.mesh_group_axes) {
      for (size_t i = 0; i < groups.mesh_axes.size(); ++i) {
        if (groups.mesh_axes[i].first != ref.name) continue;
        xla::AxisRefProto* axis = mesh->add_axes();
        axis->set_mesh_axis_index(static_cast<int64_t>(i));
        if (ref.pre_size > 0) {
          axis->mutable_sub_axis_info()->set_pre_size(ref.pre_size);
          axis->mutable_sub_axis_info()->set_size(ref.size);
        }
      }
    }
    return absl::OkStatus();
  }
  if (groups.iota_form && !groups.groups.empty()) {
    xla::IotaReplicaGroupListProto* iota =
        proto->mutable_collective_device_list()->mutable_iota_replica_group_list();
    iota->set_num_replica_groups(static_cast<int64_t>(groups.groups.size()));
    iota->set_num_devices_per_group(static_cast<int64_t>(groups.groups[0].size()));
    for (int64_t d : groups.iota_reshape_dims) iota->add_iota_reshape_dims(d);
    const std::vector<int64_t> perm = groups.iota_transpose_perm.empty()
                                          ? IdentityPerm(groups.iota_reshape_dims.size())
                                          : groups.iota_transpose_perm;
    for (int64_t p : perm) iota->add_iota_transpose_perm(static_cast<int32_t>(p));
  }
  return absl::OkStatus();
}

absl::StatusOr<ReplicaGroups> ReplicaGroupsFromProto(
    const xla::HloInstructionProto& proto, absl::string_view where) {
  ReplicaGroups result;
  for (const xla::ReplicaGroup& g : proto.replica_groups()) {
    result.groups.emplace_back(g.replica_ids().begin(), g.replica_ids().end());
  }
  if (proto.has_mesh_axes_replica_group_list()) {
    const auto& m = proto.mesh_axes_replica_group_list();
    const std::string mesh_where = absl::StrCat(where, ": mesh_axes_replica_group_list");
    ReplicaGroups mesh;
    std::vector<int64_t> sizes;
    int64_t total = 1;
    for (const auto& axis : m.mesh().axes()) {
      if (axis.size() < 1 || total > (int64_t{1} << 20) / axis.size()) {
        return absl::InvalidArgumentError(absl::StrCat(mesh_where, ": bad axis size"));
      }
      total *= axis.size();
      mesh.mesh_axes.emplace_back(axis.name(), axis.size());
      sizes.push_back(axis.size());
    }
    if (sizes.empty()) return absl::InvalidArgumentError(absl::StrCat(mesh_where, ": no axes"));
    const auto& ids = m.mesh().device_ids();
    if (!ids.empty() && m.mesh().has_iota_device_ids()) {
      return absl::InvalidArgumentError(absl::StrCat(
          mesh_where, ": the mesh has both device_ids and iota_device_ids"));
    }
    if (ids.size() > total) {
      return absl::InvalidArgumentError(absl::StrCat(mesh_where, ": device_ids lists ", ids.size(),
                                                     " devices for a mesh of ", total));
    }
    mesh.mesh_device_ids.assign(ids.begin(), ids.end());
    if (m.mesh().has_iota_device_ids()) {
      const auto& iota = m.mesh().iota_device_ids();
      std::vector<int64_t> reshape(iota.reshape_dims().begin(), iota.reshape_dims().end());
      std::vector<int64_t> perm(iota.transpose_perm().begin(), iota.transpose_perm().end());
      int64_t n = 1;
      for (int64_t d : reshape) {
        if (d < 1 || n > total / d) {
          return absl::InvalidArgumentError(absl::StrCat(
              mesh_where, ": iota_device_ids must hold the mesh's ", total, " devices"));
        }
        n *= d;
      }
      if (n != total || (!perm.empty() && !IsPermutation(perm, static_cast<int64_t>(reshape.size())))) {
        return absl::InvalidArgumentError(absl::StrCat(
            mesh_where, ": iota_device_ids must hold the mesh's ", total,
            " devices (a transpose_perm permuting its reshape_dims)"));
      }
      mesh.mesh_device_iota_reshape = reshape;
      mesh.mesh_device_iota_perm = perm;
      mesh.mesh_device_ids = ExpandIotaDevices(reshape, perm);
    }
    for (const auto& ref : m.axes()) {
      const int64_t i = ref.mesh_axis_index();
      if (i < 0 || i >= static_cast<int64_t>(sizes.size())) {
        return absl::InvalidArgumentError(absl::StrCat(mesh_where, ": bad axis index ", i));
      }
      MeshAxisRef axis;
      axis.name = mesh.mesh_axes[i].first;
      if (ref.has_sub_axis_info()) {
        axis.pre_size = ref.sub_axis_info().pre_size();
        axis.size = ref.sub_axis_info().size();
        if (axis.pre_size < 1) {
          return absl::InvalidArgumentError(absl::StrCat(mesh_where, ": sub-axis pre_size ",
                                                         axis.pre_size, " (must be >= 1)"));
        }
      }
      mesh.mesh_group_axes.push_back(axis);
    }
    absl::StatusOr<std::vector<std::vector<int64_t>>> expanded = MeshAxesGroups(mesh);
    if (!expanded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(mesh_where, ": ", expanded.status().message()));
    }
    mesh.groups = *std::move(expanded);
    if (!result.groups.empty() && result.groups != mesh.groups) return result;
    return mesh;
  }
  const bool direct_iota = proto.has_iota_collective_device_list();
  if (!proto.has_collective_device_list() && !direct_iota) return result;
  const xla::CollectiveDeviceListProto& list = proto.collective_device_list();
  if (!direct_iota && !list.has_iota_replica_group_list()) {
    if (result.groups.empty()) {
      for (const xla::ReplicaGroup& g : list.replica_groups()) {
        result.groups.emplace_back(g.replica_ids().begin(), g.replica_ids().end());
      }
    }
    return result;
  }
  const xla::IotaReplicaGroupListProto& iota =
      direct_iota ? proto.iota_collective_device_list() : list.iota_replica_group_list();
  const std::string iota_where = absl::StrCat(
      where, direct_iota ? ": iota_collective_device_list"
                         : ": collective_device_list.iota_replica_group_list");
  std::vector<int64_t> reshape(iota.iota_reshape_dims().begin(),
                               iota.iota_reshape_dims().end());
  std::vector<int64_t> perm(iota.iota_transpose_perm().begin(),
                            iota.iota_transpose_perm().end());
  if (reshape.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(iota_where, ": iota_reshape_dims is empty"));
  }
  ASSIGN_OR_RETURN(int64_t total, CheckIota(reshape, perm, iota_where));
  const int64_t num_groups = iota.num_replica_groups();
  const int64_t per_group = iota.num_devices_per_group();
  if (num_groups < 1 || per_group < 1 || num_groups > total ||
      num_groups * per_group != total) {
    return absl::InvalidArgumentError(absl::StrCat(
        iota_where, ": ", num_groups, " groups of ", per_group,
        " devices do not match the ", total, " iota devices"));
  }
  if (IsIdentity(perm)) perm.clear();
  const std::vector<int64_t> devices = ExpandIotaDevices(reshape, perm);
  std::vector<std::vector<int64_t>> expanded;
  for (int64_t g = 0; g < num_groups; ++g) {
    expanded.emplace_back(devices.begin() + g * per_group,
                          devices.begin() + (g + 1) * per_group);
  }
  // The explicit legacy list wins, as in XLA; the iota form is kept only when
  // it describes exactly the same groups.
  if (!result.groups.empty() && result.groups != expanded) return result;
  result.groups = std::move(expanded);
  result.iota_form = true;
  result.iota_reshape_dims = std::move(reshape);
  result.iota_transpose_perm = std::move(perm);
  return result;
}

// ---- Metadata, frontend attributes, precision ----------------------------------

void MetadataToProto(const OpMetadata& m, xla::OpMetadata* proto) {
  proto->set_op_type(m.op_type);
  proto->set_op_name(m.op_name);
  proto->set_source_file(m.source_file);
  proto->set_source_line(m.source_line);
  proto->set_source_end_line(m.source_end_line);
  proto->set_source_column(m.source_column);
  proto->set_source_end_column(m.source_end_column);
  for (int64_t t : m.profile_type) proto->add_profile_type(static_cast<int32_t>(t));
  proto->set_deduplicated_name(m.deduplicated_name);
  proto->set_scheduling_name(m.scheduling_name);
  proto->set_stack_frame_id(m.stack_frame_id);
}

OpMetadata MetadataFromProto(const xla::OpMetadata& proto) {
  OpMetadata m;
  m.op_type = proto.op_type();
  m.op_name = proto.op_name();
  m.source_file = proto.source_file();
  m.source_line = proto.source_line();
  m.source_end_line = proto.source_end_line();
  m.source_column = proto.source_column();
  m.source_end_column = proto.source_end_column();
  m.profile_type.assign(proto.profile_type().begin(), proto.profile_type().end());
  m.deduplicated_name = proto.deduplicated_name();
  m.scheduling_name = proto.scheduling_name();
  m.stack_frame_id = proto.stack_frame_id();
  return m;
}

void FrontendAttributesToProto(const FrontendAttributes& attrs,
                               xla::FrontendAttributes* proto) {
  for (const auto& [key, value] : attrs) (*proto->mutable_map())[key] = value;
}

FrontendAttributes FrontendAttributesFromProto(const xla::FrontendAttributes& proto) {
  return FrontendAttributes(proto.map().begin(), proto.map().end());
}

absl::StatusOr<xla::PrecisionConfig::Precision> PrecisionFromString(
    absl::string_view name) {
  xla::PrecisionConfig::Precision value;
  if (!xla::PrecisionConfig::Precision_Parse(absl::AsciiStrToUpper(name), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown operand precision '", name, "'"));
  }
  return value;
}

absl::StatusOr<std::string> PrecisionToString(int value, absl::string_view where) {
  if (!xla::PrecisionConfig::Precision_IsValid(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unknown operand precision ", value));
  }
  return xla::PrecisionConfig::Precision_Name(
      static_cast<xla::PrecisionConfig::Precision>(value));
}

}  // namespace tpuoff::hlo::proto_internal
