#include "kernels/block_loop.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpuoff::kernels {

using hlo::ComparisonDirection;
using hlo::HloComputation;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::XlaBuilder;
using hlo::XlaOp;

namespace {

// Calls `body`, checking that it returns as many values as it was given.
std::vector<XlaOp> CallBody(XlaBuilder* b, const BlockBodyFn& body, XlaOp start,
                            int64_t width, absl::Span<const XlaOp> invariants,
                            absl::Span<const XlaOp> carried, const std::string& name) {
  std::vector<XlaOp> out = body(b, start, width, invariants, carried);
  if (out.size() != carried.size()) {
    b->ReportError(absl::InternalError(absl::StrCat(
        name, ": block body returned ", out.size(), " values for ", carried.size(),
        " carried")));
    return std::vector<XlaOp>(carried.size());
  }
  return out;
}

}  // namespace

std::vector<XlaOp> ForEachBlock(XlaBuilder* b, int64_t total, int64_t block,
                                absl::Span<const XlaOp> invariants,
                                absl::Span<const XlaOp> carried, const BlockBodyFn& body,
                                const BlockLoopOptions& options) {
  if (block <= 0 || total <= 0) {
    b->ReportError(absl::InvalidArgumentError(absl::StrCat(
        options.name, ": block (", block, ") and total (", total, ") must be > 0")));
    return std::vector<XlaOp>(carried.size());
  }
  block = std::min(block, total);
  const int64_t num_full = total / block;
  const int64_t tail = total % block;
  std::vector<XlaOp> state(carried.begin(), carried.end());
  // The tail block's invariants (through the barrier of tail_after_loop).
  std::vector<XlaOp> tail_inv(invariants.begin(), invariants.end());

  if (num_full <= options.max_unrolled_blocks) {
    for (int64_t i = 0; i < num_full; ++i) {
      state = CallBody(b, body, b->ConstantS32(static_cast<int32_t>(i * block)), block,
                       invariants, state, options.name);
    }
  } else {
    // Loop state: (counter, invariants..., carried...).
    const int64_t num_inv = static_cast<int64_t>(invariants.size());
    std::vector<XlaOp> init = {b->ConstantS32(0)};
    init.insert(init.end(), invariants.begin(), invariants.end());
    init.insert(init.end(), state.begin(), state.end());
    XlaOp init_tuple = b->Tuple(init);
    const Shape state_shape = init_tuple.shape();
    if (!state_shape.IsTuple()) return std::vector<XlaOp>(carried.size());

    HloComputation* cond_comp = nullptr;
    {
      std::unique_ptr<XlaBuilder> cond = b->CreateSubBuilder(options.name + "_cond");
      XlaOp param = cond->Parameter(0, state_shape, options.name + "_state");
      XlaOp counter = cond->GetTupleElement(param, 0);
      XlaOp pred = cond->Compare(counter, cond->ConstantS32(static_cast<int32_t>(num_full)),
                                 ComparisonDirection::kLt);
      absl::StatusOr<HloComputation*> built = cond->BuildComputation(pred);
      if (!built.ok()) {
        b->ReportError(built.status());
        return std::vector<XlaOp>(carried.size());
      }
      cond_comp = *built;
    }
    HloComputation* body_comp = nullptr;
    {
      std::unique_ptr<XlaBuilder> lb = b->CreateSubBuilder(options.name + "_body");
      XlaOp param = lb->Parameter(0, state_shape, options.name + "_state");
      XlaOp counter = lb->GetTupleElement(param, 0);
      std::vector<XlaOp> inv, cur;
      for (int64_t i = 0; i < num_inv; ++i) inv.push_back(lb->GetTupleElement(param, 1 + i));
      for (size_t i = 0; i < state.size(); ++i) {
        cur.push_back(lb->GetTupleElement(param, 1 + num_inv + static_cast<int64_t>(i)));
      }
      XlaOp start = hlo::Mul(counter, lb->ConstantS32(static_cast<int32_t>(block)));
      std::vector<XlaOp> next = CallBody(lb.get(), body, start, block, inv, cur, options.name);
      std::vector<XlaOp> out = {hlo::Add(counter, lb->ConstantS32(1))};
      out.insert(out.end(), inv.begin(), inv.end());
      out.insert(out.end(), next.begin(), next.end());
      absl::StatusOr<HloComputation*> built = lb->BuildComputation(lb->Tuple(out));
      if (!built.ok()) {
        b->ReportError(built.status());
        return std::vector<XlaOp>(carried.size());
      }
      body_comp = *built;
    }
    XlaOp loop = b->While(cond_comp, body_comp, init_tuple);
    for (size_t i = 0; i < state.size(); ++i) {
      state[i] = b->GetTupleElement(loop, 1 + num_inv + static_cast<int64_t>(i));
    }
    if (tail > 0 && options.tail_after_loop) {
      std::vector<XlaOp> all(invariants.begin(), invariants.end());
      all.insert(all.end(), state.begin(), state.end());
      XlaOp barrier = b->AddOp(hlo::HloOpcode::kOptimizationBarrier, {b->Tuple(all)});
      for (int64_t i = 0; i < num_inv; ++i) tail_inv[i] = b->GetTupleElement(barrier, i);
      for (size_t i = 0; i < state.size(); ++i) {
        state[i] = b->GetTupleElement(barrier, num_inv + static_cast<int64_t>(i));
      }
    }
  }
  if (tail > 0) {
    state = CallBody(b, body, b->ConstantS32(static_cast<int32_t>(num_full * block)), tail,
                     tail_inv, state, options.name);
  }
  return state;
}

}  // namespace tpuoff::kernels
