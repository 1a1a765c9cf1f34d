#include "hlo/spmd/sharding_util.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo {
namespace {

void FlattenLeaves(const Shape& shape, std::vector<Shape>* out) {
  if (shape.IsTuple()) {
    for (const Shape& s : shape.tuple_shapes()) FlattenLeaves(s, out);
  } else {
    Shape leaf(shape.element_type(), shape.dimensions());
    out->push_back(leaf);
  }
}

// Total number of devices a tiled sharding's assignment spans.
int64_t TileAssignmentSize(const HloSharding& s) {
  int64_t n = 1;
  for (int64_t d : s.tile_assignment_dims) n *= d;
  return n;
}

// Checks that `s` (an array's sharding) fits a mesh of `n` devices.
absl::Status CheckOnMesh(const HloSharding& s, int64_t rank, int64_t n,
                         const std::string& what) {
  switch (s.type) {
    case HloSharding::Type::kReplicated:
    case HloSharding::Type::kManual:
      return absl::OkStatus();
    case HloSharding::Type::kMaximal:
      if (s.devices.empty() || s.devices[0] < 0 || s.devices[0] >= n) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": maximal sharding names a device outside 0..", n - 1));
      }
      return absl::OkStatus();
    case HloSharding::Type::kTiled: {
      RETURN_IF_ERROR(DataTileCounts(s, rank).status());
      if (TileAssignmentSize(s) != n ||
          static_cast<int64_t>(s.devices.size()) != n) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": sharding spans ", s.devices.size(), " devices, the module has ",
            "num_partitions=", n));
      }
      std::set<int64_t> seen(s.devices.begin(), s.devices.end());
      if (static_cast<int64_t>(seen.size()) != n || *seen.begin() != 0 ||
          *seen.rbegin() != n - 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": sharding must name every device 0..", n - 1, " once"));
      }
      return absl::OkStatus();
    }
    case HloSharding::Type::kTuple:
      return absl::InvalidArgumentError(absl::StrCat(what, ": tuple sharding on an array"));
    case HloSharding::Type::kUnknown:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": unsupported sharding"));
}

// The global shape of `local` under `s` when nothing was recorded.
absl::StatusOr<Shape> DefaultGlobalShape(const Shape& local, const HloSharding& s, int64_t n) {
  if (s.type == HloSharding::Type::kManual) {
    std::vector<int64_t> dims = {n};
    dims.insert(dims.end(), local.dimensions().begin(), local.dimensions().end());
    return Shape(local.element_type(), dims);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> tiles, DataTileCounts(s, local.rank()));
  std::vector<int64_t> dims = local.dimensions();
  for (size_t i = 0; i < dims.size(); ++i) dims[i] *= tiles[i];
  return Shape(local.element_type(), dims);
}

