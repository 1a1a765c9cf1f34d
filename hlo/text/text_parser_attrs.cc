// Instruction attributes: dispatch by name, and the structured values
// (sharding, replica groups, metadata, frontend attributes, slices, padding).
#include <algorithm>
#include <initializer_list>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hlo/ir/mesh_replica_groups.h"
#include "hlo/ir/status_macros.h"
#include "hlo/text/text_parser_impl.h"

namespace tpuoff::hlo::text_internal {
namespace {

// OpSharding.Type values used in last_tile_dims.
constexpr int kOpShardingReplicated = 0;
constexpr int kOpShardingMaximal = 1;
constexpr int kOpShardingManual = 4;

bool IsPermutation(const std::vector<int64_t>& perm, size_t n) {
  if (perm.size() != n) return false;
  std::vector<bool> seen(n, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(n) || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}

constexpr absl::string_view kCustomCallApiVersions[] = {
    "API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
    "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"};

// Product of `dims` if every entry is >= 1 and the product stays within
// `limit`; -1 otherwise.
int64_t BoundedProduct(const std::vector<int64_t>& dims, int64_t limit) {
  int64_t product = 1;
  for (int64_t d : dims) {
    if (d < 1 || product > limit / d) return -1;
    product *= d;
  }
  return product;
}

}  // namespace

absl::Status TextParser::ParseSharding(HloSharding* sharding, int depth) {
  const size_t loc = Loc();
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start a sharding"));
  // `{{...}, {...}}` and `{}` are tuple shardings; XLA's are flat.
  if (depth == 0 && (At(TokKind::kLbrace) || At(TokKind::kRbrace))) {
    sharding->type = HloSharding::Type::kTuple;
    if (!At(TokKind::kRbrace)) {
      do {
        sharding->tuple_shardings.emplace_back();
        RETURN_IF_ERROR(ParseSharding(&sharding->tuple_shardings.back(), depth + 1));
      } while (Eat(TokKind::kComma));
    }
    return Expect(TokKind::kRbrace, "to end a tuple sharding");
  }
  bool replicated = false, maximal = false, manual = false, unknown = false;
  bool has_tiles = false, iota = false;
  std::vector<int64_t> devices, tile_dims, reshape_dims, perm, last_tile_dims;
  bool last_tile_dim_replicate = false;
  while (!At(TokKind::kRbrace)) {
    const size_t item_loc = Loc();
    const std::string& s = lexer_.tok().str;
    if (At(TokKind::kIdent)) {
      if (s == "replicated") {
        replicated = true;
      } else if (s == "maximal") {
        maximal = true;
      } else if (s == "manual") {
        manual = true;
      } else if (s == "unknown") {
        unknown = true;
      } else if (s == "last_tile_dim_replicate") {
        last_tile_dim_replicate = true;
      } else if (s == "unreduced" || s == "shard_as" || s == "shard_like" ||
                 s == "mesh" || s == "maximal_mesh") {
        return Unsupported(item_loc, absl::StrCat("sharding '", s, "' is not supported"));
      } else {
        return TokenError("unexpected token in a sharding");
      }
      lexer_.Next();
      continue;
    }
    if (!At(TokKind::kAttrName)) return TokenError("unexpected token in a sharding");
    const std::string attr = s;
    lexer_.Next();
    if (attr == "device") {
      int64_t d = 0;
      RETURN_IF_ERROR(ParseDimValue(&d));
      devices = {d};
    } else if (attr == "devices") {
      has_tiles = true;
      RETURN_IF_ERROR(ParseDimList(&tile_dims, TokKind::kLsquare, TokKind::kRsquare));
      if (Eat(TokKind::kLeq)) {
        iota = true;
        RETURN_IF_ERROR(ParseDimList(&reshape_dims, TokKind::kLsquare, TokKind::kRsquare));
        if (AtIdent("T")) {
          lexer_.Next();
          RETURN_IF_ERROR(ParseDimList(&perm, TokKind::kLparen, TokKind::kRparen));
        }
      } else {
        do {
          int64_t d = 0;
          RETURN_IF_ERROR(ParseDimValue(&d));
          devices.push_back(d);
          if (static_cast<int64_t>(devices.size()) > options_.max_devices) {
            return ErrorAt(item_loc, "too many devices in a sharding");
          }
        } while (Eat(TokKind::kComma));
      }
    } else if (attr == "metadata") {
      // Where the sharding came from; informational, dropped.
      OpMetadata ignored;
      if (At(TokKind::kLbrace) && lexer_.PeekNext().kind == TokKind::kLbrace) {
        lexer_.Next();
        if (!At(TokKind::kRbrace)) {
          do {
            RETURN_IF_ERROR(ParseMetadata(&ignored));
          } while (Eat(TokKind::kComma));
        }
        RETURN_IF_ERROR(Expect(TokKind::kRbrace, "to end a metadata list"));
      } else {
        RETURN_IF_ERROR(ParseMetadata(&ignored));
      }
    } else if (attr == "last_tile_dims") {
      RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start last_tile_dims"));
      if (!At(TokKind::kRbrace)) {
        do {
          if (AtIdent("replicated")) {
            last_tile_dims.push_back(kOpShardingReplicated);
          } else if (AtIdent("manual")) {
            last_tile_dims.push_back(kOpShardingManual);
          } else if (AtIdent("maximal")) {
            last_tile_dims.push_back(kOpShardingMaximal);
          } else if (AtIdent("unreduced")) {
            return Unsupported(Loc(), "unreduced last_tile_dims are not supported");
          } else {
            return TokenError("expected replicated, manual or maximal");
          }
          lexer_.Next();
        } while (Eat(TokKind::kComma));
      }
      RETURN_IF_ERROR(Expect(TokKind::kRbrace, "to end last_tile_dims"));
    } else {
      return ErrorAt(item_loc, absl::StrCat("unknown sharding attribute '", attr, "'"));
    }
  }
  lexer_.Next();  // '}'
  const int kinds = replicated + maximal + manual + unknown + has_tiles;
  if (kinds > 1) return ErrorAt(loc, "a sharding must be exactly one kind");
  *sharding = HloSharding();
  if (replicated || manual || unknown) {
    if (!devices.empty()) return ErrorAt(loc, "this sharding takes no devices");
    sharding->type = replicated ? HloSharding::Type::kReplicated
                     : manual   ? HloSharding::Type::kManual
                                : HloSharding::Type::kUnknown;
    return absl::OkStatus();
  }
  if (maximal) {
    if (devices.size() != 1) return ErrorAt(loc, "maximal shardings need one device=");
    if (devices[0] < 0) return ErrorAt(loc, "device ids must be >= 0");
    sharding->type = HloSharding::Type::kMaximal;
    sharding->tile_assignment_dims = {1};
    sharding->devices = devices;
    return absl::OkStatus();
  }
  if (!has_tiles) return ErrorAt(loc, "a sharding needs a kind or devices=");
  if (last_tile_dim_replicate && !last_tile_dims.empty()) {
    return ErrorAt(loc, "last_tile_dim_replicate and last_tile_dims are exclusive");
  }
  const int64_t tiles = BoundedProduct(tile_dims, options_.max_devices);
  if (tiles < 0) return ErrorAt(loc, "tile dimensions must be >= 1 and not too many");
  if (static_cast<int64_t>(last_tile_dims.size() + last_tile_dim_replicate) >
      static_cast<int64_t>(tile_dims.size())) {
    return ErrorAt(loc, "more last_tile_dims than tile dimensions");
  }
  sharding->type = HloSharding::Type::kTiled;
  sharding->tile_assignment_dims = tile_dims;
  sharding->replicate_on_last_tile_dim = last_tile_dim_replicate;
  sharding->last_tile_dims.assign(last_tile_dims.begin(), last_tile_dims.end());
  if (iota) {
    if (BoundedProduct(reshape_dims, options_.max_devices) != tiles) {
      return ErrorAt(loc, "iota reshape dimensions must hold as many devices as the tiles");
    }
    if (!perm.empty() && !IsPermutation(perm, reshape_dims.size())) {
      return ErrorAt(loc, "T(...) must permute the iota reshape dimensions");
    }
    sharding->iota_form = true;
    sharding->iota_reshape_dims = reshape_dims;
    sharding->iota_transpose_perm = perm;
    sharding->devices = ExpandIotaDevices(reshape_dims, perm);
    return absl::OkStatus();
  }
  if (static_cast<int64_t>(devices.size()) != tiles || devices.size() < 2) {
    return ErrorAt(loc, absl::StrCat("sharding lists ", devices.size(),
                                     " devices for ", tiles, " tiles"));
  }
  for (int64_t d : devices) {
    if (d < 0) return ErrorAt(loc, "device ids must be >= 0");
  }
  sharding->devices = devices;
  return absl::OkStatus();
}

absl::Status TextParser::ParseReplicaGroups(ReplicaGroups* groups) {
  *groups = ReplicaGroups();
  const size_t loc = Loc();
  if (At(TokKind::kLbrace)) {
    RETURN_IF_ERROR(ParseDimListList(&groups->groups));
    int64_t total = 0;
    for (const auto& g : groups->groups) total += g.size();
    if (total > options_.max_devices) return ErrorAt(loc, "too many devices in replica_groups");
    return absl::OkStatus();
  }
  if (AtIdent("mesh")) return ParseMeshReplicaGroups(groups);
  // Iota form: [num_groups,group_size]<=[reshape]T(perm).
  std::vector<int64_t> dims, reshape, perm;
  RETURN_IF_ERROR(ParseDimList(&dims, TokKind::kLsquare, TokKind::kRsquare));
  RETURN_IF_ERROR(Expect(TokKind::kLeq, "in iota replica groups ([groups,size]<=[n])"));
  RETURN_IF_ERROR(ParseDimList(&reshape, TokKind::kLsquare, TokKind::kRsquare));
  if (AtIdent("T")) {
    lexer_.Next();
    RETURN_IF_ERROR(ParseDimList(&perm, TokKind::kLparen, TokKind::kRparen));
  }
  if (dims.size() != 2) return ErrorAt(loc, "iota replica groups need [num_groups,group_size]");
  const int64_t total = BoundedProduct(dims, options_.max_devices);
  if (total < 0 || BoundedProduct(reshape, options_.max_devices) != total) {
    return ErrorAt(loc, "iota replica groups: reshape must hold groups*size devices");
  }
  if (!perm.empty() && !IsPermutation(perm, reshape.size())) {
    return ErrorAt(loc, "T(...) must permute the iota reshape dimensions");
  }
  const std::vector<int64_t> ids = ExpandIotaDevices(reshape, perm);
  for (int64_t g = 0; g < dims[0]; ++g) {
    groups->groups.emplace_back(ids.begin() + g * dims[1], ids.begin() + (g + 1) * dims[1]);
  }
  groups->iota_form = true;
  groups->iota_reshape_dims = reshape;
  groups->iota_transpose_perm = perm;
  return absl::OkStatus();
}

// mesh['a'=4,'b'=2], device_ids=([2,4]T(1,0)) {'b','a':(1)2}: XLA's
// MeshAxesReplicaGroupList (hlo/ir/mesh_replica_groups.h). The device id
// list is optional, as a list `(0,4,1,...)` or in iota form `([dims]T(perm))`.
absl::Status TextParser::ParseMeshReplicaGroups(ReplicaGroups* groups) {
  const size_t loc = Loc();
  lexer_.Next();
  RETURN_IF_ERROR(Expect(TokKind::kLsquare, "after mesh"));
  std::vector<int64_t> sizes;
  while (!At(TokKind::kRsquare)) {
    std::string name;
    int64_t size = 0;
    RETURN_IF_ERROR(ParseString(&name));
    RETURN_IF_ERROR(Expect(TokKind::kEqual, "after a mesh axis name"));
    const size_t size_loc = Loc();
    RETURN_IF_ERROR(ParseDimValue(&size));
    if (size < 1) return ErrorAt(size_loc, "mesh axis sizes must be >= 1");
    for (const auto& axis : groups->mesh_axes) {
      if (axis.first == name) return ErrorAt(size_loc, absl::StrCat("mesh axis '", name, "' repeated"));
    }
    groups->mesh_axes.emplace_back(name, size);
    sizes.push_back(size);
    if (!Eat(TokKind::kComma)) break;
  }
  RETURN_IF_ERROR(Expect(TokKind::kRsquare, "to end the mesh axes"));
  if (sizes.empty()) return ErrorAt(loc, "a mesh needs at least one axis");
  const int64_t total = BoundedProduct(sizes, options_.max_devices);
  if (total < 0) return ErrorAt(loc, "too many devices in the mesh");
  if (At(TokKind::kComma) && lexer_.PeekNext().kind == TokKind::kAttrName &&
      lexer_.PeekNext().str == "device_ids") {
    lexer_.Next();
    lexer_.Next();
    const size_t ids_loc = Loc();
    RETURN_IF_ERROR(Expect(TokKind::kLparen, "after device_ids="));
    if (At(TokKind::kLsquare)) {  // iota form
      std::vector<int64_t> reshape, perm;
      RETURN_IF_ERROR(ParseDimList(&reshape, TokKind::kLsquare, TokKind::kRsquare));
      if (AtIdent("T")) {
        lexer_.Next();
        RETURN_IF_ERROR(ParseDimList(&perm, TokKind::kLparen, TokKind::kRparen));
      }
      if (BoundedProduct(reshape, options_.max_devices) != total) {
        return ErrorAt(ids_loc, absl::StrCat("device_ids: the iota dimensions must hold the mesh's ",
                                             total, " devices"));
      }
      if (!perm.empty() && !IsPermutation(perm, reshape.size())) {
        return ErrorAt(ids_loc, "device_ids: T(...) must permute the iota dimensions");
      }
      groups->mesh_device_iota_reshape = reshape;
      groups->mesh_device_iota_perm = perm;
      groups->mesh_device_ids = ExpandIotaDevices(reshape, perm);
    } else {
      while (!At(TokKind::kRparen)) {
        int64_t id = 0;
        RETURN_IF_ERROR(ParseInt64(&id));
        if (static_cast<int64_t>(groups->mesh_device_ids.size()) >= total) {
          return ErrorAt(ids_loc, absl::StrCat("device_ids lists more than the mesh's ", total,
                                               " devices"));
        }
        groups->mesh_device_ids.push_back(id);
        if (!Eat(TokKind::kComma)) break;
      }
    }
    RETURN_IF_ERROR(Expect(TokKind::kRparen, "to end device_ids"));
  }
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "before the grouped mesh axes"));
  while (!At(TokKind::kRbrace)) {
    MeshAxisRef ref;
    RETURN_IF_ERROR(ParseString(&ref.name));
    if (Eat(TokKind::kColon)) {  // a sub-axis: 'name':(pre_size)size
      RETURN_IF_ERROR(Expect(TokKind::kLparen, "before a sub-axis pre-size"));
      RETURN_IF_ERROR(ParseInt64(&ref.pre_size));
      RETURN_IF_ERROR(Expect(TokKind::kRparen, "after a sub-axis pre-size"));
      RETURN_IF_ERROR(ParseInt64(&ref.size));
      if (ref.pre_size < 1) return ErrorAt(loc, "sub-axis pre-sizes must be >= 1");
    }
    groups->mesh_group_axes.push_back(ref);
    if (!Eat(TokKind::kComma)) break;
  }
  RETURN_IF_ERROR(Expect(TokKind::kRbrace, "to end the grouped mesh axes"));
  absl::StatusOr<std::vector<std::vector<int64_t>>> expanded = MeshAxesGroups(*groups);
  if (!expanded.ok()) return ErrorAt(loc, absl::StrCat("replica_groups: ", expanded.status().message()));
  groups->groups = *std::move(expanded);
  return absl::OkStatus();
}

