#include "runtime/emulator/ops_window.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "hlo/analysis/loop_fusion.h"
#include "hlo/ir/status_macros.h"
#include "runtime/cpu/elementwise_kernels.h"
#include "runtime/cpu/elementwise_ops.h"
#include "runtime/cpu/parallel.h"
#include "runtime/emulator/ops.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::WindowDimension;

// Input coordinates (in window order) that output position `o` of one
// dimension reads; padding and dilation holes are left out. Only window
// offsets that land inside the dilated base are visited, so huge sizes or
// paddings cost nothing.
void WindowCoordinates(const WindowDimension& w, int64_t base, int64_t o,
                       std::vector<int64_t>* coords) {
  coords->clear();
  if (base == 0) return;
  // Position (in the dilated base) of window offset kk is first + kk * wd.
  const int64_t first = o * w.stride - w.padding_low;
  const int64_t last = (base - 1) * w.base_dilation;
  const int64_t wd = w.window_dilation;
  const int64_t lo = first >= 0 ? 0 : (-first + wd - 1) / wd;
  if (last < first) return;
  const int64_t hi = std::min(w.size - 1, (last - first) / wd);
  for (int64_t kk = lo; kk <= hi; ++kk) {
    const int64_t pos = first + kk * wd;
    if (pos % w.base_dilation == 0) coords->push_back(pos / w.base_dilation);
  }
  // Window element k reads offset size-1-k when reversed: window order is
  // then descending offsets.
  if (w.window_reversal) std::reverse(coords->begin(), coords->end());
}

// The window coordinates of output element `o` (row-major over out_shape)
// in every dimension; `idx` receives its multi-index. False when the
// window reads no input element (all padding or holes).
bool OutputWindow(int64_t o, const Shape& out_shape, const Shape& in_shape,
                  absl::Span<const WindowDimension> window, std::vector<int64_t>* idx,
                  std::vector<std::vector<int64_t>>* coords) {
  const int64_t rank = in_shape.rank();
  for (int64_t d = rank - 1, rest = o; d >= 0; --d) {
    (*idx)[d] = rest % out_shape.dimensions(d);
    rest /= out_shape.dimensions(d);
  }
  bool empty = false;
  for (int64_t d = 0; d < rank; ++d) {
    WindowCoordinates(window[d], in_shape.dimensions(d), (*idx)[d], &(*coords)[d]);
    empty |= (*coords)[d].empty();
  }
  return !empty;
}

}  // namespace

WindowTable BuildWindowTable(const WindowDimension& w, int64_t base, int64_t out_dim,
                             int64_t stride) {
  WindowTable t;
  t.first.assign(static_cast<size_t>(out_dim), 0);
  t.count.assign(static_cast<size_t>(out_dim), 0);
  const int64_t wd = w.window_dilation, bd = w.base_dilation;
  // Window offsets kk land on a base element every `period` offsets, and
  // then move `coord_step` base elements.
  const int64_t period = bd / std::gcd(wd, bd);
  const int64_t coord_step = period * wd / bd;
  t.step = (w.window_reversal ? -coord_step : coord_step) * stride;
  if (base == 0) return t;
  const int64_t last = (base - 1) * bd;
  for (int64_t o = 0; o < out_dim; ++o) {
    // As WindowCoordinates: position of window offset kk is first + kk * wd.
    const int64_t first = o * w.stride - w.padding_low;
    if (last < first) continue;
    const int64_t lo = first >= 0 ? 0 : (-first + wd - 1) / wd;
    const int64_t hi = std::min(w.size - 1, (last - first) / wd);
    int64_t kk0 = lo;
    while (kk0 <= hi && kk0 < lo + period && (first + kk0 * wd) % bd != 0) ++kk0;
    if (kk0 > hi || (first + kk0 * wd) % bd != 0) continue;
    const int64_t n = (hi - kk0) / period + 1;
    int64_t c = (first + kk0 * wd) / bd;
    if (w.window_reversal) c += (n - 1) * coord_step;
    t.first[o] = c * stride;
    t.count[o] = n;
    t.total += n;
  }
  return t;
}

