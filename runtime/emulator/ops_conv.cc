// XLA convolution on oneDNN. Every form JAX emits maps onto oneDNN's forward
// convolution: the dimension numbers become the strides of oneDNN memory
// descriptors (no transposes of our own), rhs (window) dilation, strides,
// padding and feature_group_count are oneDNN's own parameters; lhs (base)
// dilation and negative padding are materialised by one oneDNN reorder into
// a zero-filled, dilated and cropped copy of the input; batch_group_count
// runs one convolution per group on sub-memory views. bf16/f16 operands are
// reordered to f32 and the result back (accumulation in f32).
#include <dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/emulator/onednn_threads.h"
#include "runtime/emulator/ops_extra.h"

namespace tpuoff::runtime {
namespace {

using dnnl::memory;
using hlo::HloInstruction;
using hlo::PrimitiveType;
using hlo::Shape;

std::optional<memory::data_type> DnnlType(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kF32: return memory::data_type::f32;
    case PrimitiveType::kBF16: return memory::data_type::bf16;
    case PrimitiveType::kF16: return memory::data_type::f16;
    default: return std::nullopt;
  }
}

std::vector<int64_t> RowMajorStrides(const Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (int64_t d = s.rank() - 2; d >= 0; --d) st[d] = st[d + 1] * s.dimensions(d + 1);
  return st;
}

// Dims and strides of an operand seen in the canonical order `order` (XLA
// dimension per canonical position; -1 = an inserted unit dimension).
memory::desc View(const Shape& s, const std::vector<int64_t>& order, memory::data_type dt) {
  const std::vector<int64_t> st = RowMajorStrides(s);
  memory::dims dims, strides;
  for (int64_t d : order) {
    dims.push_back(d < 0 ? 1 : s.dimensions(d));
    strides.push_back(d < 0 ? 1 : st[d]);
  }
  return memory::desc(dims, dt, strides);
}

memory::dims DenseStrides(const memory::dims& dims) {
  memory::dims st(dims.size(), 1);
  for (int64_t d = static_cast<int64_t>(dims.size()) - 2; d >= 0; --d) {
    st[d] = st[d + 1] * dims[d + 1];
  }
  return st;
}

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

// Below this many multiply-adds a convolution runs single-threaded: 2^25
// (~67 MFLOP, a few ms on one core) is where an OpenMP team starts to pay.
constexpr double kMinParallelConvMacs = double{1 << 25};

Engine& GetEngine() {
  thread_local Engine e;
  return e;
}

void Reorder(Engine& e, const memory& from, const memory& to) {
  dnnl::reorder(from, to).execute(e.stream, const_cast<memory&>(from), const_cast<memory&>(to));
}

}  // namespace

