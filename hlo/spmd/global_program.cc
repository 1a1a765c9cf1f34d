#include "hlo/spmd/global_program.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo {
namespace {

using Mesh = std::vector<std::pair<std::string, int64_t>>;  // axis name, size

// Which tile of a value each device holds: counts[d] tiles along dimension d,
// coords[device][d] the device's tile index.
struct TileMap {
  std::vector<int64_t> counts;
  std::vector<std::vector<int64_t>> coords;
};

absl::Status Unsupported(const HloInstruction& x, absl::string_view why) {
  return absl::UnimplementedError(
      absl::StrCat("global program: %", x.name(), " (", x.attrs().custom_call_target, "): ", why));
}

// ---- Shardy attribute text ----------------------------------------------------

// A tiny scanner over Shardy's attribute syntax.
class Scan {
 public:
  explicit Scan(absl::string_view s) : s_(s) {}
  void Ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n')) ++p_;
  }
  bool Eat(absl::string_view t) {
    Ws();
    if (s_.substr(p_, t.size()) != t) return false;
    p_ += t.size();
    return true;
  }
  bool Peek(char c) {
    Ws();
    return p_ < s_.size() && s_[p_] == c;
  }
  // "name" (quotes possibly backslash-escaped).
  bool Quoted(std::string* out) {
    Ws();
    Eat("\\");
    if (!Eat("\"")) return false;
    const size_t end = s_.find('"', p_);
    if (end == absl::string_view::npos) return false;
    std::string v(s_.substr(p_, end - p_));
    if (!v.empty() && v.back() == '\\') v.pop_back();
    *out = v;
    p_ = end + 1;
    return true;
  }
  bool Int(int64_t* v) {
    Ws();
    size_t e = p_;
    while (e < s_.size() && (isdigit(static_cast<unsigned char>(s_[e])) || s_[e] == '-')) ++e;
    if (!absl::SimpleAtoi(s_.substr(p_, e - p_), v)) return false;
    p_ = e;
    return true;
  }
  bool Ident(std::string* out) {
    Ws();
    size_t e = p_;
    while (e < s_.size() && (isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
    if (e == p_) return false;
    *out = std::string(s_.substr(p_, e - p_));
    p_ = e;
    return true;
  }
  size_t pos() const { return p_; }

 private:
  absl::string_view s_;
  size_t p_ = 0;
};

// xla.sdy.meshes = {mesh = #sdy.mesh<["x"=8, "y"=2]>, ...}
absl::StatusOr<std::map<std::string, Mesh>> ParseMeshes(absl::string_view text) {
  std::map<std::string, Mesh> meshes;
  Scan sc(text);
  sc.Eat("{");
  while (!sc.Eat("}")) {
    std::string name;
    if (!sc.Ident(&name) || !sc.Eat("=") || !sc.Eat("#sdy.mesh<")) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read xla.sdy.meshes '", text, "'"));
    }
    Mesh mesh;
    if (sc.Eat("[")) {
      while (!sc.Eat("]")) {
        std::string axis;
        int64_t size = 0;
        if (!sc.Quoted(&axis) || !sc.Eat("=") || !sc.Int(&size) || size < 1) {
          return absl::InvalidArgumentError(absl::StrCat("cannot read mesh ", name));
        }
        mesh.emplace_back(axis, size);
        sc.Eat(",");
      }
    }
    if (sc.Eat(",") && sc.Eat("device_ids")) {
      // A maximal mesh (no axes, one device: what jax gives host callbacks)
      // is a mesh of one; a device order over axes is not supported.
      int64_t id = 0;
      if (!mesh.empty() || !sc.Eat("=") || !sc.Eat("[") || !sc.Int(&id) || !sc.Eat("]")) {
        return absl::UnimplementedError(
            absl::StrCat("mesh ", name, " has an explicit device order (device_ids)"));
      }
    }
    if (!sc.Eat(">")) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read mesh ", name));
    }
    meshes[name] = std::move(mesh);
    sc.Eat(",");
  }
  return meshes;
}

struct SdySharding {
  std::string mesh;
  std::vector<std::vector<std::string>> dims;  // axes per dimension, major first
};

