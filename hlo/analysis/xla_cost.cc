// Counting as XLA's HloCostAnalysis (xla/service/hlo_cost_analysis.cc) does,
// re-derived for our IR: the per-opcode rules for flops, transcendentals and
// bytes accessed, sub-computations (reduce, map, scatter, while, call,
// conditional, fusion) folded in the way XLA folds them. Checked against
// jaxlib's hlo_module_cost_analysis by tools/xla_check/cost_check.py.
#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/container/flat_hash_set.h"
#include "hlo/analysis/cost_analysis.h"
#include "hlo/ir/computation.h"

namespace tpuoff::hlo {
namespace {

constexpr int64_t kPointerSize = 8;  // XLA:CPU's tuple index table entries
constexpr double kFmaFlops = 2;

// Per-key sums of one computation, as XLA's nested visitor returns them.
struct Props {
  double flops = 0;
  double transcendentals = 0;
  double bytes = 0;
  double output_bytes = 0;
  double mxu_flops = 0;
};

bool IsTranscendental(HloOpcode op) {
  switch (op) {
    case HloOpcode::kAcosh:
    case HloOpcode::kErf:
    case HloOpcode::kExp:
    case HloOpcode::kLog:
    case HloOpcode::kLogistic:
    case HloOpcode::kPower:
    case HloOpcode::kSqrt:
    case HloOpcode::kCbrt:
    case HloOpcode::kRsqrt:
    case HloOpcode::kTanh:
    case HloOpcode::kSine:
    case HloOpcode::kCosine:
    case HloOpcode::kExpm1:
    case HloOpcode::kLog1p:
    case HloOpcode::kAtan2:
    case HloOpcode::kTan:
      return true;
    default:
      return false;
  }
}

// Ops XLA's visitor routes to HandleElementwiseOp.
bool IsXlaElementwise(HloOpcode op) {
  if (IsElementwiseUnary(op) || IsElementwiseBinary(op)) return true;
  switch (op) {
    case HloOpcode::kCompare:
    case HloOpcode::kClamp:
    case HloOpcode::kSelect:
    case HloOpcode::kConvert:
    case HloOpcode::kBitcastConvert:
    case HloOpcode::kReducePrecision:
    case HloOpcode::kIsFinite:
    case HloOpcode::kReal:
    case HloOpcode::kImag:
    case HloOpcode::kComplex:
    case HloOpcode::kStochasticConvert:
      return true;
    default:
      return false;
  }
}

double Elements(const Shape& s) { return s.IsArray() ? static_cast<double>(s.num_elements()) : 0; }

double ElementsRecursive(const Shape& s) {
  if (s.IsArray()) return Elements(s);
  double n = 0;
  for (const Shape& t : s.tuple_shapes()) n += ElementsRecursive(t);
  return n;
}

// Default layout or the one given: a transpose is XLA's "effective bitcast"
// when it permutes the minor-to-major order onto itself.
std::vector<int64_t> MinorToMajor(const Shape& s) {
  if (static_cast<int64_t>(s.minor_to_major().size()) == s.rank()) return s.minor_to_major();
  std::vector<int64_t> m2m(s.rank());
  for (int64_t i = 0; i < s.rank(); ++i) m2m[i] = s.rank() - 1 - i;
  return m2m;
}

bool TransposeIsBitcast(const HloInstruction& t) {
  const Shape& in = t.operand(0)->shape();
  const Shape& out = t.shape();
  if (in.element_type() != out.element_type()) return false;
  const std::vector<int64_t> in_m2m = MinorToMajor(in);
  const std::vector<int64_t> out_m2m = MinorToMajor(out);
  const std::vector<int64_t>& perm = t.dimensions();
  if (perm.size() != out_m2m.size()) return false;
  for (size_t i = 0; i < out_m2m.size(); ++i) {
    if (perm[out_m2m[i]] != in_m2m[i]) return false;
  }
  return true;
}

double DotFlops(const HloInstruction& dot) {
  double width = 1;
  const Shape& lhs = dot.operand(0)->shape();
  for (int64_t d : dot.attrs().dot.lhs_contracting_dimensions) width *= lhs.dimensions(d);
  return kFmaFlops * Elements(dot.shape()) * width;
}

// XLA's GetConvolutionFlops: FMAs over the valid (unpadded, undilated)
// positions of every spatial dimension.
double ConvolutionFlops(const HloInstruction& conv) {
  const ConvolutionDimensionNumbers& dn = conv.attrs().conv;
  const Shape& lhs = conv.operand(0)->shape();
  const Shape& rhs = conv.operand(1)->shape();
  const Shape& out = conv.shape();
  const double input_feature = lhs.dimensions(dn.input_feature_dimension);
  const double output_feature = out.dimensions(dn.output_feature_dimension);
  const double batch = lhs.dimensions(dn.input_batch_dimension);
  double positions = 1;
  const std::vector<WindowDimension>& window = conv.attrs().window;
  for (size_t s = 0; s < window.size(); ++s) {
    const WindowDimension& w = window[s];
    const int64_t k_lim = rhs.dimensions(dn.kernel_spatial_dimensions[s]);
    const int64_t o_lim = out.dimensions(dn.output_spatial_dimensions[s]);
    const int64_t i_lim = lhs.dimensions(dn.input_spatial_dimensions[s]);
    if (i_lim == o_lim && k_lim == o_lim && i_lim == w.base_dilation && w.window_dilation == 1 &&
        std::max<int64_t>(1, i_lim - 1) == w.stride && w.padding_low == 0 && w.padding_high == 0) {
      positions *= static_cast<double>(i_lim);
      continue;
    }
    if (i_lim == 1 && k_lim == o_lim && w.window_dilation == 1 && w.base_dilation == 1 &&
        w.stride == 1 && w.padding_high == o_lim - 1 && w.padding_low == o_lim - 1) {
      positions *= static_cast<double>(o_lim);
      continue;
    }
    int64_t valid = 0;
    for (int64_t k = 0; k < k_lim; ++k) {
      if (w.stride == 1 && w.base_dilation == 1) {
        const int64_t base = w.padding_low - k * w.window_dilation;
        valid += std::max<int64_t>(
            std::min<int64_t>(i_lim + base, o_lim) - std::max<int64_t>(base, 0), 0);
        continue;
      }
      for (int64_t o = 0; o < o_lim; ++o) {
        const int64_t undilated = o * w.stride - w.padding_low + k * w.window_dilation;
        const int64_t idx = w.base_dilation > 1 ? undilated / w.base_dilation : undilated;
        if (undilated != idx * w.base_dilation) continue;
        if (idx < 0 || idx >= i_lim) continue;
        ++valid;
      }
    }
    positions *= static_cast<double>(valid);
  }
  const double fmas = std::floor(input_feature / conv.attrs().feature_group_count) *
                      output_feature * std::floor(batch / conv.attrs().batch_group_count) *
                      positions;
  return fmas * kFmaFlops;
}

double LeafBytes(const Shape& s) {
  if (!s.IsTuple()) return static_cast<double>(XlaShapeSize(s));
  double n = 0;
  for (const Shape& t : s.tuple_shapes()) n += LeafBytes(t);
  return n;
}

int64_t Log2Ceiling(uint64_t n) {
  int64_t r = 0;
  while ((uint64_t{1} << r) < n && r < 63) ++r;
  return r;
}

class XlaCounter {
 public:
  Props Computation(const HloComputation* c) {
    Props sum;
    for (const auto& x : c->instructions()) {
      const Props p = Instruction(*x);
      sum.flops += p.flops;
      sum.transcendentals += p.transcendentals;
      sum.bytes += p.bytes;
      sum.output_bytes += p.output_bytes;
      sum.mxu_flops += p.mxu_flops;
    }
    return sum;
  }

