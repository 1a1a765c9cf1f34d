// sort (variadic, any comparator computation), topk (the opcode and XLA:CPU's
// "TopK" custom-call) and select-and-scatter. Comparators and combiners run
// on the scalar evaluator; elements are held in compute representation, one
// 8-byte slot each.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "hlo/analysis/loop_fusion.h"
#include "hlo/ir/status_macros.h"
#include "hlo/ir/window.h"
#include "runtime/cpu/parallel.h"
#include "runtime/emulator/ops.h"
#include "runtime/emulator/ops_extra.h"
#include "runtime/emulator/ops_window.h"
#include "runtime/emulator/sort_keys.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::PrimitiveType;
using hlo::Shape;

// All elements of an array in compute-representation slots.
std::vector<ScalarValue> LoadSlots(PrimitiveType t, const void* data, int64_t n) {
  std::vector<ScalarValue> slots(n);
  const LoadKernel load = GetLoadKernel(t);
  const int64_t w = hlo::ByteWidth(t);
  for (int64_t i = 0; i < n; ++i) {
    load(static_cast<const uint8_t*>(data) + i * w, 1, slots[i].bytes, 1);
  }
  return slots;
}

void StoreSlot(PrimitiveType t, const ScalarValue& v, void* data, int64_t i) {
  GetStoreKernel(t)(v.bytes, static_cast<uint8_t*>(data) + i * hlo::ByteWidth(t), 1);
}

// Rows along dimension `dim` of `dims`: start offset of each row and the
// stride between the row's elements.
struct Rows {
  int64_t count = 0, length = 0, stride = 0;
  std::vector<int64_t> starts;
};

Rows RowsAlong(const std::vector<int64_t>& dims, int64_t dim) {
  Rows r;
  r.length = dims[dim];
  r.stride = 1;
  for (size_t d = dim + 1; d < dims.size(); ++d) r.stride *= dims[d];
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= dims[d];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < r.stride; ++i) r.starts.push_back(o * r.length * r.stride + i);
  }
  r.count = static_cast<int64_t>(r.starts.size());
  return r;
}

// Order of the elements of one row under `less` (stable).
template <class Less>
void SortRow(int64_t length, const Less& less, std::vector<int64_t>* perm) {
  perm->resize(length);
  std::iota(perm->begin(), perm->end(), 0);
  std::stable_sort(perm->begin(), perm->end(), less);
}