absl::Status TextParser::ParseMetadata(OpMetadata* metadata) {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start metadata"));
  std::set<std::string> seen;
  while (!At(TokKind::kRbrace)) {
    Eat(TokKind::kComma);
    if (!At(TokKind::kAttrName)) return TokenError("expected a metadata field name=");
    const size_t loc = Loc();
    const std::string field = lexer_.tok().str;
    if (!seen.insert(field).second) {
      return ErrorAt(loc, absl::StrCat("metadata field ", field, " given twice"));
    }
    lexer_.Next();
    if (field == "op_type") {
      RETURN_IF_ERROR(ParseString(&metadata->op_type));
    } else if (field == "op_name") {
      RETURN_IF_ERROR(ParseString(&metadata->op_name));
    } else if (field == "source_file") {
      RETURN_IF_ERROR(ParseString(&metadata->source_file));
    } else if (field == "deduplicated_name") {
      RETURN_IF_ERROR(ParseString(&metadata->deduplicated_name));
    } else if (field == "scheduling_name") {
      RETURN_IF_ERROR(ParseString(&metadata->scheduling_name));
    } else if (field == "profile_type") {
      RETURN_IF_ERROR(ParseDimList(&metadata->profile_type));
    } else if (field == "source_line" || field == "source_end_line" ||
               field == "source_column" || field == "source_end_column" ||
               field == "stack_frame_id") {
      int64_t v = 0;
      RETURN_IF_ERROR(ParseInt64(&v));
      if (v < INT32_MIN || v > INT32_MAX) return ErrorAt(loc, field + " is out of range");
      const int32_t n = static_cast<int32_t>(v);
      if (field == "source_line") metadata->source_line = n;
      if (field == "source_end_line") metadata->source_end_line = n;
      if (field == "source_column") metadata->source_column = n;
      if (field == "source_end_column") metadata->source_end_column = n;
      if (field == "stack_frame_id") metadata->stack_frame_id = n;
    } else {
      // Fields of newer XLA not kept here.
      RETURN_IF_ERROR(SkipValue());
    }
  }
  lexer_.Next();
  return absl::OkStatus();
}

