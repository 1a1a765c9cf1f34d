// Data-movement kernels: concatenate, pad, dynamic slices, gather, scatter,
// physical bitcast.
#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "runtime/cpu/elementwise_kernels.h"
#include "runtime/emulator/ops.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::PrimitiveType;
using hlo::Shape;

// Advances a row-major multi-index; false after the last one.
bool Next(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

int64_t Clamp(int64_t v, int64_t lo, int64_t hi) {
  return std::max(lo, std::min(v, hi));
}

}  // namespace

int64_t ReadIndex(PrimitiveType type, const void* data) {
  switch (type) {
    case PrimitiveType::kS8: return *static_cast<const int8_t*>(data);
    case PrimitiveType::kS16: return *static_cast<const int16_t*>(data);
    case PrimitiveType::kS32: return *static_cast<const int32_t*>(data);
    case PrimitiveType::kS64: return *static_cast<const int64_t*>(data);
    case PrimitiveType::kU8: return *static_cast<const uint8_t*>(data);
    case PrimitiveType::kU16: return *static_cast<const uint16_t*>(data);
    case PrimitiveType::kU32: return *static_cast<const uint32_t*>(data);
    case PrimitiveType::kU64: {
      const uint64_t v = *static_cast<const uint64_t*>(data);
      return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                  : static_cast<int64_t>(v);
    }
    default: return 0;
  }
}

void ConcatenateKernel(const HloInstruction& instr,
                       absl::Span<const void* const> inputs, void* out) {
  const Shape& s = instr.shape();
  const int64_t dim = instr.dimensions()[0];
  const int64_t width = hlo::ByteWidth(s.element_type());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= s.dimensions(d);
  for (int64_t d = dim + 1; d < s.rank(); ++d) inner *= s.dimensions(d);
  const int64_t out_row = s.dimensions(dim) * inner * width;
  int64_t offset = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t row = instr.operand(i)->shape().dimensions(dim) * inner * width;
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(static_cast<uint8_t*>(out) + o * out_row + offset,
                  static_cast<const uint8_t*>(inputs[i]) + o * row, row);
    }
    offset += row;
  }
}

void PadKernel(const HloInstruction& instr, const void* in,
               const void* pad_value, void* out) {
  const Shape& os = instr.shape();
  const Shape& is = instr.operand(0)->shape();
  const int64_t width = hlo::ByteWidth(os.element_type());
  const int64_t n_out = os.num_elements();
  for (int64_t i = 0; i < n_out; ++i) {
    std::memcpy(static_cast<uint8_t*>(out) + i * width, pad_value, width);
  }
  if (is.num_elements() == 0) return;
  const std::vector<int64_t> ostr = os.Strides();
  std::vector<int64_t> idx(is.rank(), 0);
  int64_t linear = 0;
  do {
    int64_t pos = 0;
    bool inside = true;
    for (int64_t d = 0; d < is.rank(); ++d) {
      const hlo::PaddingDimension& p = instr.attrs().padding[d];
      const int64_t o = p.edge_padding_low + idx[d] * (p.interior_padding + 1);
      if (o < 0 || o >= os.dimensions(d)) {
        inside = false;
        break;
      }
      pos += o * ostr[d];
    }
    if (inside) {
      std::memcpy(static_cast<uint8_t*>(out) + pos * width,
                  static_cast<const uint8_t*>(in) + linear * width, width);
    }
    ++linear;
  } while (Next(idx, is.dimensions()));
}

void DynamicSliceKernel(const HloInstruction& instr, const void* in,
                        std::vector<int64_t> starts, void* out) {
  const Shape& is = instr.operand(0)->shape();
  const Shape& os = instr.shape();
  const int64_t rank = is.rank();
  const int64_t width = hlo::ByteWidth(os.element_type());
  for (int64_t d = 0; d < rank; ++d) {
    starts[d] = Clamp(starts[d], 0, is.dimensions(d) - os.dimensions(d));
  }
  if (os.num_elements() == 0) return;
  if (rank == 0) {
    std::memcpy(out, in, width);
    return;
  }
  const std::vector<int64_t> istr = is.Strides();
  const int64_t cols = os.dimensions(rank - 1);
  std::vector<int64_t> row_dims(os.dimensions().begin(), os.dimensions().end() - 1);
  std::vector<int64_t> idx(rank - 1, 0);
  int64_t row = 0;
  do {
    int64_t src = starts[rank - 1];
    for (int64_t d = 0; d + 1 < rank; ++d) src += (starts[d] + idx[d]) * istr[d];
    std::memcpy(static_cast<uint8_t*>(out) + row * cols * width,
                static_cast<const uint8_t*>(in) + src * width, cols * width);
    ++row;
  } while (Next(idx, row_dims));
}