// #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, ...]>  (or one #sdy.sharding<...>)
absl::StatusOr<std::vector<SdySharding>> ParseShardings(absl::string_view text) {
  std::vector<SdySharding> out;
  Scan sc(text);
  const bool per_value = sc.Eat("#sdy.sharding_per_value<[");
  if (!per_value && !sc.Eat("#sdy.sharding")) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read sharding '", text, "'"));
  }
  while (true) {
    if (per_value && sc.Eat("]>")) break;
    SdySharding s;
    if (!sc.Eat("<") || !sc.Eat("@") || !sc.Ident(&s.mesh) || !sc.Eat(",") || !sc.Eat("[")) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read sharding '", text, "'"));
    }
    while (!sc.Eat("]")) {
      if (!sc.Eat("{")) return absl::InvalidArgumentError("cannot read a dimension sharding");
      std::vector<std::string> axes;
      while (!sc.Eat("}")) {
        if (sc.Eat("?")) continue;  // an open dimension ({?}, {"x", ?})
        std::string axis;
        if (!sc.Quoted(&axis)) {
          return absl::InvalidArgumentError(
              absl::StrCat("cannot read an axis name in '", text, "'"));
        }
        if (sc.Peek(':')) {
          return absl::UnimplementedError(absl::StrCat("sub-axis of \"", axis, "\""));
        }
        axes.push_back(axis);
        sc.Eat(",");
        sc.Eat("?");
      }
      sc.Eat("?");
      s.dims.push_back(std::move(axes));
      sc.Eat(",");
    }
    // replicated={...} / unreduced={...}: no tiling.
    int depth = 0;
    while (true) {
      if (sc.Eat("{")) {
        ++depth;
      } else if (sc.Eat("}")) {
        --depth;
      } else if (depth == 0 && sc.Eat(">")) {
        break;
      } else {
        std::string skip;
        if (!sc.Eat(",") && !sc.Eat("=") && !sc.Quoted(&skip) && !sc.Ident(&skip)) {
          return absl::InvalidArgumentError(absl::StrCat("cannot read sharding '", text, "'"));
        }
      }
    }
    out.push_back(std::move(s));
    if (!per_value) break;
    sc.Eat(",");
  }
  return out;
}

std::vector<std::string> ParseManualAxes(absl::string_view text) {
  std::vector<std::string> axes;
  const size_t open = text.find('{');
  if (open == absl::string_view::npos) return axes;
  Scan sc(text.substr(open + 1));
  std::string a;
  while (sc.Quoted(&a)) {
    axes.push_back(a);
    sc.Eat(",");
  }
  return axes;
}

// Tiles of a value sharded as `s` over the manual axes of `mesh`.
TileMap TilesFromSdy(const Mesh& mesh, const SdySharding& s,
                     const std::vector<std::string>& manual) {
  int64_t n = 1;
  for (const auto& a : mesh) n *= a.second;
  TileMap t;
  t.counts.assign(s.dims.size(), 1);
  t.coords.assign(n, std::vector<int64_t>(s.dims.size(), 0));
  for (int64_t dev = 0; dev < n; ++dev) {
    // Row-major mesh coordinates of the device.
    std::map<std::string, int64_t> coord;
    int64_t rest = dev;
    for (int64_t i = static_cast<int64_t>(mesh.size()) - 1; i >= 0; --i) {
      coord[mesh[i].first] = rest % mesh[i].second;
      rest /= mesh[i].second;
    }
    for (size_t d = 0; d < s.dims.size(); ++d) {
      int64_t index = 0, count = 1;
      for (const std::string& axis : s.dims[d]) {
        if (std::find(manual.begin(), manual.end(), axis) == manual.end()) continue;
        int64_t size = 1;
        for (const auto& a : mesh) {
          if (a.first == axis) size = a.second;
        }
        index = index * size + coord[axis];
        count *= size;
      }
      t.coords[dev][d] = index;
      t.counts[d] = count;
    }
  }
  return t;
}

// Tiles of a GSPMD sharding (tiled or replicated) of a rank-`rank` value.
absl::StatusOr<TileMap> TilesFromSharding(const HloSharding& s, int64_t rank, int64_t n) {
  TileMap t;
  t.counts.assign(rank, 1);
  t.coords.assign(n, std::vector<int64_t>(rank, 0));
  if (s.type == HloSharding::Type::kReplicated) return t;
  if (s.type != HloSharding::Type::kTiled ||
      static_cast<int64_t>(s.tile_assignment_dims.size()) < rank) {
    return absl::UnimplementedError("only tiled or replicated shardings can be split");
  }
  for (int64_t d = 0; d < rank; ++d) t.counts[d] = s.tile_assignment_dims[d];
  const int64_t k = static_cast<int64_t>(s.tile_assignment_dims.size());
  for (int64_t pos = 0; pos < static_cast<int64_t>(s.devices.size()); ++pos) {
    const int64_t dev = s.devices[pos];
    if (dev < 0 || dev >= n) return absl::InvalidArgumentError("sharding device out of range");
    int64_t rest = pos;
    std::vector<int64_t> idx(k);
    for (int64_t i = k - 1; i >= 0; --i) {
      idx[i] = rest % s.tile_assignment_dims[i];
      rest /= s.tile_assignment_dims[i];
    }
    for (int64_t d = 0; d < rank; ++d) t.coords[dev][d] = idx[d];
  }
  return t;
}