absl::Status CheckSlotTypes(const HloInstruction& instr) {
  for (const HloInstruction* o : instr.operands()) {
    if (!o->shape().IsArray() || GetLoadKernel(o->shape().element_type()) == nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          hlo::HloOpcodeString(instr.opcode()), " ", instr.name(), ": element type of ",
          o->shape().ToString(), " is not supported"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SortKernel(const HloInstruction& instr, absl::Span<const void* const> in,
                        absl::Span<void* const> out) {
  RETURN_IF_ERROR(CheckSlotTypes(instr));
  ASSIGN_OR_RETURN(std::unique_ptr<ScalarEvaluator> cmp,
                   ScalarEvaluator::Create(instr.to_apply()));
  const int64_t n = instr.operand_count();
  const Shape& shape = instr.operand(0)->shape();
  std::vector<std::vector<ScalarValue>> values(n);
  for (int64_t i = 0; i < n; ++i) {
    values[i] = LoadSlots(instr.operand(i)->shape().element_type(), in[i], shape.num_elements());
  }
  if (shape.num_elements() == 0) return absl::OkStatus();
  const Rows rows = RowsAlong(shape.dimensions(), instr.dimensions()[0]);
  std::vector<ScalarValue> args(2 * n);
  ScalarValue result;
  std::vector<int64_t> perm;
  // compare(f(a), f(b)) comparators (jax's sorts) sort by the keys f(x).
  const std::unique_ptr<SortKeys> keyed = SortKeys::Match(instr.to_apply());
  std::vector<uint64_t> keys;
  for (int64_t start : rows.starts) {
    auto less = [&](int64_t a, int64_t b) {
      for (int64_t i = 0; i < n; ++i) {
        args[2 * i] = values[i][start + a * rows.stride];
        args[2 * i + 1] = values[i][start + b * rows.stride];
      }
      cmp->Eval(args, &result);
      return result.AsPred();
    };
    if (keyed != nullptr && keyed->Keys(values[0], start, rows.stride, rows.length, &keys)) {
      if (keyed->greater()) {
        SortRow(rows.length, [&](int64_t a, int64_t b) { return keys[a] > keys[b]; }, &perm);
      } else {
        SortRow(rows.length, [&](int64_t a, int64_t b) { return keys[a] < keys[b]; }, &perm);
      }
    } else {
      SortRow(rows.length, less, &perm);
    }
    for (int64_t i = 0; i < n; ++i) {
      const PrimitiveType t = instr.operand(i)->shape().element_type();
      for (int64_t j = 0; j < rows.length; ++j) {
        StoreSlot(t, values[i][start + perm[j] * rows.stride], out[i], start + j * rows.stride);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TopKKernel(const HloInstruction& instr, const void* in, void* values_out,
                        void* indices_out) {
  RETURN_IF_ERROR(CheckSlotTypes(instr));
  const Shape& shape = instr.operand(0)->shape();
  const PrimitiveType t = shape.element_type();
  const Shape& out_shape = instr.shape().tuple_shapes(0);
  const int64_t k = out_shape.dimensions(out_shape.rank() - 1);
  std::vector<ScalarValue> values = LoadSlots(t, in, shape.num_elements());
  std::unique_ptr<ScalarEvaluator> cmp;
  if (instr.opcode() == hlo::HloOpcode::kCustomCall) {
    if (instr.called_computations().size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("TopK custom-call ", instr.name(), " needs one comparator computation"));
    }
    ASSIGN_OR_RETURN(cmp, ScalarEvaluator::Create(instr.called_computations()[0]));
  }
  ASSIGN_OR_RETURN(BinaryKernel gt, GetCompareKernel(instr.attrs().largest
                                                         ? hlo::ComparisonDirection::kGt
                                                         : hlo::ComparisonDirection::kLt,
                                                     t, /*total_order=*/true));
  if (shape.num_elements() == 0 || k == 0) return absl::OkStatus();
  const int64_t last = shape.rank() - 1;
  const int64_t length = shape.dimensions(last);
  const int64_t rows = shape.num_elements() / length;
  // XLA:CPU's comparator may also take the s32 indices: (va, vb, ia, ib).
  const int64_t cmp_params =
      cmp ? instr.called_computations()[0]->num_parameters() : 2;
  if (cmp_params != 2 && cmp_params != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TopK custom-call ", instr.name(), ": comparator must take 2 or 4 parameters"));
  }
  std::vector<ScalarValue> args(cmp_params);
  ScalarValue result;
  std::vector<int64_t> perm;
  for (int64_t r = 0; r < rows; ++r) {
    const ScalarValue* row = values.data() + r * length;
    auto before = [&](int64_t a, int64_t b) {
      if (cmp) {
        args[0] = row[a];
        args[1] = row[b];
        if (cmp_params == 4) {
          const int32_t ia = static_cast<int32_t>(a), ib = static_cast<int32_t>(b);
          std::memcpy(args[2].bytes, &ia, 4);
          std::memcpy(args[3].bytes, &ib, 4);
        }
        cmp->Eval(args, &result);
      } else {
        result = ScalarValue();
        gt(row[a].bytes, row[b].bytes, result.bytes, 1);
      }
      return result.AsPred();
    };
    SortRow(length, before, &perm);
    for (int64_t j = 0; j < k; ++j) {
      StoreSlot(t, row[perm[j]], values_out, r * k + j);
      const int32_t index = static_cast<int32_t>(perm[j]);
      std::memcpy(static_cast<uint8_t*>(indices_out) + (r * k + j) * 4, &index, 4);
    }
  }
  return absl::OkStatus();
}

namespace {

// Steps the window offset `widx` to the next one in row-major order; false
// after the last.
bool NextWindowOffset(absl::Span<const hlo::WindowDimension> win, std::vector<int64_t>* widx) {
  for (int64_t d = static_cast<int64_t>(widx->size()) - 1; d >= 0; --d) {
    if (++(*widx)[d] < win[d].size) return true;
    (*widx)[d] = 0;
  }
  return false;
}

// A select computation that is compare(p0, p1) in one ordering direction
// with XLA's default float comparison; nullopt otherwise.
std::optional<hlo::ComparisonDirection> MatchFloatSelect(const hlo::HloComputation* c) {
  const HloInstruction* root = c->root();
  if (c->num_parameters() != 2 || root->opcode() != hlo::HloOpcode::kCompare ||
      root->operand(0) != c->parameter(0) || root->operand(1) != c->parameter(1)) {
    return std::nullopt;
  }
  const std::string& type = root->attrs().comparison_type;
  if (!type.empty() && type != "FLOAT") return std::nullopt;
  const hlo::ComparisonDirection d = root->attrs().comparison_direction;
  if (d == hlo::ComparisonDirection::kEq || d == hlo::ComparisonDirection::kNe) {
    return std::nullopt;
  }
  return d;
}

// select-and-scatter of f32 with a MatchFloatSelect select and an add
// scatter (max/min pooling's gradient): the generic loop below with the
// comparisons and sums done inline, in the same order (same results). The
// operand offsets a window visits are tabled per dimension and source
// index first (the same positions, tests and window-offset order as the
// generic loop), so the window walk is a few table reads per element.
// When the last dimension's window is trivial (NHWC pooling: channels
// untouched), a whole source row of the last dimension is selected at once
// (each channel keeps its own best value and offset; the same tests in the
// same order). Source indices along dimension 0 run in parallel when its
// windows cannot overlap (each source index then writes only its own
// operand positions, and every output element still receives its sums in
// source order).
template <hlo::ComparisonDirection kDir>
void SelectAndScatterF32(const HloInstruction& instr, const float* op, const float* src,
                         float init, float* out, int num_threads) {
  const Shape& oshape = instr.operand(0)->shape();
  const Shape& sshape = instr.operand(1)->shape();
  const int64_t rank = oshape.rank();
  const auto& win = instr.attrs().window;
  ParallelFor(oshape.num_elements() >= (int64_t{1} << 16) ? num_threads : 1,
              oshape.num_elements(), [&](int64_t b, int64_t e) {
                std::fill(out + b, out + e, init);
              });
  if (sshape.num_elements() == 0) return;  // nothing scattered (and no row length)
  if (rank == 0) {  // one window of one element
    out[0] = out[0] + src[0];
    return;
  }
  std::vector<int64_t> ostrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) ostrides[d] = ostrides[d + 1] * oshape.dimensions(d + 1);
  auto keep = [](float a, float b) {
    if constexpr (kDir == hlo::ComparisonDirection::kGe) return a >= b;
    if constexpr (kDir == hlo::ComparisonDirection::kGt) return a > b;
    if constexpr (kDir == hlo::ComparisonDirection::kLe) return a <= b;
    return a < b;
  };
  // The flat operand offsets each source index's window reaches, per
  // dimension (reduce-window's tables: the same positions and holes; the
  // walk is in window-offset order, so no reversal).
  std::vector<WindowTable> tables;
  for (int64_t d = 0; d < rank; ++d) {
    hlo::WindowDimension w = win[d];
    w.window_reversal = false;
    tables.push_back(BuildWindowTable(w, oshape.dimensions(d), sshape.dimensions(d), ostrides[d]));
  }
  const bool rows = TrivialWindow(win[rank - 1]);
  // Dimensions walked per item (all but the last with rows) and the items'
  // row length.
  const int64_t outer = rows ? rank - 1 : rank;
  const int64_t row = rows ? sshape.dimensions(rank - 1) : 1;
  // Windows along dimension 0 that never overlap: each source index reads
  // a disjoint run of operand positions.
  const auto& first = win[0];
  const bool split = outer > 0 && first.size <= first.stride && first.padding_low == 0 &&
                     first.base_dilation == 1 && first.window_dilation == 1;
  const int64_t per_index = sshape.num_elements() / std::max<int64_t>(1, sshape.dimensions(0));
  const int threads = split && sshape.num_elements() * (tables[0].total + 1) >= (int64_t{1} << 15)
                          ? num_threads : 1;
  ParallelFor(threads, split ? sshape.dimensions(0) : 1, [&](int64_t lo, int64_t hi) {
    const int64_t s_begin = split ? lo * per_index : 0;
    const int64_t s_end = split ? hi * per_index : sshape.num_elements();
    std::vector<int64_t> sidx(std::max<int64_t>(outer, 1), 0), at(std::max<int64_t>(outer, 1));
    for (int64_t d = outer - 1, rest = s_begin / row; d >= 0; --d) {
      sidx[d] = rest % sshape.dimensions(d);
      rest /= sshape.dimensions(d);
    }
    std::vector<float> best_value(row);
    std::vector<int64_t> best_at(row);
    for (int64_t s = s_begin; s < s_end; s += row) {
      // The window's valid offsets, row-major over the window (the last
      // dimension fastest), as NextWindowOffset walks them.
      bool empty = false;
      for (int64_t d = 0; d < outer; ++d) {
        at[d] = 0;
        empty |= tables[d].count[sidx[d]] == 0;
      }
      if (!empty) {
        for (bool any = false, more = true; more; any = true) {
          int64_t flat = 0;
          for (int64_t d = 0; d < outer; ++d) {
            flat += tables[d].first[sidx[d]] + at[d] * tables[d].step;
          }
          if (rows) {
            const float* x = op + flat;
            for (int64_t c = 0; c < row; ++c) {
              const bool replace = !any || !keep(best_value[c], x[c]);
              best_value[c] = replace ? x[c] : best_value[c];
              best_at[c] = replace ? flat : best_at[c];
            }
          } else if (!any || !keep(best_value[0], op[flat])) {
            best_value[0] = op[flat];
            best_at[0] = flat;
          }
          more = false;
          for (int64_t d = outer - 1; d >= 0; --d) {
            if (++at[d] < tables[d].count[sidx[d]]) {
              more = true;
              break;
            }
            at[d] = 0;
          }
        }
        for (int64_t c = 0; c < row; ++c) {
          const int64_t o = best_at[c] + (rows ? c : 0);
          out[o] = out[o] + src[s + c];
        }
      }
      for (int64_t d = outer - 1; d >= 0; --d) {
        if (++sidx[d] < sshape.dimensions(d)) break;
        sidx[d] = 0;
      }
    }
  });
}

}  // namespace

absl::Status SelectAndScatterKernel(const HloInstruction& instr, const void* operand,
                                    const void* source, const void* init, void* out,
                                    int num_threads) {
  RETURN_IF_ERROR(CheckSlotTypes(instr));
  if (instr.operand(0)->shape().element_type() == PrimitiveType::kF32 &&
      instr.operand(1)->shape().element_type() == PrimitiveType::kF32 &&
      hlo::MatchReducer(instr.called_computations()[1]) == hlo::HloOpcode::kAdd) {
    if (const auto dir = MatchFloatSelect(instr.called_computations()[0])) {
      const float* op = static_cast<const float*>(operand);
      const float* src = static_cast<const float*>(source);
      float init_value;
      std::memcpy(&init_value, init, sizeof(init_value));
      float* o = static_cast<float*>(out);
      switch (*dir) {
        case hlo::ComparisonDirection::kGe:
          SelectAndScatterF32<hlo::ComparisonDirection::kGe>(instr, op, src, init_value, o, num_threads);
          break;
        case hlo::ComparisonDirection::kGt:
          SelectAndScatterF32<hlo::ComparisonDirection::kGt>(instr, op, src, init_value, o, num_threads);
          break;
        case hlo::ComparisonDirection::kLe:
          SelectAndScatterF32<hlo::ComparisonDirection::kLe>(instr, op, src, init_value, o, num_threads);
          break;
        default:
          SelectAndScatterF32<hlo::ComparisonDirection::kLt>(instr, op, src, init_value, o, num_threads);
          break;
      }
      return absl::OkStatus();
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ScalarEvaluator> select,
                   ScalarEvaluator::Create(instr.called_computations()[0]));
  ASSIGN_OR_RETURN(std::unique_ptr<ScalarEvaluator> scatter,
                   ScalarEvaluator::Create(instr.called_computations()[1]));
  const Shape& oshape = instr.operand(0)->shape();
  const Shape& sshape = instr.operand(1)->shape();
  const PrimitiveType ot = oshape.element_type();
  const PrimitiveType st = sshape.element_type();
  const std::vector<ScalarValue> op = LoadSlots(ot, operand, oshape.num_elements());
  const std::vector<ScalarValue> src = LoadSlots(st, source, sshape.num_elements());
  const std::vector<ScalarValue> init_v = LoadSlots(st, init, 1);
  std::vector<ScalarValue> acc(oshape.num_elements(), init_v[0]);
  const int64_t rank = oshape.rank();
  const auto& win = instr.attrs().window;
  std::vector<int64_t> ostrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) ostrides[d] = ostrides[d + 1] * oshape.dimensions(d + 1);
  std::vector<int64_t> sidx(rank, 0), widx(rank, 0);
  std::vector<ScalarValue> args(2);
  ScalarValue result;
  for (int64_t s = 0; s < sshape.num_elements(); ++s) {
    int64_t best = -1;
    std::fill(widx.begin(), widx.end(), 0);
    for (bool more = rank >= 0; more;) {
      int64_t flat = 0;
      bool inside = true;
      for (int64_t d = 0; d < rank && inside; ++d) {
        const int64_t pos = sidx[d] * win[d].stride + widx[d] * win[d].window_dilation -
                            win[d].padding_low;
        // Inside the base-dilated operand, and not in a dilation hole.
        if (pos < 0 || pos > (oshape.dimensions(d) - 1) * win[d].base_dilation ||
            pos % win[d].base_dilation != 0) {
          inside = false;
        } else {
          flat += (pos / win[d].base_dilation) * ostrides[d];
        }
      }
      if (inside) {
        if (best < 0) {
          best = flat;
        } else {
          args[0] = op[best];
          args[1] = op[flat];
          select->Eval(args, &result);
          if (!result.AsPred()) best = flat;
        }
      }
      more = NextWindowOffset(win, &widx);
    }
    if (best >= 0) {
      args[0] = acc[best];
      args[1] = src[s];
      scatter->Eval(args, &result);
      acc[best] = result;
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++sidx[d] < sshape.dimensions(d)) break;
      sidx[d] = 0;
    }
  }
  for (int64_t i = 0; i < oshape.num_elements(); ++i) StoreSlot(st, acc[i], out, i);
  return absl::OkStatus();
}

}  // namespace tpuoff::runtime