  Props Instruction(const HloInstruction& x) {
    Props p;
    const HloOpcode op = x.opcode();
    // Preprocess: operands + output; a tuple-shaped output counts its
    // leaves (jaxlib 0.10's HloCostAnalysis), a tuple operand its pointer
    // table.
    p.output_bytes = LeafBytes(x.shape());
    p.bytes = p.output_bytes;
    for (const HloInstruction* o : x.operands()) p.bytes += XlaShapeSize(o->shape());

    auto zero_bytes = [&] { p.bytes = 0; p.output_bytes = 0; };
    // Keys copied from a sub-computation (flops-like, not bytes).
    auto scaled = [&](const Props& sub, double n) {
      p.flops = sub.flops * n;
      p.transcendentals = sub.transcendentals * n;
      p.mxu_flops = sub.mxu_flops * n;
    };
    if (IsXlaElementwise(op)) {
      (IsTranscendental(op) ? p.transcendentals : p.flops) = Elements(x.shape());
      return p;
    }
    switch (op) {
      case HloOpcode::kParameter:
      case HloOpcode::kConstant:
      case HloOpcode::kGetTupleElement:
      case HloOpcode::kBitcast:
      case HloOpcode::kDomain:
      case HloOpcode::kAfterAll:
      case HloOpcode::kAddDependency:
        zero_bytes();
        return p;
      case HloOpcode::kTranspose:
        if (TransposeIsBitcast(x)) zero_bytes();
        return p;
      case HloOpcode::kTuple:
        p.output_bytes = XlaShapeSize(x.shape());
        p.bytes = p.output_bytes;
        return p;
      case HloOpcode::kSlice:
        p.bytes = 2 * p.output_bytes;
        return p;
      case HloOpcode::kDynamicSlice:
        p.bytes = 2 * p.output_bytes + XlaShapeSize(x.operand(1)->shape());
        return p;
      case HloOpcode::kDynamicUpdateSlice: {
        const double update = XlaShapeSize(x.operand(1)->shape());
        p.bytes = 2 * update + XlaShapeSize(x.operand(2)->shape());
        p.output_bytes = update;
        return p;
      }
      case HloOpcode::kGather:
        p.bytes = 2 * p.output_bytes + XlaShapeSize(x.operand(1)->shape());
        return p;
      case HloOpcode::kScatter: {
        const int64_t n = x.operand_count() / 2;  // inputs, indices, updates
        double updates = 0;
        for (int64_t i = 0; i < n; ++i) updates += XlaShapeSize(x.operand(n + 1 + i)->shape());
        p.bytes = 3 * updates + XlaShapeSize(x.operand(n)->shape());
        p.output_bytes = updates;
        scaled(Computation(x.to_apply()), Elements(x.operand(n + 1)->shape()));
        return p;
      }
      case HloOpcode::kDot:
        p.flops = p.mxu_flops = DotFlops(x);
        return p;
      case HloOpcode::kConvolution:
        p.flops = p.mxu_flops = ConvolutionFlops(x);
        return p;
      case HloOpcode::kReduce: {
        const Shape& out = x.shape().IsArray() ? x.shape() : x.shape().tuple_shapes(0);
        scaled(Computation(x.to_apply()), Elements(x.operand(0)->shape()) - Elements(out));
        return p;
      }
      case HloOpcode::kMap:
        scaled(Computation(x.to_apply()), Elements(x.shape()));
        return p;
      case HloOpcode::kReduceWindow:
        scaled(Computation(x.to_apply()), ReduceWindowCount(x));
        return p;
      case HloOpcode::kSelectAndScatter: {
        const Props select = Computation(x.called_computations().at(0));
        const Props scatter = Computation(x.called_computations().at(1));
        double window = 1;
        for (const WindowDimension& w : x.attrs().window) window *= static_cast<double>(w.size);
        const double source = Elements(x.operand(1)->shape());
        p.flops = select.flops * source * (window - 1) + scatter.flops * source;
        p.transcendentals =
            select.transcendentals * source * (window - 1) + scatter.transcendentals * source;
        return p;
      }
      case HloOpcode::kSort: {
        const double n = Elements(x.operand(0)->shape());
        p.flops = n * static_cast<double>(Log2Ceiling(static_cast<uint64_t>(n)));
        return p;
      }
      case HloOpcode::kAllReduce:
      case HloOpcode::kAllReduceStart: {
        double flops = 0;
        double out = 0;
        std::function<void(const Shape&)> walk = [&](const Shape& s) {
          if (s.IsArray()) {
            flops += Elements(s);
            out += XlaShapeSize(s);
          }
          for (const Shape& t : s.tuple_shapes()) walk(t);
        };
        walk(x.shape());
        p.flops = flops;
        p.output_bytes = out;
        p.bytes = out;
        for (const HloInstruction* o : x.operands()) p.bytes += XlaShapeSize(o->shape());
        return p;
      }
      case HloOpcode::kRng:
        p.transcendentals = Elements(x.shape());
        return p;
      case HloOpcode::kRngBitGenerator:
        p.transcendentals = ElementsRecursive(x.shape());
        return p;
      case HloOpcode::kCall: {
        const Props sub = Computation(x.to_apply());
        return sub;
      }
      case HloOpcode::kWhile: {
        Props sub = Computation(x.while_body());
        const Props cond = Computation(x.while_condition());
        sub.flops += cond.flops;
        sub.transcendentals += cond.transcendentals;
        sub.bytes += cond.bytes;
        sub.output_bytes += cond.output_bytes;
        sub.mxu_flops += cond.mxu_flops;
        return sub;
      }
      case HloOpcode::kConditional: {
        Props best;
        bool first = true;
        for (const HloComputation* branch : x.called_computations()) {
          const Props b = Computation(branch);
          if (first) {
            best = b;
            first = false;
            continue;
          }
          best.flops = std::max(best.flops, b.flops);
          best.transcendentals = std::max(best.transcendentals, b.transcendentals);
          best.bytes = std::max(best.bytes, b.bytes);
          best.output_bytes = std::max(best.output_bytes, b.output_bytes);
          best.mxu_flops = std::max(best.mxu_flops, b.mxu_flops);
        }
        return best;
      }
      case HloOpcode::kCustomCall:
        // XLA marks what it cannot know as -1 (and the sums carry it).
        p.flops = -1;
        p.bytes = -1;
        p.output_bytes = -1;
        return p;
      case HloOpcode::kFusion:
        return Fusion(x);
      case HloOpcode::kTriangularSolve: {
        const Shape& a = x.operand(0)->shape();
        p.bytes = XlaShapeSize(x.shape()) + XlaShapeSize(a) / 2.0 +
                  XlaShapeSize(x.operand(1)->shape());
        p.flops = kFmaFlops * static_cast<double>(a.dimensions(a.rank() - 1)) *
                  Elements(x.operand(1)->shape());
        return p;
      }
      case HloOpcode::kFft: {
        // 4 complex FMAs per element per factor of two of each length.
        double log_factors = 1;
        for (int64_t l : x.attrs().fft_length) {
          log_factors *= l > 0 ? static_cast<double>(63 - __builtin_clzll(static_cast<uint64_t>(l)))
                               : -1.0;
        }
        p.flops = kFmaFlops * 4 * log_factors * Elements(x.operand(0)->shape());
        return p;
      }
      case HloOpcode::kCholesky: {
        const Shape& a = x.operand(0)->shape();
        p.bytes = XlaShapeSize(a);
        p.output_bytes = XlaShapeSize(a) / 2.0;
        p.flops = std::floor(static_cast<double>(a.dimensions(a.rank() - 1)) * Elements(a) / 3);
        return p;
      }
      default:
        return p;  // copy, reshape, broadcast, pad, concatenate, iota, ...
    }
  }

