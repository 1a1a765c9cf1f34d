#include "hlo/analysis/tpu_model.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo {
namespace {

std::vector<std::vector<int64_t>> GroupsOf(const HloInstruction& x, int64_t num_devices) {
  std::vector<std::vector<int64_t>> groups = x.attrs().replica_groups.groups;
  if (groups.empty()) {
    std::vector<int64_t> all(num_devices);
    for (int64_t i = 0; i < num_devices; ++i) all[i] = i;
    groups.push_back(std::move(all));
  }
  return groups;
}

double ArrayBytes(const Shape& s) { return static_cast<double>(s.total_leaf_bytes()); }

}  // namespace

const char* BoundName(Bound b) {
  switch (b) {
    case Bound::kCompute: return "compute";
    case Bound::kMemory: return "memory";
    case Bound::kCollective: return "collective";
    case Bound::kNone: return "none";
  }
  return "none";
}

absl::StatusOr<IciTopology> IciTopology::V6eSlice(int64_t num_devices) {
  static const int64_t kShapes[][2] = {{1, 1}, {2, 2}, {2, 4},  {4, 4},
                                       {4, 8}, {8, 8}, {8, 16}, {16, 16}};
  for (const auto& s : kShapes) {
    if (s[0] * s[1] >= num_devices) {
      IciTopology t;
      t.dims = {s[0], s[1]};
      t.wraparound = {s[0] == 16, s[1] == 16};
      return t;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      num_devices, " devices do not fit one v6e slice (at most 256 chips, 16x16); "
      "give the topology explicitly (tpuoff cost --topology=AxB)"));
}

absl::StatusOr<IciTopology> IciTopology::Parse(absl::string_view text) {
  absl::string_view dims_text = text;
  std::string mode = "v6e";
  if (const size_t colon = text.find(':'); colon != absl::string_view::npos) {
    dims_text = text.substr(0, colon);
    mode = std::string(text.substr(colon + 1));
    if (mode != "torus" && mode != "mesh") {
      return absl::InvalidArgumentError(absl::StrCat(
          "topology '", text, "': expected AxB, AxB:torus or AxB:mesh"));
    }
  }
  IciTopology t;
  for (absl::string_view part : absl::StrSplit(dims_text, 'x')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d < 1 || d > 4096) {
      return absl::InvalidArgumentError(absl::StrCat(
          "topology '", text, "': each axis must be an integer in [1, 4096]"));
    }
    t.dims.push_back(d);
    t.wraparound.push_back(mode == "torus" || (mode == "v6e" && d == 16));
  }
  if (t.dims.empty() || t.dims.size() > 3 || t.num_chips() > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology '", text, "': 1 to 3 axes, at most 65536 chips"));
  }
  return t;
}

int64_t IciTopology::num_chips() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> IciTopology::Coords(int64_t device) const {
  int64_t chip = device;
  if (device >= 0 && device < static_cast<int64_t>(chip_of_device.size())) {
    chip = chip_of_device[device];
  }
  std::vector<int64_t> c(dims.size());
  for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0; --i) {
    c[i] = chip % dims[i];
    chip /= dims[i];
  }
  return c;
}

int64_t IciTopology::Hops(int64_t a, int64_t b) const {
  const std::vector<int64_t> ca = Coords(a);
  const std::vector<int64_t> cb = Coords(b);
  int64_t hops = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = std::abs(ca[i] - cb[i]);
    hops += wraparound[i] ? std::min(d, dims[i] - d) : d;
  }
  return hops;
}

std::string IciTopology::ToString() const {
  bool all = true;
  bool any = false;
  for (bool w : wraparound) {
    all = all && w;
    any = any || w;
  }
  const std::string shape = absl::StrJoin(dims, "x");
  if (all && any) return shape + " torus";
  if (!any) return shape + " (no wraparound)";
  std::vector<std::string> wrapped;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (wraparound[i]) wrapped.push_back(absl::StrCat(i));
  }
  return absl::StrCat(shape, " (wraparound on axis ", absl::StrJoin(wrapped, ","), ")");
}