bool TrivialWindow(const WindowDimension& w) {
  return w.size == 1 && w.stride == 1 && w.padding_low == 0 && w.padding_high == 0 &&
         w.base_dilation == 1 && w.window_dilation == 1;
}

namespace {

// Below this many window reads in total, threads cost more than they save.
constexpr int64_t kMinParallelWork = int64_t{1} << 16;

// One f32 input folded with a plain add/multiply/max/min: the generic loop
// below with the values read and combined inline, in the same order (the
// window row-major, the last dimension fastest; same results), the window
// coordinates tabled per dimension and the output index stepped, not
// divided out per element. When the last dimension's window is trivial
// (pooling over NHWC: channels untouched), a whole row of the last
// dimension is folded at once, each window position combining a vector of
// contiguous inputs into the row (every element still sees its window in
// the same order).
// Windows along one dimension d that are growing prefixes of each other
// (jnp.cumsum / cummax: size n, pad=n-1_0; every other dimension trivial):
// output o's window is output o-1's plus one more element, folded in the
// same window order, so out[o] = Op(out[o-1], x[next]) gives the same bits
// as folding each window afresh, in O(n) per line instead of O(n^2).
template <class Op>
bool PrefixFold(const float* in, float init, float* out, const Shape& in_shape,
                const Shape& out_shape, const std::vector<WindowDimension>& window,
                const std::vector<WindowTable>& tables, int threads) {
  const int64_t rank = in_shape.rank();
  int64_t pd = -1;
  for (int64_t d = 0; d < rank; ++d) {
    if (TrivialWindow(window[d])) continue;
    if (pd >= 0) return false;
    pd = d;
  }
  if (pd < 0 || window[pd].window_reversal) return false;
  const WindowTable& t = tables[pd];
  const int64_t n = out_shape.dimensions(pd);
  if (n < 2 || t.step == 0) return false;
  for (int64_t o = 1; o < n; ++o) {
    const bool grows = t.count[o] == t.count[o - 1] + 1 &&
                       (t.count[o - 1] == 0 || t.first[o] == t.first[o - 1]);
    const bool empty = t.count[o] == 0 && t.count[o - 1] == 0;
    if (!grows && !empty) return false;
  }
  // Lines: every index of the other dimensions.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < pd; ++d) outer *= out_shape.dimensions(d);
  for (int64_t d = pd + 1; d < rank; ++d) inner *= out_shape.dimensions(d);
  ParallelFor(threads, outer * inner, [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      // Input offset of the line's other coordinates (trivial windows: the
      // output index itself).
      int64_t base = 0;
      for (int64_t d = rank - 1, rest = line; d >= 0; --d) {
        if (d == pd) continue;
        const int64_t i = rest % out_shape.dimensions(d);
        rest /= out_shape.dimensions(d);
        base += tables[d].first[i];
      }
      const int64_t o0 = (line / inner) * n * inner + line % inner;
      float acc = init;
      for (int64_t o = 0; o < n; ++o) {
        if (t.count[o] > 0) {
          acc = Op::template Apply<float>(acc, in[base + t.first[o] + (t.count[o] - 1) * t.step]);
        }
        out[o0 + o * inner] = acc;
      }
    }
  });
  return true;
}