 private:
  // XLA's reduction count of a reduce-window, including its special case of
  // a reduce-then-broadcast along one padded dimension.
  static double ReduceWindowCount(const HloInstruction& x) {
    const std::vector<WindowDimension>& w = x.attrs().window;
    double window = 1;
    int reduce_dims = 0;
    int padded_dims = 0;
    for (const WindowDimension& d : w) {
      window *= static_cast<double>(d.size);
      if (d.size != 1) ++reduce_dims;
      if (d.padding_low != 0 || d.padding_high != 0) ++padded_dims;
    }
    const Shape& out = x.shape().IsArray() ? x.shape() : x.shape().tuple_shapes(0);
    double count = (window - 1) * Elements(out);
    if (reduce_dims == 1 && padded_dims == 1 && x.shape().IsArray()) {
      for (size_t i = 0; i < w.size(); ++i) {
        const WindowDimension& d = w[i];
        if (d.size != 1 && d.padding_low != 0 && d.padding_high != 0 &&
            d.padding_low == d.padding_high && d.size == 2 * d.padding_low + 1) {
          if (d.padding_low == out.dimensions(static_cast<int64_t>(i)) - 1) {
            const double span = static_cast<double>(out.dimensions(static_cast<int64_t>(i)));
            count = std::floor(Elements(out) / span) + (span - 1);
          }
          break;
        }
      }
    }
    return count;
  }