// Fills `globals` from the recorded attribute (when present) or the default
// rule, checking every global shape against its local one.
absl::Status GlobalShapes(const HloModule& module, absl::string_view attr,
                          const std::vector<Shape>& locals,
                          const std::vector<HloSharding>& shardings,
                          const std::vector<std::string>& what, int64_t n,
                          std::vector<Shape>* globals) {
  const auto it = module.frontend_attributes().find(std::string(attr));
  std::vector<Shape> recorded;
  if (it != module.frontend_attributes().end()) {
    ASSIGN_OR_RETURN(recorded, DecodeShapeList(it->second));
    if (recorded.size() != locals.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "frontend attribute ", attr, " lists ", recorded.size(), " shapes for ",
          locals.size(), " arrays"));
    }
  }
  globals->clear();
  for (size_t i = 0; i < locals.size(); ++i) {
    Shape global;
    if (!recorded.empty()) {
      global = recorded[i];
    } else {
      ASSIGN_OR_RETURN(global, DefaultGlobalShape(locals[i], shardings[i], n));
    }
    ASSIGN_OR_RETURN(Shape local, ShardShape(global, shardings[i]));
    if (!local.Compatible(locals[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          what[i], ": global shape ", global.ToString(), " split as ",
          "sharding gives ", local.ToString(), " per device, the module has ",
          locals[i].ToString()));
    }
    globals->push_back(global);
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeShapeList(absl::Span<const Shape> shapes) {
  std::vector<std::string> parts;
  for (const Shape& s : shapes) parts.push_back(s.ToString());
  return absl::StrJoin(parts, ";");
}

absl::StatusOr<std::vector<Shape>> DecodeShapeList(absl::string_view text) {
  std::vector<Shape> out;
  if (absl::StripAsciiWhitespace(text).empty()) return out;
  for (absl::string_view part : absl::StrSplit(text, ';')) {
    part = absl::StripAsciiWhitespace(part);
    const size_t open = part.find('[');
    if (open == absl::string_view::npos || part.back() != ']') {
      return absl::InvalidArgumentError(
          absl::StrCat("shape list entry '", part, "' is not TYPE[dims]"));
    }
    ASSIGN_OR_RETURN(PrimitiveType type, PrimitiveTypeFromName(part.substr(0, open)));
    std::vector<int64_t> dims;
    absl::string_view inner = part.substr(open + 1, part.size() - open - 2);
    if (!inner.empty()) {
      for (absl::string_view d : absl::StrSplit(inner, ',')) {
        int64_t v;
        if (!absl::SimpleAtoi(d, &v) || v < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("shape list entry '", part, "' has a bad dimension"));
        }
        dims.push_back(v);
      }
    }
    if (!IsArrayType(type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape list entry '", part, "' is not an array"));
    }
    out.emplace_back(type, dims);
  }
  return out;
}

int64_t ShardSize(int64_t size, int64_t tiles) {
  return tiles <= 1 ? size : (size + tiles - 1) / tiles;
}

HloSharding SplitSharding(int64_t rank, int64_t dim, int64_t n) {
  if (n <= 1) return HloSharding::Replicated();
  std::vector<int64_t> tiles(rank, 1);
  tiles[dim] = n;
  return HloSharding::IotaTiled(std::move(tiles));
}

absl::StatusOr<std::vector<int64_t>> DataTileCounts(const HloSharding& s, int64_t rank) {
  if (s.type != HloSharding::Type::kTiled) return std::vector<int64_t>(rank, 1);
  const int64_t extra = (s.replicate_on_last_tile_dim ? 1 : 0) +
                        static_cast<int64_t>(s.last_tile_dims.size());
  if (static_cast<int64_t>(s.tile_assignment_dims.size()) != rank + extra) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharding with tile assignment [", absl::StrJoin(s.tile_assignment_dims, ","),
        "] does not fit a rank-", rank, " array"));
  }
  return std::vector<int64_t>(s.tile_assignment_dims.begin(),
                              s.tile_assignment_dims.begin() + rank);
}

absl::StatusOr<Shape> ShardShape(const Shape& global, const HloSharding& s) {
  if (!global.IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShardShape: ", global.ToString(), " is not an array"));
  }
  if (s.type == HloSharding::Type::kManual) {
    if (global.rank() == 0) {
      return absl::InvalidArgumentError("a manual global array needs a device dimension");
    }
    return Shape(global.element_type(), std::vector<int64_t>(global.dimensions().begin() + 1,
                                                             global.dimensions().end()));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> tiles, DataTileCounts(s, global.rank()));
  std::vector<int64_t> dims = global.dimensions();
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = ShardSize(dims[i], tiles[i]);
  return Shape(global.element_type(), dims);
}