template <class Op>
void ReduceWindowF32(const float* in, float init, float* out, const Shape& in_shape,
                     const Shape& out_shape, const std::vector<WindowDimension>& window,
                     const std::vector<int64_t>& in_strides, int threads) {
  const int64_t rank = in_shape.rank();
  if (rank == 0) {
    out[0] = Op::template Apply<float>(init, in[0]);  // a scalar's only window element
    return;
  }
  std::vector<WindowTable> tables;
  for (int64_t d = 0; d < rank; ++d) {
    tables.push_back(BuildWindowTable(window[d], in_shape.dimensions(d), out_shape.dimensions(d),
                                      in_strides[d]));
  }
  if (PrefixFold<Op>(in, init, out, in_shape, out_shape, window, tables, threads)) return;
  const bool rows = TrivialWindow(window[rank - 1]);
  // Outer dimensions walked per item: all but the last with rows (an item
  // is a row of the last dimension), all of them otherwise.
  const int64_t outer = rows ? rank - 1 : rank;
  const int64_t row = rows ? out_shape.dimensions(rank - 1) : 1;
  const int64_t items = out_shape.num_elements() / row;
  ParallelFor(threads, items, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(outer), at(outer);
    for (int64_t d = outer - 1, rest = begin; d >= 0; --d) {
      idx[d] = rest % out_shape.dimensions(d);
      rest /= out_shape.dimensions(d);
    }
    for (int64_t item = begin; item < end; ++item) {
      float* acc = out + item * row;
      std::fill(acc, acc + row, init);
      bool empty = false;
      for (int64_t d = 0; d < outer; ++d) {
        at[d] = 0;
        empty |= tables[d].count[idx[d]] == 0;
      }
      while (!empty) {
        int64_t offset = 0;
        for (int64_t d = 0; d < outer; ++d) {
          offset += tables[d].first[idx[d]] + at[d] * tables[d].step;
        }
        if (rows) {
          const float* x = in + offset;
          for (int64_t c = 0; c < row; ++c) acc[c] = Op::template Apply<float>(acc[c], x[c]);
        } else {
          acc[0] = Op::template Apply<float>(acc[0], in[offset]);
        }
        int64_t d = outer - 1;
        for (; d >= 0; --d) {
          if (++at[d] < tables[d].count[idx[d]]) break;
          at[d] = 0;
        }
        if (d < 0) break;
      }
      for (int64_t d = outer - 1; d >= 0; --d) {
        if (++idx[d] < out_shape.dimensions(d)) break;
        idx[d] = 0;
      }
    }
  });
}

}  // namespace