  // Bytes a fused parameter (or a get-tuple-element of one) is read with.
  double ParameterReadBytes(const HloInstruction* h) {
    double size = 0;
    bool seen_trivial = false;
    for (const HloInstruction* user : UniqueUsers(h)) {
      switch (user->opcode()) {
        case HloOpcode::kFusion: {
          const HloComputation* inner = user->called_computations().at(0);
          const HloInstruction* root = inner->root();
          for (int64_t idx = 0; idx < user->operand_count(); ++idx) {
            if (user->operand(idx) != h) continue;
            bool nested_seen = false;
            const HloInstruction* param = inner->parameter(idx);
            const bool simple = root->operand_count() == 0 || param == root->operand(0);
            for (const HloInstruction* fu : UniqueUsers(user)) {
              if (simple && fu->opcode() == HloOpcode::kSlice) {
                size += XlaShapeSize(fu->shape());
              } else if (simple && fu->opcode() == HloOpcode::kDynamicSlice) {
                if (user == fu->operand(0)) {
                  size += XlaShapeSize(fu->shape());
                } else if (!nested_seen) {
                  nested_seen = true;
                  size += XlaShapeSize(user->shape());
                }
              } else if (simple && fu->opcode() == HloOpcode::kDynamicUpdateSlice) {
                if (user != fu->operand(0) && !nested_seen) {
                  nested_seen = true;
                  size += XlaShapeSize(user->shape());
                }
              } else if (!nested_seen) {
                nested_seen = true;
                size += ParameterReadBytes(param);
              }
            }
          }
          break;
        }
        case HloOpcode::kSlice:
          size += XlaShapeSize(user->shape());
          break;
        case HloOpcode::kDynamicSlice:
          if (h == user->operand(0)) {
            size += XlaShapeSize(user->shape());
          } else if (!seen_trivial) {
            seen_trivial = true;
            size += XlaShapeSize(h->shape());
          }
          break;
        case HloOpcode::kDynamicUpdateSlice:
          if (h != user->operand(0) && !seen_trivial) {
            seen_trivial = true;
            size += XlaShapeSize(h->shape());
          }
          break;
        case HloOpcode::kBroadcast:
        case HloOpcode::kReshape:
          size += XlaShapeSize(h->shape());
          break;
        default:
          if (!seen_trivial) {
            seen_trivial = true;
            size += XlaShapeSize(h->shape());
          }
      }
    }
    return size;
  }