absl::StatusOr<CollectiveEstimate> EstimateCollective(const HloInstruction& x, int64_t device,
                                                      int64_t num_devices,
                                                      const IciTopology& topology,
                                                      const TpuChipSpec& chip) {
  CollectiveEstimate e;
  if (num_devices > topology.num_chips()) {
    return absl::InvalidArgumentError(absl::StrCat(
        x.name(), ": ", num_devices, " devices on a ", topology.ToString(), " topology of ",
        topology.num_chips(), " chips"));
  }
  const double link = chip.ici_link_bytes_per_s;
  const double hop = chip.ici_hop_latency_s;
  if (x.opcode() == HloOpcode::kCollectivePermute) {
    const double bytes = ArrayBytes(x.operand(0)->shape());
    int64_t longest = 0;
    bool involved = false;
    for (const auto& [s, t] : x.attrs().source_target_pairs) {
      if (s != device && t != device) continue;
      if (s < 0 || t < 0 || s >= num_devices || t >= num_devices) {
        return absl::InvalidArgumentError(
            absl::StrCat(x.name(), ": pair {", s, ",", t, "} outside ", num_devices, " devices"));
      }
      involved = true;
      longest = std::max(longest, topology.Hops(s, t));
    }
    e.algorithm = "point-to-point over the shortest ICI path";
    if (!involved || longest == 0) return e;
    e.group_size = 2;
    e.bytes_per_s = link;
    e.seconds = bytes / link + static_cast<double>(longest) * hop;
    return e;
  }
  // The replica group holding `device`.
  std::vector<int64_t> group;
  for (const std::vector<int64_t>& g : GroupsOf(x, num_devices)) {
    if (std::find(g.begin(), g.end(), device) != g.end()) group = g;
  }
  for (int64_t d : group) {
    if (d < 0 || d >= num_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat(x.name(), ": replica group names device ", d, " of ", num_devices));
    }
  }
  const int64_t w = static_cast<int64_t>(group.size());
  e.group_size = std::max<int64_t>(w, 1);
  if (w <= 1) {
    e.algorithm = "single device (no communication)";
    return e;
  }
  // The axes the group spans and the links it may use on each.
  const size_t rank = topology.dims.size();
  std::vector<std::set<int64_t>> values(rank);
  for (int64_t d : group) {
    const std::vector<int64_t> c = topology.Coords(d);
    for (size_t i = 0; i < rank; ++i) values[i].insert(c[i]);
  }
  double bandwidth = 0;
  int64_t ring_hops = 0;
  int axes = 0;
  bool all_wrap = true;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t n = static_cast<int64_t>(values[i].size());
    if (n <= 1) continue;
    ++axes;
    const bool wrap = topology.wraparound[i] && n == topology.dims[i];
    all_wrap = all_wrap && wrap;
    bandwidth += link * (wrap ? 2 : 1);
    ring_hops += wrap ? n / 2 : n - 1;
  }
  // A group that is not a sub-grid of the slice (e.g. partitions 0 and 4 of
  // a 2x4 mesh on jax's ring order sit on chips 0 and 7) still has to cross
  // its diameter.
  if (w <= 64) {
    for (size_t a = 0; a < group.size(); ++a) {
      for (size_t b = a + 1; b < group.size(); ++b) {
        ring_hops = std::max(ring_hops, topology.Hops(group[a], group[b]));
      }
    }
  }
  e.bytes_per_s = bandwidth;
  const double frac = static_cast<double>(w - 1) / static_cast<double>(w);
  const std::string where = absl::StrCat(w, " chips over ", axes, " ICI ax", axes == 1 ? "is" : "es",
                                         all_wrap ? " (wraparound)" : " (no wraparound)");
  switch (x.opcode()) {
    case HloOpcode::kAllReduce: {
      const double v = ArrayBytes(x.shape());
      e.seconds = 2 * frac * v / bandwidth + 2 * static_cast<double>(ring_hops) * hop;
      e.algorithm = "ring all-reduce (reduce-scatter + all-gather), " + where;
      return e;
    }
    case HloOpcode::kAllGather:
      e.seconds = frac * ArrayBytes(x.shape()) / bandwidth + static_cast<double>(ring_hops) * hop;
      e.algorithm = "ring all-gather, " + where;
      return e;
    case HloOpcode::kReduceScatter:
      e.seconds = frac * ArrayBytes(x.operand(0)->shape()) / bandwidth +
                  static_cast<double>(ring_hops) * hop;
      e.algorithm = "ring reduce-scatter, " + where;
      return e;
    case HloOpcode::kAllToAll: {
      double per_device = 0;
      for (const HloInstruction* o : x.operands()) per_device += ArrayBytes(o->shape());
      const double gather = frac * per_device * static_cast<double>(w) / bandwidth;
      e.seconds = gather * (all_wrap ? 0.25 : 0.5) + static_cast<double>(ring_hops) * hop;
      e.algorithm = "all-to-all (" + std::string(all_wrap ? "1/4" : "1/2") +
                    " of an all-gather), " + where;
      return e;
    }
    default:
      return absl::UnimplementedError(
          absl::StrCat(x.name(), ": no collective cost for ", HloOpcodeString(x.opcode())));
  }
}