void DynamicUpdateSliceKernel(const HloInstruction& instr, const void* operand,
                              const void* update, std::vector<int64_t> starts,
                              void* out) {
  const Shape& os = instr.shape();
  const Shape& us = instr.operand(1)->shape();
  const int64_t rank = os.rank();
  const int64_t width = hlo::ByteWidth(os.element_type());
  if (out != operand) std::memcpy(out, operand, os.byte_size());
  for (int64_t d = 0; d < rank; ++d) {
    starts[d] = Clamp(starts[d], 0, os.dimensions(d) - us.dimensions(d));
  }
  if (us.num_elements() == 0) return;
  if (rank == 0) {
    std::memcpy(out, update, width);
    return;
  }
  const std::vector<int64_t> ostr = os.Strides();
  const int64_t cols = us.dimensions(rank - 1);
  std::vector<int64_t> row_dims(us.dimensions().begin(), us.dimensions().end() - 1);
  std::vector<int64_t> idx(rank - 1, 0);
  int64_t row = 0;
  do {
    int64_t dst = starts[rank - 1];
    for (int64_t d = 0; d + 1 < rank; ++d) dst += (starts[d] + idx[d]) * ostr[d];
    std::memcpy(static_cast<uint8_t*>(out) + dst * width,
                static_cast<const uint8_t*>(update) + row * cols * width,
                cols * width);
    ++row;
  } while (Next(idx, row_dims));
}

void GatherKernel(const HloInstruction& instr, const void* operand,
                  const void* indices, void* out) {
  const hlo::GatherDimensionNumbers& g = instr.attrs().gather;
  const Shape& os = instr.operand(0)->shape();
  const Shape& is = instr.operand(1)->shape();
  const Shape& rs = instr.shape();
  const auto& sizes = instr.attrs().gather_slice_sizes;
  const int64_t width = hlo::ByteWidth(rs.element_type());
  const int64_t iwidth = hlo::ByteWidth(is.element_type());
  if (rs.num_elements() == 0) return;
  const std::vector<int64_t> ostr = os.rank() ? os.Strides() : std::vector<int64_t>{};
  const std::vector<int64_t> istr = is.rank() ? is.Strides() : std::vector<int64_t>{};
  // Batch dims of the result, in order, map to indices dims != index_vector_dim.
  std::vector<int64_t> batch_dims_out, indices_batch_dims;
  for (int64_t d = 0; d < rs.rank(); ++d) {
    if (!Contains(g.offset_dims, d)) batch_dims_out.push_back(d);
  }
  for (int64_t d = 0; d < is.rank(); ++d) {
    if (d != g.index_vector_dim) indices_batch_dims.push_back(d);
  }
  // Offset dims of the result map to operand dims not collapsed/batching.
  std::vector<int64_t> offset_operand_dims;
  for (int64_t d = 0; d < os.rank(); ++d) {
    if (!Contains(g.collapsed_slice_dims, d) && !Contains(g.operand_batching_dims, d)) {
      offset_operand_dims.push_back(d);
    }
  }
  const int64_t ivs = g.index_vector_dim < is.rank() ? is.dimensions(g.index_vector_dim) : 1;
  std::vector<int64_t> idx(rs.rank(), 0), in_idx(is.rank(), 0), start(os.rank());
  int64_t linear = 0;
  do {
    for (size_t b = 0; b < batch_dims_out.size(); ++b) {
      in_idx[indices_batch_dims[b]] = idx[batch_dims_out[b]];
    }
    std::fill(start.begin(), start.end(), 0);
    for (int64_t k = 0; k < ivs; ++k) {
      if (g.index_vector_dim < is.rank()) in_idx[g.index_vector_dim] = k;
      const int64_t pos = is.rank() ? hlo::LinearIndex(in_idx, istr) : 0;
      const int64_t d = g.start_index_map[k];
      start[d] = ReadIndex(is.element_type(),
                           static_cast<const uint8_t*>(indices) + pos * iwidth);
    }
    for (size_t i = 0; i < g.operand_batching_dims.size(); ++i) {
      // The batch coordinate of start_indices_batching_dims[i].
      const int64_t idim = g.start_indices_batching_dims[i];
      start[g.operand_batching_dims[i]] = in_idx[idim];
    }
    int64_t src = 0;
    for (int64_t d = 0; d < os.rank(); ++d) {
      start[d] = Clamp(start[d], 0, os.dimensions(d) - sizes[d]);
    }
    std::vector<int64_t> full = start;
    for (size_t j = 0; j < offset_operand_dims.size(); ++j) {
      full[offset_operand_dims[j]] += idx[g.offset_dims[j]];
    }
    src = os.rank() ? hlo::LinearIndex(full, ostr) : 0;
    std::memcpy(static_cast<uint8_t*>(out) + linear * width,
                static_cast<const uint8_t*>(operand) + src * width, width);
    ++linear;
  } while (Next(idx, rs.dimensions()));
}