  static std::vector<const HloInstruction*> UniqueUsers(const HloInstruction* h) {
    std::vector<const HloInstruction*> out;
    absl::flat_hash_set<const HloInstruction*> seen;
    for (const HloInstruction* u : h->users()) {
      if (seen.insert(u).second) out.push_back(u);
    }
    return out;
  }

  // The leaf of a tuple-shaped fused parameter at `index`, found through its
  // get-tuple-element users (the parameter itself when there is none).
  static const HloInstruction* LeafUser(const HloInstruction* param,
                                        const std::vector<int64_t>& index) {
    const HloInstruction* g = param;
    for (int64_t i : index) {
      for (const HloInstruction* u : g->users()) {
        if (u->opcode() == HloOpcode::kGetTupleElement && u->tuple_index() == i) {
          g = u;
          break;
        }
      }
    }
    return g;
  }

  Props Fusion(const HloInstruction& f) {
    const HloComputation* fused = f.called_computations().at(0);
    Props p = Computation(fused);
    p.bytes = 0;
    p.output_bytes = 0;
    const HloInstruction* root = fused->root();
    // Outputs: each array leaf written once; a dynamic-update-slice root
    // writes only its update.
    std::function<void(const Shape&, std::vector<int64_t>&)> outputs =
        [&](const Shape& s, std::vector<int64_t>& index) {
          if (s.IsTuple()) {
            for (int64_t i = 0; i < s.tuple_size(); ++i) {
              index.push_back(i);
              outputs(s.tuple_shapes(i), index);
              index.pop_back();
            }
            return;
          }
          if (!s.IsArray()) return;
          const HloInstruction* r = root;
          if (index.size() == 1 && root->opcode() == HloOpcode::kTuple) r = root->operand(index[0]);
          double size = XlaShapeSize(s);
          if (r->opcode() == HloOpcode::kDynamicUpdateSlice) size = XlaShapeSize(r->operand(1)->shape());
          p.bytes += size;
          p.output_bytes += size;
        };
    std::vector<int64_t> index;
    outputs(f.shape(), index);
    // Large constants inside the fusion are read from memory.
    for (const auto& instr : fused->instructions()) {
      if (instr->opcode() == HloOpcode::kConstant && Elements(instr->shape()) > 1) {
        p.bytes += XlaShapeSize(instr->shape());
      }
    }
    // Parameters: what the fused instructions read of them.
    for (const HloInstruction* param : fused->parameters()) {
      if (!param->shape().IsTuple()) {
        p.bytes += ParameterReadBytes(param);
        continue;
      }
      std::function<void(const Shape&, std::vector<int64_t>&)> leaves =
          [&](const Shape& s, std::vector<int64_t>& idx) {
            if (s.IsTuple()) {
              for (int64_t i = 0; i < s.tuple_size(); ++i) {
                idx.push_back(i);
                leaves(s.tuple_shapes(i), idx);
                idx.pop_back();
              }
              return;
            }
            p.bytes += ParameterReadBytes(LeafUser(param, idx));
          };
      std::vector<int64_t> idx;
      leaves(param->shape(), idx);
    }
    return p;
  }
};

}  // namespace

int64_t XlaShapeSize(const Shape& shape) {
  if (shape.IsTuple()) return kPointerSize * shape.tuple_size();
  if (!shape.IsArray()) return 0;
  return shape.byte_size();
}

XlaInstructionCost XlaCostOf(const HloInstruction& instr) {
  XlaCounter counter;
  const Props p = counter.Instruction(instr);
  return {p.flops, p.transcendentals, p.bytes, p.output_bytes, p.mxu_flops};
}

double MxuPasses(const HloInstruction& instr) {
  if (instr.operand_count() < 2) return 1;
  const PrimitiveType a = instr.operand(0)->shape().element_type();
  const PrimitiveType b = instr.operand(1)->shape().element_type();
  if (ByteWidth(a) == 1 && ByteWidth(b) == 1 && IsInteger(a) && IsInteger(b)) return 0.5;
  const bool wide = ByteWidth(a) >= 4 || ByteWidth(b) >= 4;
  if (!wide) return 1;
  const int algorithm = instr.attrs().dot_algorithm;
  const absl::string_view alg = DotAlgorithmName(algorithm);
  if (alg == "dot_bf16_bf16_f32" || alg == "dot_bf16_bf16_bf16") return 1;
  if (alg == "dot_bf16_bf16_f32_x3" || alg == "dot_tf32_tf32_f32") return 3;
  if (alg == "dot_bf16_bf16_f32_x6" || alg == "dot_f32_f32_f32") return 6;
  if (alg == "dot_bf16_bf16_f32_x9" || alg == "dot_f64_f64_f64") return 9;
  double passes = 1;
  for (const std::string& p : instr.attrs().operand_precision) {
    if (p == "HIGHEST") passes = std::max(passes, 6.0);
    if (p == "HIGH") passes = std::max(passes, 3.0);
  }
  return passes;
}

namespace internal {

// The kXla module analysis: one OpCost per entry instruction, totals as
// XLA's properties_sum_ of the entry computation.
ModuleCost XlaModuleCost(const HloModule& module);

ModuleCost XlaModuleCost(const HloModule& module) {
  ModuleCost out;
  out.module_name = module.name();
  out.counting = CostCounting::kXla;
  XlaCounter counter;
  const HloComputation* entry = module.entry();
  std::function<void(const HloComputation*, double,
                     std::vector<std::pair<const HloInstruction*, double>>&)>
      collect = [&](const HloComputation* c, double n,
                    std::vector<std::pair<const HloInstruction*, double>>& into) {
        for (const auto& y : c->instructions()) {
          if (IsCollective(y->opcode())) into.push_back({y.get(), n});
          if (y->opcode() == HloOpcode::kWhile || y->opcode() == HloOpcode::kCall ||
              y->opcode() == HloOpcode::kConditional) {
            for (const HloComputation* callee : y->called_computations()) collect(callee, n, into);
          }
        }
      };
  for (const HloInstruction* x : entry->InstructionOrder()) {
    const Props p = counter.Instruction(*x);
    OpCost op;
    op.instruction = x;
    op.name = x->name();
    op.where = entry->name();
    op.flops = p.flops;
    op.mxu_flops = p.mxu_flops;
    op.mxu_passes = p.mxu_flops > 0 ? MxuPasses(*x) : 1;
    op.transcendentals = p.transcendentals;
    op.bytes_written = p.output_bytes;
    op.bytes_read = p.bytes - p.output_bytes;
    if (IsCollective(x->opcode())) op.collectives.push_back({x, 1});
    if (x->opcode() == HloOpcode::kWhile || x->opcode() == HloOpcode::kCall ||
        x->opcode() == HloOpcode::kConditional) {
      for (const HloComputation* callee : x->called_computations()) collect(callee, 1, op.collectives);
      if (x->opcode() == HloOpcode::kWhile) {
        out.notes.push_back(x->name() + ": loop body and condition counted once (XLA's rule)");
      }
    }
    out.totals.flops += op.flops;
    out.totals.transcendentals += op.transcendentals;
    out.totals.bytes_read += op.bytes_read;
    out.totals.bytes_written += op.bytes_written;
    out.ops.push_back(std::move(op));
  }
  return out;
}

}  // namespace internal
}  // namespace tpuoff::hlo