int64_t ModuleDeviceCount(const HloModule& module) {
  int64_t n = std::max<int64_t>(1, module.num_partitions() * module.replica_count());
  for (const auto& c : module.computations()) {
    for (const auto& x : c->instructions()) {
      if (!IsCollective(x->opcode())) continue;
      for (const std::vector<int64_t>& g : x->attrs().replica_groups.groups) {
        for (int64_t d : g) n = std::max(n, d + 1);
      }
      for (const auto& [a, b] : x->attrs().source_target_pairs) n = std::max({n, a + 1, b + 1});
    }
  }
  return n;
}

OpTime RooflineTime(const OpCost& op, const TpuChipSpec& chip) {
  OpTime t;
  const double mxu = op.mxu_flops * op.mxu_passes / chip.bf16_flops_per_s;
  const double vpu = std::max(0.0, op.flops - op.mxu_flops) / chip.vpu_ops_per_s;
  const double eup = std::max(0.0, op.transcendentals) / chip.transcendentals_per_s;
  t.compute_s = std::max({mxu, vpu, eup});
  t.memory_s = std::max(0.0, op.bytes_accessed()) / chip.hbm_bytes_per_s;
  t.seconds = op.executions * std::max(t.compute_s, t.memory_s);
  t.compute_s *= op.executions;
  t.memory_s *= op.executions;
  if (t.seconds > 0) t.bound = t.compute_s >= t.memory_s ? Bound::kCompute : Bound::kMemory;
  return t;
}

absl::StatusOr<ModulePrediction> PredictModule(const ModuleCost& cost, int64_t num_devices,
                                               const IciTopology& topology,
                                               const TpuChipSpec& chip) {
  ModulePrediction out;
  out.chip = chip;
  out.topology = topology;
  out.num_devices = std::max<int64_t>(num_devices, 1);
  if (out.num_devices > topology.num_chips()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the module runs on ", out.num_devices, " devices; topology ", topology.ToString(),
        " has ", topology.num_chips(), " chips"));
  }
  std::vector<OpTime> base;
  base.reserve(cost.ops.size());
  bool any_collective = false;
  for (const OpCost& op : cost.ops) {
    base.push_back(RooflineTime(op, chip));
    any_collective = any_collective || !op.collectives.empty();
  }
  // Devices with identical per-op times share a group.
  std::map<std::vector<double>, size_t> index;
  const int64_t devices_to_time = any_collective ? out.num_devices : 1;
  for (int64_t d = 0; d < devices_to_time; ++d) {
    DeviceTimes dt;
    dt.ops = base;
    std::vector<double> key;
    for (size_t i = 0; i < cost.ops.size(); ++i) {
      const OpCost& op = cost.ops[i];
      OpTime& t = dt.ops[i];
      for (const auto& [instr, count] : op.collectives) {
        ASSIGN_OR_RETURN(CollectiveEstimate c,
                         EstimateCollective(*instr, d, out.num_devices, topology, chip));
        t.collective_s += op.executions * count * c.seconds;
      }
      t.seconds += t.collective_s;
      if (t.collective_s > std::max(t.compute_s, t.memory_s)) t.bound = Bound::kCollective;
      dt.seconds += t.seconds;
      dt.compute_s += t.compute_s;
      dt.memory_s += t.memory_s;
      dt.collective_s += t.collective_s;
      key.push_back(t.seconds);
    }
    auto [it, inserted] = index.try_emplace(key, out.groups.size());
    if (inserted) out.groups.push_back(std::move(dt));
    out.groups[it->second].devices.push_back(d);
  }
  if (!any_collective) {
    for (int64_t d = 1; d < out.num_devices; ++d) out.groups[0].devices.push_back(d);
  }
  for (const DeviceTimes& g : out.groups) out.max_seconds = std::max(out.max_seconds, g.seconds);
  return out;
}

}  // namespace tpuoff::hlo