absl::StatusOr<std::vector<int64_t>> TileIndexOfDevice(const HloSharding& s, int64_t rank,
                                                       int64_t device) {
  if (s.type != HloSharding::Type::kTiled) return std::vector<int64_t>(rank, 0);
  RETURN_IF_ERROR(DataTileCounts(s, rank).status());
  int64_t pos = -1;
  for (size_t i = 0; i < s.devices.size(); ++i) {
    if (s.devices[i] == device) {
      pos = static_cast<int64_t>(i);
      break;
    }
  }
  if (pos < 0) {
    return absl::NotFoundError(absl::StrCat("device ", device, " holds no tile"));
  }
  // Unravel the position in the row-major tile assignment.
  const std::vector<int64_t>& dims = s.tile_assignment_dims;
  std::vector<int64_t> index(dims.size());
  for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0; --i) {
    index[i] = pos % dims[i];
    pos /= dims[i];
  }
  index.resize(rank);
  return index;
}

bool IsPartitionedModule(const HloModule& module) {
  const HloComputation* entry = module.entry();
  if (module.num_partitions() <= 1 || entry == nullptr || entry->root() == nullptr) {
    return false;
  }
  for (const HloInstruction* p : entry->parameters()) {
    if (p == nullptr || !p->sharding().has_value()) return false;
  }
  return entry->root()->sharding().has_value();
}

absl::StatusOr<PartitionedSignature> GetPartitionedSignature(const HloModule& module) {
  if (!IsPartitionedModule(module)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "module ", module.name(), " is not partitioned (needs num_partitions > 1 and a "
        "sharding on every entry parameter and on the root)"));
  }
  const HloComputation& entry = *module.entry();
  for (const auto& instr : entry.instructions()) {
    if (instr->opcode() == HloOpcode::kCustomCall &&
        (instr->attrs().custom_call_target == "SPMDFullToShardShape" ||
         instr->attrs().custom_call_target == "SPMDShardToFullShape")) {
      return absl::UnimplementedError(absl::StrCat(
          "module ", module.name(), " is the global form of a shard_map (custom-call ",
          instr->attrs().custom_call_target, " %", instr->name(),
          "): XLA's SPMD partitioner turns it into the per-device program; run the "
          "per-device module instead (dump without --global-form)"));
    }
  }
  PartitionedSignature sig;
  sig.num_devices = module.num_partitions();
  std::vector<std::string> param_what;
  for (const HloInstruction* p : entry.parameters()) {
    if (!p->shape().IsArray()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", p->name(), ": tuple parameters are not supported"));
    }
    const std::string what = absl::StrCat("parameter ", p->name());
    RETURN_IF_ERROR(CheckOnMesh(*p->sharding(), p->shape().rank(), sig.num_devices, what));
    sig.parameter_names.push_back(p->name());
    sig.local_parameters.push_back(Shape(p->shape().element_type(), p->shape().dimensions()));
    sig.parameter_shardings.push_back(*p->sharding());
    param_what.push_back(what);
  }
  RETURN_IF_ERROR(GlobalShapes(module, kGlobalParameterShapesAttr, sig.local_parameters,
                               sig.parameter_shardings, param_what, sig.num_devices,
                               &sig.global_parameters));

  const HloInstruction& root = *entry.root();
  FlattenLeaves(root.shape(), &sig.local_outputs);
  const HloSharding& rs = *root.sharding();
  std::vector<std::string> out_what;
  for (size_t i = 0; i < sig.local_outputs.size(); ++i) {
    const std::string what = absl::StrCat("output ", i);
    HloSharding s = rs;
    if (rs.type == HloSharding::Type::kTuple) {
      if (rs.tuple_shardings.size() != sig.local_outputs.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "root sharding has ", rs.tuple_shardings.size(), " elements for ",
            sig.local_outputs.size(), " result leaves"));
      }
      s = rs.tuple_shardings[i];
    }
    RETURN_IF_ERROR(CheckOnMesh(s, sig.local_outputs[i].rank(), sig.num_devices, what));
    sig.output_shardings.push_back(s);
    out_what.push_back(what);
  }
  RETURN_IF_ERROR(GlobalShapes(module, kGlobalOutputShapesAttr, sig.local_outputs,
                               sig.output_shardings, out_what, sig.num_devices,
                               &sig.global_outputs));
  return sig;
}

}  // namespace tpuoff::hlo