absl::Status ReduceWindowKernel(const HloInstruction& instr,
                                absl::Span<const void* const> inputs,
                                absl::Span<const void* const> inits,
                                absl::Span<void* const> outs, int num_threads) {
  const int64_t n = static_cast<int64_t>(inputs.size());
  const Shape& in_shape = instr.operand(0)->shape();
  const Shape& out_shape = instr.shape().IsTuple() ? instr.shape().tuple_shapes(0) : instr.shape();
  const std::vector<WindowDimension>& window = instr.attrs().window;
  const int64_t rank = in_shape.rank();
  if (static_cast<int64_t>(window.size()) != rank || out_shape.rank() != rank ||
      static_cast<int64_t>(inits.size()) != n || static_cast<int64_t>(outs.size()) != n) {
    return absl::InternalError(absl::StrCat("reduce-window %", instr.name(),
                                            ": window, operands and results disagree"));
  }
  const int64_t out_count = out_shape.num_elements();
  if (out_count == 0) return absl::OkStatus();
  std::vector<int64_t> in_strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) {
    in_strides[d] = in_strides[d + 1] * in_shape.dimensions(d + 1);
  }
  int64_t window_count = 1;
  for (const WindowDimension& w : window) window_count *= w.size;
  std::vector<PrimitiveType> types(n);
  std::vector<int> widths(n);
  std::vector<LoadKernel> loads(n);
  std::vector<ScalarValue> init_values(n);
  for (int64_t i = 0; i < n; ++i) {
    types[i] = instr.operand(i)->shape().element_type();
    widths[i] = hlo::ByteWidth(types[i]);
    loads[i] = GetLoadKernel(types[i]);
    loads[i](inits[i], 0, init_values[i].bytes, 1);
  }
  // A plain binary reducer folds with its kernel; anything else runs the
  // reducer computation through the scalar evaluator.
  BinaryKernel combine = nullptr;
  std::unique_ptr<ScalarEvaluator> ev;
  if (std::optional<hlo::HloOpcode> simple = hlo::MatchReducer(instr.to_apply());
      n == 1 && simple.has_value()) {
    ASSIGN_OR_RETURN(combine, GetBinaryKernel(*simple, types[0]));
  } else {
    ASSIGN_OR_RETURN(ev, ScalarEvaluator::Create(instr.to_apply()));
  }
  const int threads =
      out_count * window_count >= kMinParallelWork ? std::max(1, num_threads) : 1;
  // bf16 and f16 windows fold in f32 and round once at the end, as XLA:CPU
  // computes them (its float normalization runs the reduce-window in f32):
  // a bf16 cumulative sum of 600 ones is 600, where rounding every step
  // would stop at 256.
  const bool half = types[0] == PrimitiveType::kBF16 || types[0] == PrimitiveType::kF16;
  if (combine != nullptr && (types[0] == PrimitiveType::kF32 || half)) {
    float init;
    std::memcpy(&init, init_values[0].bytes, sizeof(init));  // compute representation
    std::vector<float> in_f32, out_f32;
    const float* in = static_cast<const float*>(inputs[0]);
    float* out = static_cast<float*>(outs[0]);
    if (half) {
      in_f32.resize(static_cast<size_t>(in_shape.num_elements()));
      loads[0](inputs[0], 1, in_f32.data(), in_shape.num_elements());
      out_f32.resize(static_cast<size_t>(out_count));
      in = in_f32.data();
      out = out_f32.data();
    }
    auto finish = [&]() {
      if (half) GetStoreKernel(types[0])(out_f32.data(), outs[0], out_count);
      return absl::OkStatus();
    };
    using namespace elementwise;  // NOLINT: the op structs
    switch (*hlo::MatchReducer(instr.to_apply())) {
      case hlo::HloOpcode::kAdd:
        ReduceWindowF32<AddOp>(in, init, out, in_shape, out_shape, window, in_strides, threads);
        return finish();
      case hlo::HloOpcode::kMultiply:
        ReduceWindowF32<MulOp>(in, init, out, in_shape, out_shape, window, in_strides, threads);
        return finish();
      case hlo::HloOpcode::kMaximum:
        ReduceWindowF32<MaxOp>(in, init, out, in_shape, out_shape, window, in_strides, threads);
        return finish();
      case hlo::HloOpcode::kMinimum:
        ReduceWindowF32<MinOp>(in, init, out, in_shape, out_shape, window, in_strides, threads);
        return finish();
      default:
        break;  // the generic loop below
    }
  }
  // On the emulator's pool (runtime/cpu/parallel.h), each range with its
  // own scratch; every output element is computed the same way wherever.
  ParallelFor(threads, out_count, [&](int64_t begin, int64_t end) {
    std::vector<std::vector<int64_t>> coords(rank);
    std::vector<int64_t> idx(rank), pick(rank);
    std::vector<ScalarValue> args(2 * n), acc(n), results(n);
    for (int64_t o = begin; o < end; ++o) {
      // Output multi-index, then each dimension's window coordinates.
      const bool empty = !OutputWindow(o, out_shape, in_shape, window, &idx, &coords);
      acc = init_values;
      if (!empty) {
        std::fill(pick.begin(), pick.end(), 0);
        while (true) {
          int64_t offset = 0;
          for (int64_t d = 0; d < rank; ++d) offset += coords[d][pick[d]] * in_strides[d];
          if (combine != nullptr) {
            ScalarValue v;
            loads[0](static_cast<const uint8_t*>(inputs[0]) + offset * widths[0], 1, v.bytes, 1);
            combine(acc[0].bytes, v.bytes, acc[0].bytes, 1);
          } else {
            for (int64_t i = 0; i < n; ++i) {
              args[i] = acc[i];
              args[n + i] = ScalarValue();
              loads[i](static_cast<const uint8_t*>(inputs[i]) + offset * widths[i], 1,
                       args[n + i].bytes, 1);
            }
            ev->Eval(args, results.data());
            acc = results;
          }
          int64_t d = rank - 1;
          for (; d >= 0; --d) {
            if (++pick[d] < static_cast<int64_t>(coords[d].size())) break;
            pick[d] = 0;
          }
          if (d < 0) break;
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        GetStoreKernel(types[i])(acc[i].bytes, static_cast<uint8_t*>(outs[i]) + o * widths[i], 1);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace tpuoff::runtime