absl::Status ScatterKernel(const HloInstruction& instr,
                           absl::Span<const void* const> operands,
                           const void* indices,
                           absl::Span<const void* const> updates,
                           absl::Span<void* const> outs) {
  const hlo::ScatterDimensionNumbers& sd = instr.attrs().scatter;
  const int64_t n = static_cast<int64_t>(operands.size());
  const Shape& os = instr.operand(0)->shape();
  const Shape& is = instr.operand(n)->shape();
  const Shape& us = instr.operand(n + 1)->shape();
  ASSIGN_OR_RETURN(std::unique_ptr<ScalarEvaluator> combiner,
                   ScalarEvaluator::Create(instr.to_apply()));
  for (int64_t i = 0; i < n; ++i) {
    if (outs[i] != operands[i]) {
      std::memcpy(outs[i], operands[i], instr.operand(i)->shape().byte_size());
    }
  }
  if (us.num_elements() == 0) return absl::OkStatus();
  const std::vector<int64_t> ostr = os.rank() ? os.Strides() : std::vector<int64_t>{};
  const std::vector<int64_t> istr = is.rank() ? is.Strides() : std::vector<int64_t>{};
  std::vector<int64_t> scatter_dims_upd, indices_batch_dims, window_operand_dims;
  for (int64_t d = 0; d < us.rank(); ++d) {
    if (!Contains(sd.update_window_dims, d)) scatter_dims_upd.push_back(d);
  }
  for (int64_t d = 0; d < is.rank(); ++d) {
    if (d != sd.index_vector_dim) indices_batch_dims.push_back(d);
  }
  for (int64_t d = 0; d < os.rank(); ++d) {
    if (!Contains(sd.inserted_window_dims, d) && !Contains(sd.input_batching_dims, d)) {
      window_operand_dims.push_back(d);
    }
  }
  std::vector<int64_t> window_size(os.rank(), 1);
  for (size_t j = 0; j < window_operand_dims.size(); ++j) {
    window_size[window_operand_dims[j]] = us.dimensions(sd.update_window_dims[j]);
  }
  const int64_t ivs = sd.index_vector_dim < is.rank() ? is.dimensions(sd.index_vector_dim) : 1;
  std::vector<LoadKernel> loads(n);
  std::vector<StoreKernel> stores(n);
  std::vector<int64_t> widths(n);
  for (int64_t i = 0; i < n; ++i) {
    const PrimitiveType t = instr.operand(i)->shape().element_type();
    loads[i] = GetLoadKernel(t);
    stores[i] = GetStoreKernel(t);
    widths[i] = hlo::ByteWidth(t);
  }
  std::vector<int64_t> idx(us.rank(), 0), in_idx(is.rank(), 0), start(os.rank());
  std::vector<ScalarValue> args(2 * n), results(n);
  int64_t linear = 0;
  do {
    for (size_t b = 0; b < scatter_dims_upd.size(); ++b) {
      in_idx[indices_batch_dims[b]] = idx[scatter_dims_upd[b]];
    }
    std::fill(start.begin(), start.end(), 0);
    for (int64_t k = 0; k < ivs; ++k) {
      if (sd.index_vector_dim < is.rank()) in_idx[sd.index_vector_dim] = k;
      const int64_t pos = is.rank() ? hlo::LinearIndex(in_idx, istr) : 0;
      start[sd.scatter_dims_to_operand_dims[k]] =
          ReadIndex(is.element_type(), static_cast<const uint8_t*>(indices) +
                                           pos * hlo::ByteWidth(is.element_type()));
    }
    for (size_t i = 0; i < sd.input_batching_dims.size(); ++i) {
      start[sd.input_batching_dims[i]] = in_idx[sd.scatter_indices_batching_dims[i]];
    }
    bool in_bounds = true;
    for (int64_t d = 0; d < os.rank(); ++d) {
      if (start[d] < 0 || start[d] + window_size[d] > os.dimensions(d)) in_bounds = false;
    }
    if (in_bounds) {
      std::vector<int64_t> full = start;
      for (size_t j = 0; j < window_operand_dims.size(); ++j) {
        full[window_operand_dims[j]] += idx[sd.update_window_dims[j]];
      }
      const int64_t dst = os.rank() ? hlo::LinearIndex(full, ostr) : 0;
      for (int64_t i = 0; i < n; ++i) {
        args[i] = ScalarValue();
        args[n + i] = ScalarValue();
        loads[i](static_cast<const uint8_t*>(outs[i]) + dst * widths[i], 1, args[i].bytes, 1);
        loads[i](static_cast<const uint8_t*>(updates[i]) + linear * widths[i], 1,
                 args[n + i].bytes, 1);
      }
      combiner->Eval(args, results.data());
      for (int64_t i = 0; i < n; ++i) {
        stores[i](results[i].bytes, static_cast<uint8_t*>(outs[i]) + dst * widths[i], 1);
      }
    }
    ++linear;
  } while (Next(idx, us.dimensions()));
  return absl::OkStatus();
}