// ---- Rewrites -------------------------------------------------------------------

class Rewriter {
 public:
  Rewriter(HloComputation* comp, int64_t num_devices) : comp_(comp), n_(num_devices) {}

  HloInstruction* Add(HloOpcode op, Shape shape, std::vector<HloInstruction*> operands,
                      HloAttributes attrs = {}) {
    auto instr = HloInstruction::Create(op, std::move(shape), std::move(operands),
                                        std::move(attrs));
    instr->set_name(absl::StrCat("tpuoff_global.", counter_++));
    HloInstruction* root = comp_->root();
    HloInstruction* raw = comp_->AddInstruction(std::move(instr));
    comp_->set_root(root);
    return raw;
  }

  HloInstruction* Constant(Literal lit) {
    auto instr = HloInstruction::CreateConstant(std::move(lit));
    instr->set_name(absl::StrCat("tpuoff_global.", counter_++));
    HloInstruction* root = comp_->root();
    HloInstruction* raw = comp_->AddInstruction(std::move(instr));
    comp_->set_root(root);
    return raw;
  }

  HloInstruction* DeviceIndex() {
    if (pid_ == nullptr) {
      HloInstruction* pid = Add(HloOpcode::kPartitionId, Shape::Scalar(PrimitiveType::kU32), {});
      pid_ = Add(HloOpcode::kConvert, Shape::Scalar(PrimitiveType::kS32), {pid});
    }
    return pid_;
  }

  // table[device] as an s32 scalar for the running device.
  HloInstruction* Lookup(const std::vector<int64_t>& table) {
    Literal lit(Shape(PrimitiveType::kS32, {n_}));
    for (int64_t i = 0; i < n_; ++i) lit.SetFromInt64(i, table[i]);
    HloInstruction* c = Constant(std::move(lit));
    HloAttributes a;
    a.dynamic_slice_sizes = {1};
    HloInstruction* ds =
        Add(HloOpcode::kDynamicSlice, Shape(PrimitiveType::kS32, {1}), {c, DeviceIndex()}, a);
    return Add(HloOpcode::kReshape, Shape::Scalar(PrimitiveType::kS32), {ds});
  }

  // The running device's tile of `x`.
  absl::StatusOr<HloInstruction*> Slice(HloInstruction* x, const TileMap& t) {
    const Shape& g = x->shape();
    std::vector<int64_t> local = g.dimensions();
    std::vector<HloInstruction*> operands = {x};
    for (int64_t d = 0; d < g.rank(); ++d) {
      if (g.dimensions(d) % t.counts[d] != 0) {
        return absl::UnimplementedError(absl::StrCat("dimension ", d, " of ", g.ToString(),
                                                     " does not split evenly into ", t.counts[d]));
      }
      local[d] = g.dimensions(d) / t.counts[d];
      std::vector<int64_t> offsets(n_);
      for (int64_t dev = 0; dev < n_; ++dev) offsets[dev] = t.coords[dev][d] * local[d];
      operands.push_back(Lookup(offsets));
    }
    HloAttributes a;
    a.dynamic_slice_sizes = local;
    return Add(HloOpcode::kDynamicSlice, Shape(g.element_type(), local), operands, a);
  }