absl::Status TextParser::ParseStringOrJsonDict(std::string* value) {
  if (At(TokKind::kString)) return ParseString(value);
  if (At(TokKind::kLbrace)) {
    if (!lexer_.ScanJsonDict(value)) return TokenError("malformed JSON-like dict");
    return absl::OkStatus();
  }
  return TokenError("expected a string or a {...} dict");
}

absl::Status TextParser::ParseFrontendAttributes(FrontendAttributes* attrs) {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start frontend_attributes"));
  if (Eat(TokKind::kRbrace)) return absl::OkStatus();
  do {
    if (!At(TokKind::kAttrName)) return TokenError("expected key= in frontend_attributes");
    const std::string key = lexer_.tok().str;
    lexer_.Next();
    std::string value;
    RETURN_IF_ERROR(ParseStringOrJsonDict(&value));
    (*attrs)[key] = std::move(value);
  } while (Eat(TokKind::kComma));
  return Expect(TokKind::kRbrace, "to end frontend_attributes");
}

absl::Status TextParser::ParseSliceRanges(std::vector<SliceDimension>* slice) {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start slice ranges"));
  if (Eat(TokKind::kRbrace)) return absl::OkStatus();
  do {
    const size_t loc = Loc();
    std::vector<int64_t> r;
    RETURN_IF_ERROR(ParseDimList(&r, TokKind::kLsquare, TokKind::kRsquare, TokKind::kColon));
    if (r.size() != 2 && r.size() != 3) {
      return ErrorAt(loc, "expected [start:limit] or [start:limit:stride]");
    }
    slice->push_back({r[0], r[1], r.size() == 3 ? r[2] : 1});
  } while (Eat(TokKind::kComma));
  return Expect(TokKind::kRbrace, "to end slice ranges");
}

