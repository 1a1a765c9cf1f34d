// Maps collective instructions onto the CollectiveBackend: every operand is
// rearranged so the backend sees contiguous chunks in group order.
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "runtime/emulator/exec_context.h"
#include "runtime/emulator/loop_program.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::HloOpcode;
using hlo::Shape;

absl::StatusOr<std::vector<int64_t>> GroupOf(const ExecContext& ctx,
                                             const HloInstruction& instr) {
  const auto& groups = instr.attrs().replica_groups.groups;
  if (groups.empty()) {
    std::vector<int64_t> all(ctx.num_devices);
    for (int64_t i = 0; i < ctx.num_devices; ++i) all[i] = i;
    return all;
  }
  for (const auto& g : groups) {
    for (int64_t d : g) {
      if (d == ctx.device_index) return g;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "device ", ctx.device_index, ": %", instr.name(),
      " has no replica group containing this device"));
}

absl::StatusOr<ReductionKind> KindOf(const HloInstruction& instr) {
  std::optional<HloOpcode> op = MatchReducer(instr.to_apply());
  if (op.has_value()) {
    switch (*op) {
      case HloOpcode::kAdd: return ReductionKind::kSum;
      case HloOpcode::kMultiply: return ReductionKind::kProduct;
      case HloOpcode::kMaximum: return ReductionKind::kMax;
      case HloOpcode::kMinimum: return ReductionKind::kMin;
      case HloOpcode::kAnd: return ReductionKind::kAnd;
      case HloOpcode::kOr: return ReductionKind::kOr;
      case HloOpcode::kXor: return ReductionKind::kXor;
      default: break;
    }
  }
  return absl::UnimplementedError(absl::StrCat(
      "%", instr.name(), ": only add/multiply/max/min/and/or/xor reducers are "
      "supported in collectives"));
}

// outer = product of dims before `dim`, inner bytes = dims after it * width.
void Split(const Shape& s, int64_t dim, int64_t* outer, int64_t* inner_bytes) {
  *outer = 1;
  *inner_bytes = hlo::ByteWidth(s.element_type());
  for (int64_t d = 0; d < dim; ++d) *outer *= s.dimensions(d);
  for (int64_t d = dim + 1; d < s.rank(); ++d) *inner_bytes *= s.dimensions(d);
}

// [g][outer][row] <-> [outer][g][row] rearrangement of byte rows.
void Interleave(const uint8_t* src, uint8_t* dst, int64_t g, int64_t outer,
                int64_t row, bool to_outer_major) {
  for (int64_t i = 0; i < g; ++i) {
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t a = (i * outer + o) * row;  // [g][outer]
      const int64_t b = (o * g + i) * row;      // [outer][g]
      if (to_outer_major) {
        std::memcpy(dst + b, src + a, row);
      } else {
        std::memcpy(dst + a, src + b, row);
      }
    }
  }
}

}  // namespace