  // The global array of shape `global` from every device's tile `y`.
  absl::StatusOr<HloInstruction*> Assemble(HloInstruction* y, const Shape& global,
                                           const TileMap& t) {
    const Shape& l = y->shape();
    const int64_t r = l.rank();
    std::vector<int64_t> one = {1};
    one.insert(one.end(), l.dimensions().begin(), l.dimensions().end());
    HloInstruction* y1 = Add(HloOpcode::kReshape, Shape(l.element_type(), one), {y});
    std::vector<int64_t> all = one;
    all[0] = n_;
    HloAttributes ga;
    ga.dimensions = {0};
    ga.channel_id = 0x7fff0000 + counter_;
    ga.use_global_device_ids = true;
    std::vector<int64_t> group(n_);
    for (int64_t i = 0; i < n_; ++i) group[i] = i;
    ga.replica_groups.groups = {group};
    HloInstruction* gathered = Add(HloOpcode::kAllGather, Shape(l.element_type(), all), {y1}, ga);
    // Tiles in row-major tile order, each from a device holding it.
    int64_t tiles = 1;
    for (int64_t c : t.counts) tiles *= c;
    std::vector<HloInstruction*> pieces;
    std::vector<int64_t> tile(r, 0);
    for (int64_t i = 0; i < tiles; ++i) {
      int64_t dev = -1;
      for (int64_t d = 0; d < n_ && dev < 0; ++d) {
        if (t.coords[d] == tile) dev = d;
      }
      if (dev < 0) return absl::InvalidArgumentError("a tile is held by no device");
      HloAttributes sa;
      sa.slice.push_back({dev, dev + 1, 1});
      for (int64_t d = 0; d < r; ++d) sa.slice.push_back({0, l.dimensions(d), 1});
      pieces.push_back(Add(HloOpcode::kSlice, Shape(l.element_type(), one), {gathered}, sa));
      for (int64_t d = r - 1; d >= 0; --d) {
        if (++tile[d] < t.counts[d]) break;
        tile[d] = 0;
      }
    }
    std::vector<int64_t> stacked = one;
    stacked[0] = tiles;
    HloAttributes ca;
    ca.dimensions = {0};
    HloInstruction* cat = pieces.size() == 1
                              ? pieces[0]
                              : Add(HloOpcode::kConcatenate, Shape(l.element_type(), stacked),
                                    pieces, ca);
    std::vector<int64_t> split = t.counts;
    split.insert(split.end(), l.dimensions().begin(), l.dimensions().end());
    HloInstruction* s = Add(HloOpcode::kReshape, Shape(l.element_type(), split), {cat});
    HloAttributes ta;
    std::vector<int64_t> inter;
    for (int64_t d = 0; d < r; ++d) {
      ta.dimensions.push_back(d);
      ta.dimensions.push_back(r + d);
      inter.push_back(t.counts[d]);
      inter.push_back(l.dimensions(d));
    }
    HloInstruction* tr = Add(HloOpcode::kTranspose, Shape(l.element_type(), inter), {s}, ta);
    return Add(HloOpcode::kReshape, Shape(l.element_type(), global.dimensions()), {tr});
  }

 private:
  HloComputation* comp_;
  int64_t n_;
  HloInstruction* pid_ = nullptr;
  int64_t counter_ = 0;
};

bool IsMarker(const HloInstruction& x, absl::string_view target) {
  return x.opcode() == HloOpcode::kCustomCall && x.attrs().custom_call_target == target;
}

std::string Attr(const HloInstruction& x, const std::string& key) {
  auto it = x.frontend_attributes().find(key);
  return it == x.frontend_attributes().end() ? "" : it->second;
}

}  // namespace

bool IsGlobalProgram(const HloModule& module) {
  if (module.frontend_attributes().count("xla.sdy.meshes")) return true;
  for (const auto& comp : module.computations()) {
    for (const auto& x : comp->instructions()) {
      if (x->opcode() != HloOpcode::kCustomCall) continue;
      const std::string& t = x->attrs().custom_call_target;
      if (t == "Sharding" || t == "SPMDFullToShardShape" || t == "SPMDShardToFullShape" ||
          absl::StartsWith(t, "xla.sdy.")) {
        return true;
      }
    }
  }
  return false;
}