absl::Status TextParser::ParsePadding(std::vector<PaddingDimension>* padding) {
  if (!At(TokKind::kPad)) {
    // XLA prints a rank-0 pad as an empty `padding=`.
    if (At(TokKind::kComma) || At(TokKind::kRbrace) || At(TokKind::kName) ||
        At(TokKind::kIdent) || At(TokKind::kEof)) {
      return absl::OkStatus();
    }
    return TokenError("expected padding like 0_0x1_2_0 (low_high[_interior] per dimension)");
  }
  const std::string text(lexer_.TokenText(lexer_.tok()));
  for (absl::string_view dim : absl::StrSplit(text, 'x')) {
    std::vector<std::string> parts = absl::StrSplit(dim, '_');
    std::vector<int64_t> v;
    for (const std::string& part : parts) {
      int64_t x = 0;
      if (!absl::SimpleAtoi(part, &x) || x > kMaxPadding || x < -kMaxPadding) {
        return TokenError("malformed padding");
      }
      v.push_back(x);
    }
    if (v.size() != 2 && v.size() != 3) return TokenError("malformed padding");
    padding->push_back({v[0], v[1], v.size() == 3 ? v[2] : 0});
  }
  lexer_.Next();
  return absl::OkStatus();
}

absl::Status TextParser::ParsePrecisionList(std::vector<std::string>* precisions) {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start operand_precision"));
  if (Eat(TokKind::kRbrace)) return absl::OkStatus();
  do {
    if (!At(TokKind::kIdent)) return TokenError("expected a precision");
    const std::string p = absl::AsciiStrToUpper(lexer_.tok().str);
    if (p != "DEFAULT" && p != "HIGH" && p != "HIGHEST") {
      return TokenError("expected default, high or highest");
    }
    precisions->push_back(p);
    lexer_.Next();
  } while (Eat(TokKind::kComma));
  return Expect(TokKind::kRbrace, "to end operand_precision");
}

absl::Status TextParser::ParseNameList(std::vector<NameRef>* names) {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start a name list"));
  if (Eat(TokKind::kRbrace)) return absl::OkStatus();
  do {
    NameRef ref;
    RETURN_IF_ERROR(ParseName(&ref.name, &ref.loc));
    names->push_back(std::move(ref));
  } while (Eat(TokKind::kComma));
  return Expect(TokKind::kRbrace, "to end a name list");
}