absl::Status BitcastPhysicalKernel(const HloInstruction& instr, const void* in,
                                   void* out) {
  const Shape& is = instr.operand(0)->shape();
  const Shape& os = instr.shape();
  const int64_t width = hlo::ByteWidth(os.element_type());
  if (width != hlo::ByteWidth(is.element_type()) ||
      is.num_elements() != os.num_elements()) {
    return absl::UnimplementedError(absl::StrCat(
        "bitcast %", instr.name(), " changes the element width or count"));
  }
  // Logical linear index of each physical position, for one shape.
  auto logical_of_physical = [](const Shape& s) {
    std::vector<int64_t> m2m = s.minor_to_major();
    if (m2m.empty()) {
      for (int64_t d = s.rank() - 1; d >= 0; --d) m2m.push_back(d);
    }
    std::vector<int64_t> major_to_minor(m2m.rbegin(), m2m.rend());
    std::vector<int64_t> phys_dims;
    for (int64_t d : major_to_minor) phys_dims.push_back(s.dimensions(d));
    const std::vector<int64_t> strides = s.rank() ? s.Strides() : std::vector<int64_t>{};
    std::vector<int64_t> result;
    result.reserve(s.num_elements());
    if (s.num_elements() == 0) return result;
    std::vector<int64_t> idx(s.rank(), 0);
    do {
      int64_t logical = 0;
      for (size_t k = 0; k < major_to_minor.size(); ++k) {
        logical += idx[k] * strides[major_to_minor[k]];
      }
      result.push_back(logical);
    } while (Next(idx, phys_dims));
    return result;
  };
  const std::vector<int64_t> in_map = logical_of_physical(is);
  const std::vector<int64_t> out_map = logical_of_physical(os);
  for (size_t p = 0; p < in_map.size(); ++p) {
    std::memcpy(static_cast<uint8_t*>(out) + out_map[p] * width,
                static_cast<const uint8_t*>(in) + in_map[p] * width, width);
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::runtime