absl::Status LowerGlobalProgram(HloModule* module) {
  std::map<std::string, Mesh> meshes;
  if (auto it = module->frontend_attributes().find("xla.sdy.meshes");
      it != module->frontend_attributes().end()) {
    ASSIGN_OR_RETURN(meshes, ParseMeshes(it->second));
  }
  // The mesh size: Shardy's mesh, else the module's partitions, else the
  // largest device a sharding names.
  int64_t n = std::max<int64_t>(module->num_partitions(), 1);
  for (const auto& [name, mesh] : meshes) {
    int64_t size = 1;
    for (const auto& a : mesh) size *= a.second;
    n = std::max(n, size);
  }
  bool manual = false;
  for (const auto& comp : module->computations()) {
    std::vector<HloInstruction*> markers;
    for (const auto& x : comp->instructions()) {
      if (x->opcode() != HloOpcode::kCustomCall || IsPassThrough(*x)) continue;
      const std::string& t = x->attrs().custom_call_target;
      if (t == "SPMDFullToShardShape" || t == "SPMDShardToFullShape" ||
          absl::StartsWith(t, "xla.sdy.")) {
        markers.push_back(x.get());
      }
      if (x->sharding().has_value() && x->sharding()->type == HloSharding::Type::kTiled) {
        for (int64_t d : x->sharding()->devices) n = std::max(n, d + 1);
      }
    }
    if (markers.empty()) continue;
    manual = true;
    Rewriter rw(comp.get(), n);
    for (HloInstruction* x : markers) {
      const std::string& t = x->attrs().custom_call_target;
      std::vector<HloInstruction*> results;
      if (t == "xla.sdy.GlobalToLocalShape" || t == "xla.sdy.LocalToGlobalShape") {
        const bool to_local = t == "xla.sdy.GlobalToLocalShape";
        auto shardings = ParseShardings(Attr(*x, to_local ? "xla.sdy.in_shardings"
                                                          : "xla.sdy.out_shardings"));
        if (!shardings.ok()) return Unsupported(*x, shardings.status().message());
        const std::vector<std::string> manual_axes = ParseManualAxes(Attr(*x, "xla.sdy.manual_axes"));
        if (static_cast<int64_t>(shardings->size()) != x->operand_count()) {
          return Unsupported(*x, "one sharding per operand expected");
        }
        for (int64_t i = 0; i < x->operand_count(); ++i) {
          const SdySharding& s = (*shardings)[i];
          auto mesh = meshes.find(s.mesh);
          if (mesh == meshes.end()) return Unsupported(*x, absl::StrCat("unknown mesh ", s.mesh));
          HloInstruction* operand = x->operand(i);
          if (!operand->shape().IsArray() ||
              static_cast<int64_t>(s.dims.size()) != operand->shape().rank()) {
            return Unsupported(*x, "sharding rank differs from the operand's");
          }
          const TileMap tiles = TilesFromSdy(mesh->second, s, manual_axes);
          const Shape& result = x->shape().IsTuple() ? x->shape().tuple_shapes(i) : x->shape();
          absl::StatusOr<HloInstruction*> r =
              to_local ? rw.Slice(operand, tiles) : rw.Assemble(operand, result, tiles);
          if (!r.ok()) return Unsupported(*x, r.status().message());
          results.push_back(*r);
        }
      } else if (t == "SPMDFullToShardShape" || t == "SPMDShardToFullShape") {
        const bool to_local = t == "SPMDFullToShardShape";
        const HloInstruction* holder = to_local ? x->operand(0) : x;
        if (!holder->sharding().has_value()) return Unsupported(*x, "no tiled sharding to follow");
        auto tiles = TilesFromSharding(*holder->sharding(), x->operand(0)->shape().rank(), n);
        if (!tiles.ok()) return Unsupported(*x, tiles.status().message());
        absl::StatusOr<HloInstruction*> r = to_local ? rw.Slice(x->operand(0), *tiles)
                                                     : rw.Assemble(x->operand(0), x->shape(), *tiles);
        if (!r.ok()) return Unsupported(*x, r.status().message());
        results.push_back(*r);
      } else {
        return Unsupported(*x, "this Shardy marker changes the shape and is not supported");
      }
      HloInstruction* replacement = results[0];
      if (x->shape().IsTuple()) {
        std::vector<Shape> shapes;
        for (HloInstruction* r : results) shapes.push_back(r->shape());
        replacement = rw.Add(HloOpcode::kTuple, Shape::Tuple(shapes), results);
      }
      comp->ReplaceAllUsesWith(x, replacement);
    }
    comp->SortTopologically();
    comp->RemoveDeadInstructions();
  }
  // Inputs and outputs are global arrays: replicated over the mesh when
  // manual regions need the devices, else one device runs everything.
  HloComputation* entry = module->entry();
  for (const auto& comp : module->computations()) {
    for (const auto& x : comp->instructions()) {
      if (x->opcode() == HloOpcode::kCustomCall || x->opcode() == HloOpcode::kParameter ||
          x.get() == comp->root()) {
        x->set_sharding(std::nullopt);
      }
    }
  }
  if (!manual) {
    module->set_num_partitions(1);
    return absl::OkStatus();
  }
  module->set_num_partitions(n);
  for (HloInstruction* p : entry->parameters()) p->set_sharding(HloSharding::Replicated());
  HloSharding root = HloSharding::Replicated();
  if (entry->root()->shape().IsTuple()) {
    root.type = HloSharding::Type::kTuple;
    for (int64_t i = 0; i < entry->root()->shape().tuple_size(); ++i) {
      root.tuple_shardings.push_back(HloSharding::Replicated());
    }
  }
  entry->root()->set_sharding(root);
  return absl::OkStatus();
}

}  // namespace tpuoff::hlo