absl::Status TextParser::ParseComputationRef(NameRef* ref) {
  if (At(TokKind::kLbrace)) {
    return Unsupported(Loc(), "inline computations are not supported; name a computation");
  }
  return ParseName(&ref->name, &ref->loc);
}

absl::Status TextParser::SkipValue() {
  int64_t depth = 0;
  do {
    switch (lexer_.kind()) {
      case TokKind::kLbrace:
      case TokKind::kLsquare:
      case TokKind::kLparen:
        ++depth;
        break;
      case TokKind::kRbrace:
      case TokKind::kRsquare:
      case TokKind::kRparen:
        if (depth == 0) return TokenError("expected a value");
        --depth;
        break;
      case TokKind::kEof:
      case TokKind::kError:
        return TokenError("unterminated value");
      case TokKind::kComma:
        if (depth == 0) return TokenError("expected a value");
        break;
      default:
        break;
    }
    lexer_.Next();
  } while (depth > 0);
  return absl::OkStatus();
}

absl::Status TextParser::ParseInstructionAttribute(ParsedInstruction* instr) {
  if (!At(TokKind::kAttrName)) return TokenError("expected an attribute name=");
  const size_t loc = Loc();
  const std::string name = lexer_.tok().str;
  if (!instr->seen_attrs.insert(name).second) {
    return ErrorAt(loc, absl::StrCat("attribute ", name, " given twice"));
  }
  const HloOpcode op = instr->opcode;
  auto only = [&](std::initializer_list<HloOpcode> ops) -> absl::Status {
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
      return ErrorAt(loc, absl::StrCat("attribute ", name, " does not apply to ",
                                       HloOpcodeString(op)));
    }
    lexer_.Next();
    return absl::OkStatus();
  };
  using O = HloOpcode;
  HloAttributes& a = instr->attrs;
  bool handled = false;
  RETURN_IF_ERROR(ParseOpAttribute(name, loc, instr, &handled));
  if (handled) return absl::OkStatus();
  // Generic attributes.
  if (name == "sharding") {
    lexer_.Next();
    instr->sharding.emplace();
    return ParseSharding(&*instr->sharding);
  }
  if (name == "frontend_attributes") {
    lexer_.Next();
    return ParseFrontendAttributes(&instr->frontend_attributes);
  }
  if (name == "metadata") {
    lexer_.Next();
    return ParseMetadata(&instr->metadata);
  }
  if (name == "backend_config") {
    lexer_.Next();
    return ParseStringOrJsonDict(&a.backend_config);
  }
  if (name == "control-predecessors") {
    lexer_.Next();
    return ParseNameList(&instr->control_predecessors);
  }
  if (name == "statistics") {
    lexer_.Next();
    return ParseStatistics(&a.statistics);
  }
  if (name == "result_accuracy") {
    if (!OpcodeTakesResultAccuracy(op)) {
      return ErrorAt(loc, absl::StrCat("attribute result_accuracy does not apply to ",
                                       HloOpcodeString(op)));
    }
    lexer_.Next();
    return ParseResultAccuracy(&a.result_accuracy);
  }
  if (name == "parameter_replication") {
    RETURN_IF_ERROR(only({O::kParameter}));
    RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start parameter_replication"));
    if (!At(TokKind::kRbrace)) {
      do {
        bool b = false;
        RETURN_IF_ERROR(ParseBool(&b));
        a.parameter_replication.push_back(b);
      } while (Eat(TokKind::kComma));
    }
    return Expect(TokKind::kRbrace, "to end parameter_replication");
  }
  if (name == "is_composite") {
    RETURN_IF_ERROR(only({O::kCall}));
    return ParseBool(&a.is_composite);
  }
  // Hints that do not change what is computed: dropped.
  if (name == "inferred_dimension" || name == "mode") {
    lexer_.Next();
    return SkipValue();
  }
  if (name == "async_execution_thread") {
    if (!IsAsyncOpcode(op) && instr->async_sugar == ParsedInstruction::AsyncSugar::kNone) {
      return ErrorAt(loc, absl::StrCat("attribute ", name, " does not apply to ",
                                       HloOpcodeString(op)));
    }
    lexer_.Next();
    RETURN_IF_ERROR(ParseString(&a.async_execution_thread));
    if (a.async_execution_thread == "main") a.async_execution_thread.clear();
    return absl::OkStatus();
  }
  // Opcode-specific attributes.
  if (name == "slice_sizes" &&
      (op == O::kCollectivePermute || op == O::kCollectivePermuteStart)) {
    lexer_.Next();
    return ParseDimListList(&a.permute_slice_sizes);
  }
  if (name == "dimensions") {
    RETURN_IF_ERROR(only({O::kBroadcast, O::kTranspose, O::kReduce, O::kReverse,
                          O::kConcatenate, O::kAllGather, O::kReduceScatter,
                          O::kAllToAll, O::kSort, O::kAllGatherStart, O::kMap,
                          O::kGetDimensionSize, O::kSetDimensionSize}));
    return ParseDimList(&a.dimensions);
  }
  if (name == "iota_dimension") {
    RETURN_IF_ERROR(only({O::kIota}));
    int64_t d = 0;
    RETURN_IF_ERROR(ParseDimValue(&d));
    a.dimensions = {d};
    return absl::OkStatus();
  }
  if (name == "slice") {
    RETURN_IF_ERROR(only({O::kSlice}));
    return ParseSliceRanges(&a.slice);
  }
  if (name == "dynamic_slice_sizes") {
    RETURN_IF_ERROR(only({O::kDynamicSlice}));
    return ParseDimList(&a.dynamic_slice_sizes);
  }
  if (name == "padding") {
    RETURN_IF_ERROR(only({O::kPad}));
    return ParsePadding(&a.padding);
  }
  if (name == "window") {
    RETURN_IF_ERROR(only({O::kReduceWindow, O::kConvolution, O::kSelectAndScatter}));
    return ParseWindow(&a.window);
  }
  if (name == "direction") {
    RETURN_IF_ERROR(only({O::kCompare}));
    if (!At(TokKind::kIdent)) return TokenError("expected a comparison direction");
    auto dir = ParseComparisonDirection(lexer_.tok().str);
    if (!dir.ok()) return TokenError("expected EQ, NE, GE, GT, LE or LT");
    a.comparison_direction = *dir;
    lexer_.Next();
    return absl::OkStatus();
  }
  if (name == "type") {
    RETURN_IF_ERROR(only({O::kCompare}));
    const std::string& t = lexer_.tok().str;
    if (!At(TokKind::kIdent) ||
        (t != "FLOAT" && t != "TOTALORDER" && t != "SIGNED" && t != "UNSIGNED")) {
      return TokenError("expected FLOAT, TOTALORDER, SIGNED or UNSIGNED");
    }
    a.comparison_type = t;
    lexer_.Next();
    return absl::OkStatus();
  }
  if (name == "lhs_contracting_dims" || name == "rhs_contracting_dims" ||
      name == "lhs_batch_dims" || name == "rhs_batch_dims") {
    RETURN_IF_ERROR(only({O::kDot}));
    return ParseDimList(name == "lhs_contracting_dims"   ? &a.dot.lhs_contracting_dimensions
                        : name == "rhs_contracting_dims" ? &a.dot.rhs_contracting_dimensions
                        : name == "lhs_batch_dims"       ? &a.dot.lhs_batch_dimensions
                                                         : &a.dot.rhs_batch_dimensions);
  }
  if (name == "operand_precision") {
    RETURN_IF_ERROR(only({O::kDot, O::kCustomCall, O::kConvolution}));
    return ParsePrecisionList(&a.operand_precision);
  }
  if (name == "offset_dims" || name == "collapsed_slice_dims" || name == "start_index_map" ||
      name == "operand_batching_dims" || name == "start_indices_batching_dims" ||
      name == "slice_sizes") {
    RETURN_IF_ERROR(only({O::kGather}));
    GatherDimensionNumbers& g = a.gather;
    return ParseDimList(name == "offset_dims"            ? &g.offset_dims
                        : name == "collapsed_slice_dims" ? &g.collapsed_slice_dims
                        : name == "start_index_map"      ? &g.start_index_map
                        : name == "operand_batching_dims" ? &g.operand_batching_dims
                        : name == "slice_sizes"          ? &a.gather_slice_sizes
                                                         : &g.start_indices_batching_dims);
  }
  if (name == "update_window_dims" || name == "inserted_window_dims" ||
      name == "scatter_dims_to_operand_dims" || name == "input_batching_dims" ||
      name == "scatter_indices_batching_dims") {
    RETURN_IF_ERROR(only({O::kScatter}));
    ScatterDimensionNumbers& s = a.scatter;
    return ParseDimList(name == "update_window_dims"     ? &s.update_window_dims
                        : name == "inserted_window_dims" ? &s.inserted_window_dims
                        : name == "input_batching_dims"  ? &s.input_batching_dims
                        : name == "scatter_dims_to_operand_dims"
                            ? &s.scatter_dims_to_operand_dims
                            : &s.scatter_indices_batching_dims);
  }
  if (name == "index_vector_dim") {
    RETURN_IF_ERROR(only({O::kGather, O::kScatter}));
    return ParseDimValue(op == O::kGather ? &a.gather.index_vector_dim
                                          : &a.scatter.index_vector_dim);
  }
  if (name == "indices_are_sorted") {
    RETURN_IF_ERROR(only({O::kGather, O::kScatter}));
    return ParseBool(&a.indices_are_sorted);
  }
  if (name == "unique_indices") {
    RETURN_IF_ERROR(only({O::kScatter}));
    return ParseBool(&a.unique_indices);
  }
  if (name == "to_apply") {
    RETURN_IF_ERROR(only({O::kReduce, O::kReduceWindow, O::kAllReduce, O::kReduceScatter,
                          O::kScatter, O::kCall, O::kCustomCall, O::kSort, O::kMap,
                          O::kAllReduceStart}));
    return ParseComputationRef(&instr->to_apply.emplace());
  }
  if (name == "select" || name == "scatter") {
    RETURN_IF_ERROR(only({O::kSelectAndScatter}));
    return ParseComputationRef(name == "select" ? &instr->select.emplace()
                                                : &instr->scatter.emplace());
  }
  if (name == "dim_labels") {
    RETURN_IF_ERROR(only({O::kConvolution}));
    // b01f_01io->b01f. Labels may start with a digit (`->01bf`), which
    // lexes as a number and a name: join the adjacent tokens of each side.
    const size_t labels_loc = Loc();
    auto join = [&](std::string* out) {
      const size_t begin = Loc();
      size_t end = begin;
      while ((At(TokKind::kIdent) || At(TokKind::kInt)) && lexer_.tok().begin == end) {
        absl::StrAppend(out, lexer_.TokenText(lexer_.tok()));
        end = lexer_.tok().end;
        lexer_.Next();
      }
      return end != begin;
    };
    std::string labels;
    if (!join(&labels)) return TokenError("expected dim_labels like b01f_01io->b01f");
    RETURN_IF_ERROR(Expect(TokKind::kArrow, "in dim_labels"));
    labels += "->";
    if (!join(&labels)) return TokenError("expected the output labels of dim_labels");
    auto dnums = ParseConvolutionDimensionNumbers(labels);
    if (!dnums.ok()) return ErrorAt(labels_loc, dnums.status().message());
    a.conv = *std::move(dnums);
    return absl::OkStatus();
  }
  if (name == "feature_group_count" || name == "batch_group_count") {
    RETURN_IF_ERROR(only({O::kConvolution}));
    const size_t v_loc = Loc();
    int64_t* v = name == "feature_group_count" ? &a.feature_group_count : &a.batch_group_count;
    RETURN_IF_ERROR(ParseDimValue(v));
    if (*v < 1) return ErrorAt(v_loc, absl::StrCat(name, " must be >= 1"));
    return absl::OkStatus();
  }
  if (name == "is_stable") {
    RETURN_IF_ERROR(only({O::kSort}));
    return ParseBool(&a.is_stable);
  }
  if (name == "k") {
    RETURN_IF_ERROR(only({O::kTopK}));
    return ParseDimValue(&a.k);
  }
  if (name == "largest") {
    RETURN_IF_ERROR(only({O::kTopK}));
    return ParseBool(&a.largest);
  }
  if (name == "exponent_bits" || name == "mantissa_bits") {
    RETURN_IF_ERROR(only({O::kReducePrecision}));
    const size_t v_loc = Loc();
    int64_t* v = name == "exponent_bits" ? &a.exponent_bits : &a.mantissa_bits;
    RETURN_IF_ERROR(ParseDimValue(v));
    if (*v < 0 || *v > 64) return ErrorAt(v_loc, absl::StrCat(name, " must be in [0, 64]"));
    return absl::OkStatus();
  }
  if (name == "algorithm" && (op == O::kDot || op == O::kConvolution)) {
    lexer_.Next();
    if (!At(TokKind::kIdent)) return TokenError("expected a dot algorithm like dot_bf16_bf16_f32");
    const std::optional<int> alg = DotAlgorithmFromName(lexer_.tok().str);
    if (!alg.has_value()) return TokenError("unknown dot algorithm");
    a.dot_algorithm = *alg;
    lexer_.Next();
    return absl::OkStatus();
  }
  if (name == "index") {
    RETURN_IF_ERROR(only({O::kGetTupleElement}));
    return ParseDimValue(&a.tuple_index);
  }
  if (name == "condition" || name == "body") {
    RETURN_IF_ERROR(only({O::kWhile}));
    return ParseComputationRef(name == "condition" ? &instr->condition.emplace()
                                                   : &instr->body.emplace());
  }
  if (name == "true_computation" || name == "false_computation") {
    RETURN_IF_ERROR(only({O::kConditional}));
    return ParseComputationRef(name == "true_computation"
                                   ? &instr->true_computation.emplace()
                                   : &instr->false_computation.emplace());
  }
  if (name == "branch_computations" || name == "called_computations") {
    RETURN_IF_ERROR(only({name == "branch_computations" ? O::kConditional : O::kCustomCall}));
    if (At(TokKind::kLbrace) && lexer_.PeekNext().kind == TokKind::kLbrace) {
      return Unsupported(Loc(), "inline computations are not supported; name a computation");
    }
    return ParseNameList(name == "branch_computations" ? &instr->branch_computations
                                                       : &instr->called_computations);
  }
  if (name == "calls") {
    RETURN_IF_ERROR(only({O::kFusion, O::kAsyncStart, O::kAsyncUpdate, O::kAsyncDone}));
    return ParseComputationRef(&instr->calls.emplace());
  }
  if (name == "kind") {
    RETURN_IF_ERROR(only({O::kFusion}));
    if (!At(TokKind::kIdent)) return TokenError("expected a fusion kind");
    auto kind = ParseFusionKind(lexer_.tok().str);
    if (!kind.ok()) return TokenError("expected kLoop, kInput, kOutput or kCustom");
    a.fusion_kind = *kind;
    lexer_.Next();
    return absl::OkStatus();
  }
  if (name == "channel_id") {
    RETURN_IF_ERROR(only({O::kAllReduce, O::kAllGather, O::kReduceScatter, O::kAllToAll,
                          O::kCollectivePermute, O::kAllReduceStart, O::kAllGatherStart,
                          O::kCollectivePermuteStart, O::kSend, O::kRecv, O::kSendDone,
                          O::kRecvDone, O::kCollectiveBroadcast, O::kRaggedAllToAll}));
    int64_t id = 0;
    const size_t id_loc = Loc();
    RETURN_IF_ERROR(ParseInt64(&id));
    if (id < 0) return ErrorAt(id_loc, "channel_id must be >= 0");
    a.channel_id = id;
    return absl::OkStatus();
  }
  if (name == "replica_groups") {
    RETURN_IF_ERROR(only({O::kAllReduce, O::kAllGather, O::kReduceScatter, O::kAllToAll,
                          O::kAllReduceStart, O::kAllGatherStart, O::kCollectiveBroadcast,
                          O::kRaggedAllToAll}));
    return ParseReplicaGroups(&a.replica_groups);
  }
  if (name == "use_global_device_ids") {
    RETURN_IF_ERROR(only({O::kAllReduce, O::kAllGather, O::kReduceScatter,
                          O::kAllReduceStart, O::kAllGatherStart}));
    return ParseBool(&a.use_global_device_ids);
  }
  if (name == "constrain_layout") {
    RETURN_IF_ERROR(only({O::kAllReduce, O::kAllGather, O::kReduceScatter, O::kAllToAll}));
    return ParseBool(&a.constrain_layout);
  }
  if (name == "source_target_pairs") {
    RETURN_IF_ERROR(only({O::kCollectivePermute, O::kCollectivePermuteStart}));
    std::vector<std::vector<int64_t>> pairs;
    const size_t pairs_loc = Loc();
    RETURN_IF_ERROR(ParseDimListList(&pairs));
    for (const auto& p : pairs) {
      if (p.size() != 2) return ErrorAt(pairs_loc, "source_target_pairs must be pairs");
      a.source_target_pairs.emplace_back(p[0], p[1]);
    }
    return absl::OkStatus();
  }
  if (name == "cross_program_prefetch_index") {
    RETURN_IF_ERROR(only({O::kCopyStart}));
    int64_t v = 0;
    RETURN_IF_ERROR(ParseDimValue(&v));
    a.cross_program_prefetch_index = v;
    return absl::OkStatus();
  }
  if (name == "is_host_transfer") {
    RETURN_IF_ERROR(only({O::kSend, O::kRecv, O::kSendDone, O::kRecvDone}));
    return ParseBool(&a.is_host_transfer);
  }
  if (name == "custom_call_target") {
    RETURN_IF_ERROR(only({O::kCustomCall}));
    return ParseString(&a.custom_call_target);
  }
  if (name == "custom_call_has_side_effect") {
    RETURN_IF_ERROR(only({O::kCustomCall}));
    return ParseBool(&a.custom_call_has_side_effect);
  }
  if (name == "api_version") {
    RETURN_IF_ERROR(only({O::kCustomCall}));
    for (int v = 1; v < 5; ++v) {
      if (AtIdent(kCustomCallApiVersions[v])) {
        a.custom_call_api_version = v;
        lexer_.Next();
        return absl::OkStatus();
      }
    }
    return TokenError("expected a custom-call API_VERSION_...");
  }
  return Unsupported(loc, absl::StrCat("attribute ", name, " of ", HloOpcodeString(op),
                                       " is not supported"));
}