absl::Status ConvolutionKernel(const HloInstruction& instr, const void* lhs, const void* rhs,
                               void* out) {
  const auto fail = [&](absl::string_view why) {
    return absl::UnimplementedError(
        absl::StrCat("convolution ", instr.name(), ": ", why, " is not supported"));
  };
  const Shape& ls = instr.operand(0)->shape();
  const Shape& rs = instr.operand(1)->shape();
  const Shape& os = instr.shape();
  const auto lt = DnnlType(ls.element_type());
  const auto rt = DnnlType(rs.element_type());
  const auto ot = DnnlType(os.element_type());
  if (!lt || !rt || !ot) {
    // Integers, f64 and complex: the direct loop (ops_conv_generic.cc).
    return GenericConvolutionKernel(instr, lhs, rhs, out);
  }
  if (os.num_elements() == 0) return absl::OkStatus();
  const hlo::ConvolutionDimensionNumbers& dn = instr.attrs().conv;
  const auto& win = instr.attrs().window;
  const int64_t ns = static_cast<int64_t>(dn.input_spatial_dimensions.size());
  if (ns > 3) return fail(absl::StrCat(ns, " spatial dimensions (at most 3)"));
  bool reversal = false;
  for (const auto& w : win) reversal |= w.window_reversal;
  const int64_t k = std::max<int64_t>(ns, 1);  // 0-D convolutions run as 1-D
  const int64_t groups = instr.attrs().feature_group_count;
  const int64_t bgroups = instr.attrs().batch_group_count;
  constexpr auto f32 = memory::data_type::f32;
  Engine& e = GetEngine();
  // Multiply-adds: each output element takes (input features / groups) x
  // the window. Small convolutions run on this thread alone
  // (onednn_threads.h); large ones on oneDNN's OpenMP team.
  double window = 1;
  for (int64_t d : dn.kernel_spatial_dimensions) window *= static_cast<double>(rs.dimensions(d));
  const double macs = static_cast<double>(os.num_elements()) * window *
                      static_cast<double>(rs.dimensions(dn.kernel_input_feature_dimension));
  std::optional<OneDnnOnThisThread> one_thread;
  if (macs < kMinParallelConvMacs) one_thread.emplace();
  try {
    // Canonical orders: lhs [N, C, S...], rhs [O, I, K...], out [N, O, S...].
    std::vector<int64_t> lo = {dn.input_batch_dimension, dn.input_feature_dimension};
    std::vector<int64_t> ro = {dn.kernel_output_feature_dimension,
                               dn.kernel_input_feature_dimension};
    std::vector<int64_t> oo = {dn.output_batch_dimension, dn.output_feature_dimension};
    for (int64_t i = 0; i < k; ++i) {
      lo.push_back(i < ns ? dn.input_spatial_dimensions[i] : -1);
      ro.push_back(i < ns ? dn.kernel_spatial_dimensions[i] : -1);
      oo.push_back(i < ns ? dn.output_spatial_dimensions[i] : -1);
    }
    memory::desc lhs_user = View(ls, lo, *lt);
    memory::desc rhs_user = View(rs, ro, *rt);
    memory::desc out_user = View(os, oo, *ot);
    const memory::dims ld = lhs_user.dims();
    const memory::dims rd = rhs_user.dims();
    const memory::dims od = out_user.dims();

    // Input: f32, dense [N, C, P...], dilated and padded/cropped if needed.
    bool materialise = *lt != f32;
    memory::dims strides(k, 1), dilates(k, 0), pad_l(k, 0), pad_r(k, 0);
    for (int64_t i = 0; i < ns; ++i) {
      strides[i] = win[i].stride;
      dilates[i] = win[i].window_dilation - 1;
      pad_l[i] = win[i].padding_low;
      pad_r[i] = win[i].padding_high;
      materialise |= win[i].base_dilation != 1 || pad_l[i] < 0 || pad_r[i] < 0;
    }
    std::vector<float> lhs_buf;
    memory lhs_mem(lhs_user, e.engine, const_cast<void*>(lhs));
    if (materialise) {
      memory::dims pd = {ld[0], ld[1]};
      for (int64_t i = 0; i < k; ++i) {
        const int64_t bd = i < ns ? win[i].base_dilation : 1;
        pd.push_back(std::max<int64_t>((ld[2 + i] - 1) * bd + 1 + pad_l[i] + pad_r[i], 0));
      }
      int64_t total = 1;
      for (int64_t d : pd) total *= d;
      lhs_buf.assign(total, 0.0f);
      const memory::dims pst = DenseStrides(pd);
      // Input elements j with 0 <= j*bd + pad_l < P land in the copy.
      memory::dims src_dims = {ld[0], ld[1]}, dst_strides = {pst[0], pst[1]};
      int64_t src_off = 0, dst_off = 0;
      const memory::dims lst = lhs_user.data.format_desc.blocking.strides
                                   ? memory::dims(lhs_user.data.format_desc.blocking.strides,
                                                  lhs_user.data.format_desc.blocking.strides +
                                                      lhs_user.data.ndims)
                                   : DenseStrides(ld);
      bool empty = false;
      for (int64_t i = 0; i < k; ++i) {
        const int64_t bd = i < ns ? win[i].base_dilation : 1;
        const int64_t first = pad_l[i] >= 0 ? 0 : (-pad_l[i] + bd - 1) / bd;
        const int64_t last_pos = pd[2 + i] - 1 - pad_l[i];
        const int64_t last = last_pos < 0 ? -1 : std::min<int64_t>(ld[2 + i] - 1, last_pos / bd);
        const int64_t count = last - first + 1;
        if (count <= 0) empty = true;
        src_dims.push_back(std::max<int64_t>(count, 0));
        dst_strides.push_back(pst[2 + i] * bd);
        src_off += first * lst[2 + i];
        dst_off += (first * bd + pad_l[i]) * pst[2 + i];
      }
      if (!empty) {
        const size_t lw = hlo::ByteWidth(ls.element_type());
        memory::desc src_view(src_dims, *lt, lst);
        memory::desc dst_view(src_dims, f32, dst_strides);
        memory src_m(src_view, e.engine,
                     const_cast<uint8_t*>(static_cast<const uint8_t*>(lhs)) + src_off * lw);
        memory dst_m(dst_view, e.engine, lhs_buf.data() + dst_off);
        Reorder(e, src_m, dst_m);
      }
      lhs_mem = memory(memory::desc(pd, f32, pst), e.engine, lhs_buf.data());
      std::fill(pad_l.begin(), pad_l.end(), 0);
      std::fill(pad_r.begin(), pad_r.end(), 0);
    }
    // Weights: f32 (a copy when the type differs).
    std::vector<float> rhs_buf;
    memory rhs_mem(rhs_user, e.engine, const_cast<void*>(rhs));
    if (*rt != f32 || reversal) {
      int64_t total = 1;
      for (int64_t d : rd) total *= d;
      rhs_buf.resize(total);
      memory dense(memory::desc(rd, f32, DenseStrides(rd)), e.engine, rhs_buf.data());
      Reorder(e, rhs_mem, dense);
      rhs_mem = dense;
      // Reversed spatial dimensions (window_reversal): flip the dense [O, I, K...] copy.
      const memory::dims st = DenseStrides(rd);
      for (int64_t i = 0; i < ns; ++i) {
        if (!win[i].window_reversal) continue;
        const int64_t dim = 2 + i, size = rd[dim], stride = st[dim];
        const int64_t outer = total / (size * stride);
        for (int64_t o = 0; o < outer; ++o) {
          float* base = rhs_buf.data() + o * size * stride;
          for (int64_t a = 0, b = size - 1; a < b; ++a, --b) {
            std::swap_ranges(base + a * stride, base + (a + 1) * stride, base + b * stride);
          }
        }
      }
    }
    // Output: f32 (a scratch when the type differs).
    std::vector<float> out_buf;
    memory out_mem(out_user, e.engine, out);
    if (*ot != f32) {
      int64_t total = 1;
      for (int64_t d : od) total *= d;
      out_buf.assign(total, 0.0f);
      out_mem = memory(memory::desc(od, f32, DenseStrides(od)), e.engine, out_buf.data());
    }
    const memory::desc lmd = lhs_mem.get_desc();
    const memory::desc rmd = rhs_mem.get_desc();
    const memory::desc omd = out_mem.get_desc();
    const int64_t nb = ld[0] / bgroups;  // batch per batch group
    const int64_t ob = od[1] / bgroups;  // output features per batch group
    for (int64_t g = 0; g < bgroups; ++g) {
      memory::dims lsub = lmd.dims(), osub = omd.dims(), rsub = rmd.dims();
      lsub[0] = nb;
      osub[1] = ob;
      rsub[0] = ob;
      memory::dims loff(lsub.size(), 0), ooff(osub.size(), 0), roff(rsub.size(), 0);
      loff[0] = g * nb;
      ooff[1] = g * ob;
      roff[0] = g * ob;
      memory::desc l = bgroups > 1 ? lmd.submemory_desc(lsub, loff) : lmd;
      memory::desc o = bgroups > 1 ? omd.submemory_desc(osub, ooff) : omd;
      memory::desc r = bgroups > 1 ? rmd.submemory_desc(rsub, roff) : rmd;
      if (groups > 1) {
        // [O, I/G, K...] -> [G, O/G, I/G, K...]
        memory::dims gd = {groups, r.dims()[0] / groups}, gs;
        const memory::dims rstr(r.data.format_desc.blocking.strides,
                                r.data.format_desc.blocking.strides + r.data.ndims);
        gs = {rstr[0] * (r.dims()[0] / groups), rstr[0]};
        for (size_t i = 1; i < r.dims().size(); ++i) {
          gd.push_back(r.dims()[i]);
          gs.push_back(rstr[i]);
        }
        memory::desc gr(gd, f32, gs);
        gr.data.offset0 = r.data.offset0;
        r = gr;
      }
      // Primitive with its preferred layouts; reorders in and out.
      memory::desc l_any(l.dims(), f32, memory::format_tag::any);
      memory::desc r_any(r.dims(), f32, memory::format_tag::any);
      memory::desc o_any(o.dims(), f32, memory::format_tag::any);
      dnnl::convolution_forward::desc cd(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, l_any, r_any,
          o_any, strides, dilates, pad_l, pad_r);
      dnnl::convolution_forward::primitive_desc pd(cd, e.engine);
      memory lm(l, e.engine, lhs_mem.get_data_handle());
      memory rm(r, e.engine, rhs_mem.get_data_handle());
      memory om(o, e.engine, out_mem.get_data_handle());
      memory lp = lm, rp = rm, op = om;
      if (pd.src_desc() != l) {
        lp = memory(pd.src_desc(), e.engine);
        Reorder(e, lm, lp);
      }
      if (pd.weights_desc() != r) {
        rp = memory(pd.weights_desc(), e.engine);
        Reorder(e, rm, rp);
      }
      if (pd.dst_desc() != o) op = memory(pd.dst_desc(), e.engine);
      dnnl::convolution_forward(pd).execute(
          e.stream, {{DNNL_ARG_SRC, lp}, {DNNL_ARG_WEIGHTS, rp}, {DNNL_ARG_DST, op}});
      if (pd.dst_desc() != o) Reorder(e, op, om);
    }
    if (*ot != f32) {
      memory user(out_user, e.engine, out);
      Reorder(e, out_mem, user);
    }
    e.stream.wait();
  } catch (const dnnl::error& err) {
    return absl::InternalError(
        absl::StrCat("convolution ", instr.name(), ": oneDNN failed: ", err.what()));
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::runtime
