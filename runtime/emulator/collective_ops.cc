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

absl::Status ExecuteCollective(ExecContext& ctx, const HloInstruction& instr,
                               const std::vector<const void*>& in,
                               const std::vector<void*>& out) {
  const HloOpcode op = instr.opcode();
  CollectiveCall call;
  call.device = ctx.device_index;
  call.op_name = instr.name();
  const int64_t count = ctx.collective_counts[&instr]++;
  const std::string base_key = absl::StrCat(
      instr.name(), "#", instr.attrs().channel_id.value_or(0), "@", count);
  if (op == HloOpcode::kCollectivePermute) {
    for (int64_t i = 0; i < ctx.num_devices; ++i) call.group.push_back(i);
  } else {
    ASSIGN_OR_RETURN(call.group, GroupOf(ctx, instr));
  }
  const int64_t g = static_cast<int64_t>(call.group.size());
  for (size_t leaf = 0; leaf < in.size() || leaf < out.size(); ++leaf) {
    call.key = absl::StrCat(base_key, ".", leaf);
    switch (op) {
      case HloOpcode::kAllReduce: {
        const Shape& s = instr.operand(leaf)->shape();
        ASSIGN_OR_RETURN(ReductionKind kind, KindOf(instr));
        RETURN_IF_ERROR(ctx.backend->AllReduce(call, s.element_type(), kind,
                                               in[leaf], out[leaf],
                                               s.num_elements()));
        break;
      }
      case HloOpcode::kAllGather: {
        const Shape& s = instr.operand(leaf)->shape();
        int64_t outer, inner;
        Split(s, instr.dimensions()[0], &outer, &inner);
        const int64_t row = s.dimensions(instr.dimensions()[0]) * inner;
        if (outer == 1) {
          RETURN_IF_ERROR(ctx.backend->AllGather(call, in[leaf], row, out[leaf]));
        } else {
          std::vector<uint8_t> tmp(g * outer * row);
          RETURN_IF_ERROR(ctx.backend->AllGather(call, in[leaf], outer * row, tmp.data()));
          Interleave(tmp.data(), static_cast<uint8_t*>(out[leaf]), g, outer, row, true);
        }
        break;
      }
      case HloOpcode::kReduceScatter: {
        const Shape& s = instr.operand(leaf)->shape();
        ASSIGN_OR_RETURN(ReductionKind kind, KindOf(instr));
        int64_t outer, inner;
        Split(s, instr.dimensions()[0], &outer, &inner);
        const int64_t chunk_row = s.dimensions(instr.dimensions()[0]) / g * inner;
        const int64_t width = hlo::ByteWidth(s.element_type());
        const int64_t chunk_count = outer * chunk_row / width;
        if (outer == 1) {
          RETURN_IF_ERROR(ctx.backend->ReduceScatter(call, s.element_type(), kind,
                                                     in[leaf], out[leaf], chunk_count));
        } else {
          std::vector<uint8_t> tmp(g * outer * chunk_row);
          Interleave(static_cast<const uint8_t*>(in[leaf]), tmp.data(), g, outer,
                     chunk_row, false);
          RETURN_IF_ERROR(ctx.backend->ReduceScatter(call, s.element_type(), kind,
                                                     tmp.data(), out[leaf], chunk_count));
        }
        break;
      }
      case HloOpcode::kAllToAll: {
        if (instr.dimensions().empty()) {
          // Tuple form: operand j goes to member j; result i from member i.
          if (leaf > 0) break;
          const int64_t bytes = instr.operand(0)->shape().byte_size();
          std::vector<uint8_t> send(g * bytes), recv(g * bytes);
          for (int64_t j = 0; j < g; ++j) std::memcpy(send.data() + j * bytes, in[j], bytes);
          RETURN_IF_ERROR(ctx.backend->AllToAll(call, send.data(), recv.data(), bytes));
          for (int64_t i = 0; i < g; ++i) std::memcpy(out[i], recv.data() + i * bytes, bytes);
          return absl::OkStatus();
        }
        const Shape& s = instr.operand(leaf)->shape();
        int64_t outer, inner;
        Split(s, instr.dimensions()[0], &outer, &inner);
        const int64_t chunk_row = s.dimensions(instr.dimensions()[0]) / g * inner;
        std::vector<uint8_t> send(g * outer * chunk_row), recv(g * outer * chunk_row);
        Interleave(static_cast<const uint8_t*>(in[leaf]), send.data(), g, outer,
                   chunk_row, false);
        RETURN_IF_ERROR(ctx.backend->AllToAll(call, send.data(), recv.data(),
                                              outer * chunk_row));
        Interleave(recv.data(), static_cast<uint8_t*>(out[leaf]), g, outer, chunk_row, true);
        break;
      }
      case HloOpcode::kCollectivePermute: {
        const int64_t bytes = instr.operand(leaf)->shape().byte_size();
        RETURN_IF_ERROR(ctx.backend->CollectivePermute(
            call, instr.attrs().source_target_pairs, in[leaf], out[leaf], bytes));
        break;
      }
      default:
        return absl::InternalError(absl::StrCat("%", instr.name(), " is not a collective"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::runtime