absl::Status TextParser::CheckRequiredAttributes(const ParsedInstruction& instr) const {
  using O = HloOpcode;
  std::vector<absl::string_view> required;
  switch (instr.opcode) {
    case O::kIota: required = {"iota_dimension"}; break;
    case O::kTranspose:
    case O::kReverse:
    case O::kConcatenate:
    case O::kAllGather: required = {"dimensions"}; break;
    case O::kReduce: required = {"dimensions", "to_apply"}; break;
    // XLA omits window={} for a rank-0 reduce-window (shape inference
    // rejects a missing window at higher ranks).
    case O::kReduceWindow: required = {"to_apply"}; break;
    case O::kSlice: required = {"slice"}; break;
    case O::kDynamicSlice: required = {"dynamic_slice_sizes"}; break;
    case O::kPad: required = {"padding"}; break;
    case O::kCompare: required = {"direction"}; break;
    case O::kGather:
      required = {"offset_dims", "collapsed_slice_dims", "start_index_map",
                  "index_vector_dim", "slice_sizes"};
      break;
    case O::kScatter:
      required = {"update_window_dims", "inserted_window_dims",
                  "scatter_dims_to_operand_dims", "index_vector_dim", "to_apply"};
      break;
    case O::kGetTupleElement: required = {"index"}; break;
    case O::kWhile: required = {"condition", "body"}; break;
    case O::kFusion: required = {"calls", "kind"}; break;
    case O::kCall:
    case O::kAllReduce: required = {"to_apply"}; break;
    case O::kReduceScatter: required = {"dimensions", "to_apply"}; break;
    case O::kCollectivePermute: required = {"source_target_pairs"}; break;
    case O::kCustomCall: required = {"custom_call_target"}; break;
    case O::kConvolution: required = {"dim_labels"}; break;
    case O::kSort: required = {"dimensions", "to_apply"}; break;
    case O::kTopK: required = {"k"}; break;
    case O::kSelectAndScatter: required = {"window", "select", "scatter"}; break;
    case O::kReducePrecision: required = {"exponent_bits", "mantissa_bits"}; break;
    case O::kFft: required = {"fft_type", "fft_length"}; break;
    case O::kRngBitGenerator: required = {"algorithm"}; break;
    case O::kRngGetAndUpdateState: required = {"delta"}; break;
    case O::kBatchNormTraining:
    case O::kBatchNormInference:
    case O::kBatchNormGrad: required = {"epsilon", "feature_index"}; break;
    case O::kRng: required = {"distribution"}; break;
    case O::kGetDimensionSize:
    case O::kSetDimensionSize: required = {"dimensions"}; break;
    case O::kDomain: required = {"domain"}; break;
    case O::kAsyncStart: required = {"calls"}; break;
    default: break;
  }
  for (absl::string_view r : required) {
    if (!instr.seen_attrs.count(std::string(r))) {
      return ErrorAt(instr.opcode_loc, absl::StrCat(HloOpcodeString(instr.opcode),
                                                    " requires attribute ", r));
    }
  }
  if (instr.seen_attrs.count("to_apply") && instr.seen_attrs.count("called_computations")) {
    return ErrorAt(instr.opcode_loc, "to_apply and called_computations are exclusive");
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::hlo::text_internal