absl::StatusOr<bool> StartCollective(ExecContext& ctx, const HloInstruction& instr,
                                     const std::vector<const void*>& in,
                                     const std::vector<void*>& out, PendingCollective* pending,
                                     CollectiveDone done) {
  const HloOpcode op = instr.opcode();
  if (!instr.attrs().permute_slice_sizes.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "%", instr.name(), ": in-place collective-permute (slice_sizes=) is not supported "
        "by the emulator"));
  }
  *pending = PendingCollective();
  CollectiveCall call;
  call.device = ctx.device_index;
  call.op_name = instr.name();
  const int64_t count = ctx.collective_counts[&instr]++;
  call.key = absl::StrCat(instr.name(), "#", instr.attrs().channel_id.value_or(0), "@", count);
  if (op == HloOpcode::kCollectivePermute) {
    for (int64_t i = 0; i < ctx.num_devices; ++i) call.group.push_back(i);
  } else {
    ASSIGN_OR_RETURN(call.group, GroupOf(ctx, instr));
  }
  const int64_t g = static_cast<int64_t>(call.group.size());
  // Scratch the backend reads or writes; kept by `pending` until the end.
  auto scratch = [&](int64_t bytes) {
    pending->scratch.emplace_back(static_cast<size_t>(bytes));
    return pending->scratch.back().data();
  };
  auto add = [&](CollectiveOp o, const void* leaf_in, void* leaf_out) {
    pending->ops.push_back(std::move(o));
    pending->leaves.push_back({leaf_in, leaf_out});
  };
  for (size_t leaf = 0; leaf < in.size() || leaf < out.size(); ++leaf) {
    CollectiveOp o;
    switch (op) {
      case HloOpcode::kAllReduce: {
        const Shape& s = instr.operand(leaf)->shape();
        o.kind = CollectiveOp::Kind::kAllReduce;
        o.type = s.element_type();
        ASSIGN_OR_RETURN(o.reduction, KindOf(instr));
        o.count = s.num_elements();
        add(std::move(o), in[leaf], out[leaf]);
        break;
      }
      case HloOpcode::kAllGather: {
        const Shape& s = instr.operand(leaf)->shape();
        int64_t outer, inner;
        Split(s, instr.dimensions()[0], &outer, &inner);
        const int64_t row = s.dimensions(instr.dimensions()[0]) * inner;
        o.kind = CollectiveOp::Kind::kAllGather;
        o.count = outer * row;
        if (outer == 1) {
          add(std::move(o), in[leaf], out[leaf]);
        } else {
          uint8_t* tmp = scratch(g * outer * row);
          add(std::move(o), in[leaf], tmp);
          pending->after.push_back({tmp, static_cast<uint8_t*>(out[leaf]), g, outer, row});
        }
        break;
      }
      case HloOpcode::kReduceScatter: {
        const Shape& s = instr.operand(leaf)->shape();
        int64_t outer, inner;
        Split(s, instr.dimensions()[0], &outer, &inner);
        const int64_t chunk_row = s.dimensions(instr.dimensions()[0]) / g * inner;
        o.kind = CollectiveOp::Kind::kReduceScatter;
        o.type = s.element_type();
        ASSIGN_OR_RETURN(o.reduction, KindOf(instr));
        o.count = outer * chunk_row / hlo::ByteWidth(s.element_type());
        if (outer == 1) {
          add(std::move(o), in[leaf], out[leaf]);
        } else {
          uint8_t* tmp = scratch(g * outer * chunk_row);
          Interleave(static_cast<const uint8_t*>(in[leaf]), tmp, g, outer, chunk_row, false);
          add(std::move(o), tmp, out[leaf]);
        }
        break;
      }
      case HloOpcode::kAllToAll: {
        o.kind = CollectiveOp::Kind::kAllToAll;
        if (instr.dimensions().empty()) {
          // Tuple form: operand j goes to member j; result i from member i.
          if (leaf > 0) break;
          const int64_t bytes = instr.operand(0)->shape().byte_size();
          uint8_t* send = scratch(g * bytes);
          uint8_t* recv = scratch(g * bytes);
          for (int64_t j = 0; j < g; ++j) {
            if (bytes > 0) std::memcpy(send + j * bytes, in[j], bytes);
          }
          o.count = bytes;
          add(std::move(o), send, recv);
          for (int64_t i = 0; i < g; ++i) {
            pending->copies.push_back({recv + i * bytes, static_cast<uint8_t*>(out[i]), bytes});
          }
          break;
        }
        const Shape& s = instr.operand(leaf)->shape();
        int64_t outer, inner;
        Split(s, instr.dimensions()[0], &outer, &inner);
        const int64_t chunk_row = s.dimensions(instr.dimensions()[0]) / g * inner;
        uint8_t* send = scratch(g * outer * chunk_row);
        uint8_t* recv = scratch(g * outer * chunk_row);
        Interleave(static_cast<const uint8_t*>(in[leaf]), send, g, outer, chunk_row, false);
        o.count = outer * chunk_row;
        add(std::move(o), send, recv);
        pending->after.push_back({recv, static_cast<uint8_t*>(out[leaf]), g, outer, chunk_row});
        break;
      }
      case HloOpcode::kCollectivePermute:
        o.kind = CollectiveOp::Kind::kCollectivePermute;
        o.count = instr.operand(leaf)->shape().byte_size();
        o.pairs = instr.attrs().source_target_pairs;
        add(std::move(o), in[leaf], out[leaf]);
        break;
      default:
        return absl::InternalError(absl::StrCat("%", instr.name(), " is not a collective"));
    }
  }
  ASSIGN_OR_RETURN(bool complete,
                   ctx.backend->Submit(call, pending->ops, pending->leaves, std::move(done)));
  if (complete) FinishCollective(*pending);
  return complete;
}

void FinishCollective(const PendingCollective& pending) {
  for (const PendingCollective::Interleaved& a : pending.after) {
    Interleave(a.from, a.to, a.g, a.outer, a.row, true);
  }
  for (const PendingCollective::Copy& c : pending.copies) {
    if (c.bytes > 0) std::memcpy(c.to, c.from, c.bytes);
  }
}

}  // namespace tpuoff::runtime
