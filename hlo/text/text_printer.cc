#include "hlo/text/text_printer.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/float16.h"
#include "hlo/text/text_lexer.h"
#include "hlo/text/text_printer_impl.h"
#include "hlo/ir/window.h"

namespace tpuoff::hlo {
namespace {

// Names as XLA's lexer reads them, [a-zA-Z_][a-zA-Z0-9_.-]*: other characters
// become '_' (as XLA's SetAndSanitizeName does), so that any module prints
// as parseable text. Parsed names are already valid and stay unchanged.
std::string ValidName(absl::string_view name) {
  std::string out(name);
  if (out.empty()) return "_";
  for (char& c : out) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' &&
        c != '-') {
      c = '_';
    }
  }
  if (!absl::ascii_isalpha(static_cast<unsigned char>(out[0])) && out[0] != '_') {
    out.insert(out.begin(), '_');
  }
  return out;
}

std::string Name(const std::string& name, const PrintOptions& o) {
  return o.print_percent ? absl::StrCat("%", ValidName(name)) : ValidName(name);
}

std::string Quoted(absl::string_view s) { return absl::StrCat("\"", absl::CEscape(s), "\""); }

std::string Braced(const std::vector<int64_t>& v) {
  return absl::StrCat("{", absl::StrJoin(v, ","), "}");
}

// ---------------------------------------------------------------------------
// Numbers. Floats print with the fewest significant digits that parse back
// to the same bits (through the same conversions the parser uses).

std::string ShortestFloat(double v, int max_digits,
                          const std::function<bool(double)>& round_trips) {
  std::string s;
  for (int p = 1; p <= max_digits; ++p) {
    s = absl::StrFormat("%.*g", p, v);
    if (round_trips(std::strtod(s.c_str(), nullptr))) break;
  }
  // "1e+02" -> "100": keep moderate integers in plain notation, as XLA does.
  if (s.find('e') != std::string::npos && v == std::trunc(v) && std::fabs(v) < 1e16) {
    s = absl::StrFormat("%.0f", v);
  }
  // XLA lexes "-0" as the integer 0; "-0.0" keeps the sign.
  if (s == "-0") s = "-0.0";
  return s;
}

// NaN with its payload (mantissa bits) when it is not the default quiet NaN.
std::string NanString(bool negative, uint64_t mantissa, int mantissa_bits) {
  std::string s = negative ? "-nan" : "nan";
  if (mantissa != uint64_t{1} << (mantissa_bits - 1)) {
    absl::StrAppend(&s, "(0x", absl::Hex(mantissa), ")");
  }
  return s;
}

std::string FloatElement(PrimitiveType type, const uint8_t* p) {
  switch (type) {
    case PrimitiveType::kF64: {
      double v;
      std::memcpy(&v, p, 8);
      uint64_t bits;
      std::memcpy(&bits, p, 8);
      if (std::isnan(v)) return NanString(bits >> 63, bits & ((uint64_t{1} << 52) - 1), 52);
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      return ShortestFloat(v, 17, [&](double d) { return std::memcmp(&d, p, 8) == 0; });
    }
    case PrimitiveType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      uint32_t bits;
      std::memcpy(&bits, p, 4);
      if (std::isnan(f)) return NanString(bits >> 31, bits & 0x7fffffu, 23);
      if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
      return ShortestFloat(f, 9, [&](double d) {
        const float g = static_cast<float>(d);
        return std::memcmp(&g, p, 4) == 0;
      });
    }
    default: {  // bf16, f16
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      const bool bf16 = type == PrimitiveType::kBF16;
      const float f = bf16 ? Bf16ToF32(bits) : F16ToF32(bits);
      const int mantissa_bits = bf16 ? 7 : 10;
      if (std::isnan(f)) {
        return NanString(bits >> 15, bits & ((1u << mantissa_bits) - 1), mantissa_bits);
      }
      if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
      return ShortestFloat(f, 9, [&](double d) {
        const float g = static_cast<float>(d);
        return (bf16 ? F32ToBf16(g) : F32ToF16(g)) == bits;
      });
    }
  }
}

std::string Element(const Literal& lit, int64_t i) {
  const PrimitiveType type = lit.shape().element_type();
  if (type == PrimitiveType::kPred) return lit.GetAsInt64(i) ? "true" : "false";
  if (IsFloatingPoint(type)) return FloatElement(type, lit.raw() + i * ByteWidth(type));
  if (IsComplex(type)) {  // (re, im), as XLA prints complex values
    const PrimitiveType ct = ComplexComponentType(type);
    const uint8_t* p = lit.raw() + i * ByteWidth(type);
    return absl::StrCat("(", FloatElement(ct, p), ", ", FloatElement(ct, p + ByteWidth(ct)), ")");
  }
  if (type == PrimitiveType::kU64) return absl::StrCat(lit.data<uint64_t>()[i]);
  return absl::StrCat(lit.GetAsInt64(i));
}

// Nested braces, one level per dimension: {1, 2} and { {1, 2}, {3, 4} }.
void AppendArray(const Literal& lit, int64_t dim, int64_t base,
                 const std::vector<int64_t>& strides, std::string* out) {
  const Shape& shape = lit.shape();
  if (dim == shape.rank()) {
    out->append(Element(lit, base));
    return;
  }
  const bool inner = dim + 1 == shape.rank();
  out->append(inner ? "{" : "{ ");
  for (int64_t i = 0; i < shape.dimensions(dim); ++i) {
    if (i > 0) out->append(", ");
    AppendArray(lit, dim + 1, base + i * strides[dim], strides, out);
  }
  out->append(inner || shape.dimensions(dim) == 0 ? "}" : " }");
}

// Arrays as nested braces, tuples as XLA's `(a, b)` tuple literals.
std::string LiteralString(const Literal& lit) {
  const Shape& shape = lit.shape();
  if (shape.IsTuple()) {
    std::vector<std::string> parts;
    for (const Literal& e : lit.tuple_elements()) parts.push_back(LiteralString(e));
    return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
  }
  // Only a literal whose bytes do not match its shape (never built by the
  // IR's own constructors) cannot be printed.
  if (!shape.IsArray() || lit.raw_size() != shape.byte_size()) return "{...}";
  std::string out;
  AppendArray(lit, 0, 0, shape.Strides(), &out);
  return out;
}

// ---------------------------------------------------------------------------
// Structured attributes.

bool IsPermutation(const std::vector<int64_t>& perm, size_t n) {
  if (perm.size() != n) return false;
  std::vector<bool> seen(n, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(n) || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}

// `<=[reshape]T(perm)` if the iota spelling expands to exactly `devices`.
std::optional<std::string> IotaString(const std::vector<int64_t>& reshape,
                                      const std::vector<int64_t>& perm,
                                      const std::vector<int64_t>& devices) {
  if (reshape.empty() || (!perm.empty() && !IsPermutation(perm, reshape.size()))) {
    return std::nullopt;
  }
  int64_t total = 1;
  for (int64_t d : reshape) {
    if (d < 1 || total > (int64_t{1} << 30) / d) return std::nullopt;
    total *= d;
  }
  if (total != static_cast<int64_t>(devices.size()) ||
      ExpandIotaDevices(reshape, perm) != devices) {
    return std::nullopt;
  }
  std::string s = absl::StrCat("<=[", absl::StrJoin(reshape, ","), "]");
  if (reshape.size() > 1) {  // XLA always spells the permutation then
    std::vector<int64_t> p = perm;
    if (p.empty()) {
      for (size_t i = 0; i < reshape.size(); ++i) p.push_back(i);
    }
    absl::StrAppend(&s, "T(", absl::StrJoin(p, ","), ")");
  }
  return s;
}

std::string ReplicaGroupsString(const ReplicaGroups& g) {
  if (!g.mesh_axes.empty()) {
    std::vector<std::string> axes, selected;
    for (const auto& [name, size] : g.mesh_axes) axes.push_back(absl::StrCat("'", name, "'=", size));
    for (const MeshAxisRef& ref : g.mesh_group_axes) {
      selected.push_back(ref.pre_size > 0
                             ? absl::StrCat("'", ref.name, "':(", ref.pre_size, ")", ref.size)
                             : absl::StrCat("'", ref.name, "'"));
    }
    std::string ids;
    if (!g.mesh_device_iota_reshape.empty()) {
      ids = absl::StrCat(", device_ids=([", absl::StrJoin(g.mesh_device_iota_reshape, ","), "]");
      if (!g.mesh_device_iota_perm.empty()) {
        absl::StrAppend(&ids, "T(", absl::StrJoin(g.mesh_device_iota_perm, ","), ")");
      }
      absl::StrAppend(&ids, ")");
    } else if (!g.mesh_device_ids.empty()) {
      ids = absl::StrCat(", device_ids=(", absl::StrJoin(g.mesh_device_ids, ","), ")");
    }
    return absl::StrCat("mesh[", absl::StrJoin(axes, ","), "]", ids, " {",
                        absl::StrJoin(selected, ","), "}");
  }
  if (g.iota_form && !g.groups.empty()) {
    std::vector<int64_t> flat;
    bool uniform = true;
    for (const auto& group : g.groups) {
      uniform &= group.size() == g.groups[0].size();
      flat.insert(flat.end(), group.begin(), group.end());
    }
    if (uniform && !g.groups[0].empty()) {
      if (auto iota = IotaString(g.iota_reshape_dims, g.iota_transpose_perm, flat)) {
        return absl::StrCat("[", g.groups.size(), ",", g.groups[0].size(), "]", *iota);
      }
    }
  }
  std::vector<std::string> parts;
  for (const auto& group : g.groups) parts.push_back(Braced(group));
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

std::string ShardingString(const HloSharding& s) {
  switch (s.type) {
    case HloSharding::Type::kReplicated: return "{replicated}";
    case HloSharding::Type::kManual: return "{manual}";
    case HloSharding::Type::kUnknown: return "{unknown}";
    case HloSharding::Type::kMaximal:
      return absl::StrCat("{maximal device=", s.devices.empty() ? 0 : s.devices[0], "}");
    case HloSharding::Type::kTuple: {
      std::vector<std::string> parts;
      for (const HloSharding& e : s.tuple_shardings) parts.push_back(ShardingString(e));
      return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
    }
    case HloSharding::Type::kTiled: break;
  }
  std::string out = absl::StrCat("{devices=[", absl::StrJoin(s.tile_assignment_dims, ","), "]");
  std::optional<std::string> iota;
  if (s.iota_form) iota = IotaString(s.iota_reshape_dims, s.iota_transpose_perm, s.devices);
  absl::StrAppend(&out, iota ? *iota : absl::StrJoin(s.devices, ","));
  if (s.replicate_on_last_tile_dim) absl::StrAppend(&out, " last_tile_dim_replicate");
  if (!s.last_tile_dims.empty()) {
    std::vector<std::string> types;
    for (int t : s.last_tile_dims) {
      types.push_back(t == 4 ? "manual" : t == 1 ? "maximal" : "replicated");
    }
    absl::StrAppend(&out, " last_tile_dims={", absl::StrJoin(types, ", "), "}");
  }
  return out + "}";
}

std::string MetadataString(const OpMetadata& m) {
  std::vector<std::string> parts;
  if (!m.op_type.empty()) parts.push_back(absl::StrCat("op_type=", Quoted(m.op_type)));
  if (!m.op_name.empty()) parts.push_back(absl::StrCat("op_name=", Quoted(m.op_name)));
  if (!m.source_file.empty()) {
    parts.push_back(absl::StrCat("source_file=", Quoted(m.source_file)));
  }
  if (m.source_line != 0) parts.push_back(absl::StrCat("source_line=", m.source_line));
  if (m.source_end_line != 0) parts.push_back(absl::StrCat("source_end_line=", m.source_end_line));
  if (m.source_column != 0) parts.push_back(absl::StrCat("source_column=", m.source_column));
  if (m.source_end_column != 0) {
    parts.push_back(absl::StrCat("source_end_column=", m.source_end_column));
  }
  if (!m.profile_type.empty()) {
    parts.push_back(absl::StrCat("profile_type={", absl::StrJoin(m.profile_type, ","), "}"));
  }
  if (!m.deduplicated_name.empty()) {
    parts.push_back(absl::StrCat("deduplicated_name=", Quoted(m.deduplicated_name)));
  }
  if (!m.scheduling_name.empty()) {
    parts.push_back(absl::StrCat("scheduling_name=", Quoted(m.scheduling_name)));
  }
  if (m.stack_frame_id != 0) parts.push_back(absl::StrCat("stack_frame_id=", m.stack_frame_id));
  return absl::StrCat("{", absl::StrJoin(parts, " "), "}");
}

// A double with the fewest digits that read back the same.
std::string DoubleString(double v) {
  return ShortestFloat(v, 17, [v](double back) { return back == v; });
}

// `{mode=highest}` or `{tolerance={atol=1,rtol=0.5,ulps=2}}`, as XLA.
std::string ResultAccuracyString(const ResultAccuracy& r) {
  if (r.highest) return "{mode=highest}";
  return absl::StrCat("{tolerance={atol=", DoubleString(r.atol), ",rtol=",
                      DoubleString(r.rtol), ",ulps=", r.ulps, "}}");
}

std::string StatisticsString(const StatisticsViz& s) {
  std::string out = absl::StrCat("{visualizing_index=", s.visualizing_index);
  for (const auto& [name, v] : s.statistics) {
    absl::StrAppend(&out, ",", name, "=", DoubleString(v));
  }
  return out + "}";
}

// A string attribute value; JSON-like dicts print unquoted, as XLA does.
std::string StringOrDict(const std::string& v) { return IsJsonDict(v) ? v : Quoted(v); }

std::string FrontendAttributesString(const FrontendAttributes& attrs) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : attrs) parts.push_back(absl::StrCat(k, "=", StringOrDict(v)));
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

std::string SliceString(const std::vector<SliceDimension>& slice) {
  bool unit_strides = true;
  for (const SliceDimension& d : slice) unit_strides &= d.stride == 1;
  std::vector<std::string> parts;
  for (const SliceDimension& d : slice) {
    parts.push_back(unit_strides ? absl::StrCat("[", d.start, ":", d.limit, "]")
                                 : absl::StrCat("[", d.start, ":", d.limit, ":", d.stride, "]"));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

// low_high[_interior] per dimension joined by 'x'; interior only if any.
std::string PaddingString(const std::vector<PaddingDimension>& padding) {
  bool interior = false;
  for (const PaddingDimension& p : padding) interior |= p.interior_padding != 0;
  std::vector<std::string> parts;
  for (const PaddingDimension& p : padding) {
    parts.push_back(interior ? absl::StrCat(p.edge_padding_low, "_", p.edge_padding_high, "_",
                                            p.interior_padding)
                             : absl::StrCat(p.edge_padding_low, "_", p.edge_padding_high));
  }
  return absl::StrJoin(parts, "x");
}

std::string PrecisionString(const std::vector<std::string>& precisions) {
  bool all_default = true;
  for (const std::string& p : precisions) all_default &= p == "DEFAULT";
  if (all_default) return "";
  std::vector<std::string> lower;
  for (const std::string& p : precisions) lower.push_back(absl::AsciiStrToLower(p));
  return absl::StrCat("operand_precision={", absl::StrJoin(lower, ","), "}");
}

constexpr absl::string_view kApiVersions[] = {
    "API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
    "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"};

// Opcode-specific attributes, then called computations, in XLA's order.
void AppendOpcodeAttributes(const HloInstruction& instr, const PrintOptions& o,
                            std::vector<std::string>* out) {
  const HloAttributes& a = instr.attrs();
  const auto& called = instr.called_computations();
  auto comp = [&](size_t i) {
    return i < called.size() && called[i] ? Name(called[i]->name(), o) : std::string("%?");
  };
  auto add = [&](auto&&... pieces) { out->push_back(absl::StrCat(pieces...)); };
  auto add_dims = [&](absl::string_view name, const std::vector<int64_t>& v, bool always) {
    if (always || !v.empty()) add(name, "=", Braced(v));
  };
  using O = HloOpcode;
  switch (instr.opcode()) {
    case O::kBroadcast:
    case O::kTranspose:
    case O::kReduce:
    case O::kReverse:
    case O::kConcatenate:
    case O::kMap:
      add_dims("dimensions", a.dimensions, true);
      break;
    case O::kIota:
      add("iota_dimension=", a.dimensions.empty() ? 0 : a.dimensions[0]);
      break;
    case O::kSlice: add("slice=", SliceString(a.slice)); break;
    case O::kDynamicSlice: add_dims("dynamic_slice_sizes", a.dynamic_slice_sizes, true); break;
    case O::kPad: add("padding=", PaddingString(a.padding)); break;
    case O::kReduceWindow: add("window=", WindowToString(a.window)); break;
    case O::kCompare:
      add("direction=", ComparisonDirectionString(a.comparison_direction));
      if (!a.comparison_type.empty()) add("type=", a.comparison_type);
      break;
    case O::kDot: {
      add_dims("lhs_batch_dims", a.dot.lhs_batch_dimensions, false);
      add_dims("lhs_contracting_dims", a.dot.lhs_contracting_dimensions, false);
      add_dims("rhs_batch_dims", a.dot.rhs_batch_dimensions, false);
      add_dims("rhs_contracting_dims", a.dot.rhs_contracting_dimensions, false);
      const std::string precision = PrecisionString(a.operand_precision);
      if (!precision.empty()) out->push_back(precision);
      if (a.dot_algorithm != 0) add("algorithm=", DotAlgorithmName(a.dot_algorithm));
      break;
    }
    case O::kConvolution: {
      if (!a.window.empty()) add("window=", WindowToString(a.window));
      add("dim_labels=", ConvolutionDimensionNumbersToString(a.conv));
      if (a.feature_group_count != 1) add("feature_group_count=", a.feature_group_count);
      if (a.batch_group_count != 1) add("batch_group_count=", a.batch_group_count);
      const std::string precision = PrecisionString(a.operand_precision);
      if (!precision.empty()) out->push_back(precision);
      if (a.dot_algorithm != 0) add("algorithm=", DotAlgorithmName(a.dot_algorithm));
      break;
    }
    case O::kSort:
      add_dims("dimensions", a.dimensions, true);
      if (a.is_stable) add("is_stable=true");
      break;
    case O::kTopK:
      add("k=", a.k);
      add("largest=", a.largest ? "true" : "false");
      break;
    case O::kSelectAndScatter: add("window=", WindowToString(a.window)); break;
    case O::kReducePrecision:
      add("exponent_bits=", a.exponent_bits);
      add("mantissa_bits=", a.mantissa_bits);
      break;
    case O::kGather:
      add_dims("offset_dims", a.gather.offset_dims, true);
      add_dims("collapsed_slice_dims", a.gather.collapsed_slice_dims, true);
      add_dims("operand_batching_dims", a.gather.operand_batching_dims, false);
      add_dims("start_indices_batching_dims", a.gather.start_indices_batching_dims, false);
      add_dims("start_index_map", a.gather.start_index_map, true);
      add("index_vector_dim=", a.gather.index_vector_dim);
      add_dims("slice_sizes", a.gather_slice_sizes, true);
      if (a.indices_are_sorted) add("indices_are_sorted=true");
      break;
    case O::kScatter:
      add_dims("update_window_dims", a.scatter.update_window_dims, true);
      add_dims("inserted_window_dims", a.scatter.inserted_window_dims, true);
      add_dims("input_batching_dims", a.scatter.input_batching_dims, false);
      add_dims("scatter_indices_batching_dims", a.scatter.scatter_indices_batching_dims, false);
      add_dims("scatter_dims_to_operand_dims", a.scatter.scatter_dims_to_operand_dims, true);
      add("index_vector_dim=", a.scatter.index_vector_dim);
      if (a.indices_are_sorted) add("indices_are_sorted=true");
      if (a.unique_indices) add("unique_indices=true");
      break;
    case O::kGetTupleElement: add("index=", a.tuple_index); break;
    case O::kParameter:
      if (!a.parameter_replication.empty()) {
        std::vector<std::string> v;
        for (bool b : a.parameter_replication) v.push_back(b ? "true" : "false");
        add("parameter_replication={", absl::StrJoin(v, ","), "}");
      }
      break;
    case O::kFusion:
      add("kind=", FusionKindString(a.fusion_kind));
      if (!a.output_to_operand_aliasing.empty()) {
        add("output_to_operand_aliasing=",
            text_internal::OutputOperandAliasingString(a.output_to_operand_aliasing));
      }
      break;
    case O::kAllReduce:
    case O::kAllGather:
    case O::kReduceScatter:
    case O::kAllToAll:
    case O::kAllReduceStart:
    case O::kAllGatherStart:
    case O::kCollectiveBroadcast:
    case O::kRaggedAllToAll:
      if (a.channel_id) add("channel_id=", *a.channel_id);
      add("replica_groups=", ReplicaGroupsString(a.replica_groups));
      if (a.constrain_layout) add("constrain_layout=true");
      if (instr.opcode() == O::kAllGather || instr.opcode() == O::kAllGatherStart) {
        add_dims("dimensions", a.dimensions, true);
      }
      if (instr.opcode() != O::kAllToAll && a.use_global_device_ids) {
        add("use_global_device_ids=true");
      }
      if (instr.opcode() == O::kReduceScatter) add_dims("dimensions", a.dimensions, true);
      if (instr.opcode() == O::kAllToAll) add_dims("dimensions", a.dimensions, false);
      break;
    case O::kCollectivePermute:
    case O::kCollectivePermuteStart: {
      if (a.channel_id) add("channel_id=", *a.channel_id);
      std::vector<std::string> pairs;
      for (const auto& [s, t] : a.source_target_pairs) pairs.push_back(absl::StrCat("{", s, ",", t, "}"));
      add("source_target_pairs={", absl::StrJoin(pairs, ","), "}");
      if (!a.permute_slice_sizes.empty()) {
        std::vector<std::string> sizes;
        for (const auto& v : a.permute_slice_sizes) sizes.push_back(Braced(v));
        add("slice_sizes={", absl::StrJoin(sizes, ","), "}");
      }
      break;
    }
    case O::kCopyStart:
      if (a.cross_program_prefetch_index) {
        add("cross_program_prefetch_index=", *a.cross_program_prefetch_index);
      }
      break;
    case O::kSend:
    case O::kRecv:
    case O::kSendDone:
    case O::kRecvDone:
      if (a.channel_id) add("channel_id=", *a.channel_id);
      if (a.is_host_transfer) add("is_host_transfer=true");
      break;
    case O::kCustomCall: {
      const std::string precision = PrecisionString(a.operand_precision);
      if (!precision.empty()) out->push_back(precision);
      add("custom_call_target=", Quoted(a.custom_call_target));
      if (a.operand_layout_constraints.has_value()) {
        std::vector<std::string> shapes;
        for (const Shape& s : *a.operand_layout_constraints) shapes.push_back(s.ToString(true));
        add("operand_layout_constraints={", absl::StrJoin(shapes, ", "), "}");
      }
      if (a.custom_call_has_side_effect) add("custom_call_has_side_effect=true");
      if (!a.output_to_operand_aliasing.empty()) {
        add("output_to_operand_aliasing=",
            text_internal::OutputOperandAliasingString(a.output_to_operand_aliasing));
      }
      if (a.custom_call_api_version >= 2 && a.custom_call_api_version <= 4) {
        add("api_version=", kApiVersions[a.custom_call_api_version]);
      }
      break;
    }
    default:
      text_internal::AppendNumericOpAttributes(instr, out);
      break;
  }
  // Called computations.
  switch (instr.opcode()) {
    case O::kWhile:
      add("condition=", comp(1));
      add("body=", comp(0));
      break;
    case O::kConditional: {
      const bool pred = instr.operand_count() > 0 &&
                        instr.operand(0)->shape().element_type() == PrimitiveType::kPred;
      if (pred && called.size() == 2) {
        add("true_computation=", comp(0));
        add("false_computation=", comp(1));
      } else {
        std::vector<std::string> names;
        for (size_t i = 0; i < called.size(); ++i) names.push_back(comp(i));
        add("branch_computations={", absl::StrJoin(names, ", "), "}");
      }
      break;
    }
    case O::kReduce:
    case O::kReduceWindow:
    case O::kAllReduce:
    case O::kReduceScatter:
    case O::kScatter:
    case O::kCall:
    case O::kAllReduceStart:
    case O::kMap:
      add("to_apply=", comp(0));
      if (instr.opcode() == O::kCall && a.is_composite) add("is_composite=true");
      break;
    case O::kSort:
      add("to_apply=", comp(0));
      break;
    case O::kSelectAndScatter:
      add("select=", comp(0));
      add("scatter=", comp(1));
      break;
    case O::kAsyncStart:
      if (!a.async_execution_thread.empty()) {
        add("async_execution_thread=", Quoted(a.async_execution_thread));
      }
      add("calls=", comp(0));
      break;
    case O::kFusion:
      add("calls=", comp(0));
      break;
    case O::kCustomCall:
      if (!called.empty()) {
        std::vector<std::string> names;
        for (size_t i = 0; i < called.size(); ++i) names.push_back(comp(i));
        add("called_computations={", absl::StrJoin(names, ", "), "}");
      }
      break;
    default: break;
  }
}

// The stack-frame index tables, as XLA prints them before the computations.
std::string StackFrameIndexString(const StackFrameIndex& s) {
  if (s.empty()) return "";
  std::string out;
  auto names = [&](absl::string_view title, const std::vector<std::string>& v) {
    absl::StrAppend(&out, "\n", title, "\n");
    for (size_t i = 0; i < v.size(); ++i) absl::StrAppend(&out, i + 1, " ", Quoted(v[i]), "\n");
  };
  names("FileNames", s.file_names);
  names("FunctionNames", s.function_names);
  absl::StrAppend(&out, "\nFileLocations\n");
  for (size_t i = 0; i < s.file_locations.size(); ++i) {
    const auto& l = s.file_locations[i];
    absl::StrAppend(&out, i + 1, " {file_name_id=", l.file_name_id,
                    " function_name_id=", l.function_name_id, " line=", l.line,
                    " end_line=", l.end_line, " column=", l.column,
                    " end_column=", l.end_column, "}\n");
  }
  absl::StrAppend(&out, "\nStackFrames\n");
  for (size_t i = 0; i < s.frames.size(); ++i) {
    absl::StrAppend(&out, i + 1, " {file_location_id=", s.frames[i].file_location_id,
                    " parent_frame_id=", s.frames[i].parent_frame_id, "}\n");
  }
  return out;
}

// The instruction an async op wraps when XLA's sugar `X-start(...)` says it
// exactly: the wrapped computation is one X on its parameters, in order.
const HloInstruction* SugarWrapped(const HloInstruction& instr) {
  if (!IsAsyncOpcode(instr.opcode()) || instr.called_computations().size() != 1 ||
      instr.called_computations()[0] == nullptr) {
    return nullptr;
  }
  const HloComputation& w = *instr.called_computations()[0];
  const HloInstruction* root = w.root();
  if (root == nullptr || root->opcode() == HloOpcode::kParameter ||
      root->opcode() == HloOpcode::kConstant || IsAsyncOpcode(root->opcode()) ||
      static_cast<int64_t>(w.instructions().size()) != w.num_parameters() + 1 ||
      root->operand_count() != w.num_parameters() ||
      // all-reduce-start etc. are opcodes of their own: no sugar for them.
      StringToHloOpcode(absl::StrCat(HloOpcodeString(root->opcode()), "-start")).has_value()) {
    return nullptr;
  }
  for (int64_t i = 0; i < root->operand_count(); ++i) {
    if (root->operand(i) != w.parameter(i)) return nullptr;
  }
  return root;
}

std::string EntryLayoutString(const HloModule& module) {
  std::vector<Shape> params;
  Shape result;
  if (module.entry_parameter_layouts().has_value()) {
    params = *module.entry_parameter_layouts();
    result = module.entry_result_layout();
  } else {
    params = module.entry()->ParameterShapes();
    if (module.entry()->root() != nullptr) result = module.entry()->root()->shape();
  }
  std::vector<std::string> parts;
  for (const Shape& s : params) parts.push_back(s.ToString(/*print_layout=*/true));
  return absl::StrCat("{(", absl::StrJoin(parts, ", "), ")->", result.ToString(true), "}");
}

}  // namespace

std::string PrintInstruction(const HloInstruction& instr, const PrintOptions& o) {
  const HloInstruction* sugar = SugarWrapped(instr);
  std::string opcode(HloOpcodeString(instr.opcode()));
  if (sugar != nullptr) {
    opcode = absl::StrCat(HloOpcodeString(sugar->opcode()),
                          instr.opcode() == HloOpcode::kAsyncStart    ? "-start"
                          : instr.opcode() == HloOpcode::kAsyncUpdate ? "-update"
                                                                      : "-done");
  }
  std::string out = absl::StrCat(Name(instr.name(), o), " = ",
                                 instr.shape().ToString(o.print_layouts), " ", opcode, "(");
  if (instr.opcode() == HloOpcode::kParameter) {
    absl::StrAppend(&out, instr.parameter_number());
  } else if (instr.opcode() == HloOpcode::kConstant) {
    absl::StrAppend(&out, instr.has_literal() ? LiteralString(instr.literal()) : "{...}");
  } else {
    std::vector<std::string> operands;
    for (const HloInstruction* op : instr.operands()) {
      operands.push_back(o.print_operand_shapes
                             ? absl::StrCat(op->shape().ToString(o.print_layouts), " ",
                                            Name(op->name(), o))
                             : Name(op->name(), o));
    }
    absl::StrAppend(&out, absl::StrJoin(operands, ", "));
  }
  out += ")";
  std::vector<std::string> attrs;
  if (sugar == nullptr) {
    AppendOpcodeAttributes(instr, o, &attrs);
  } else if (instr.opcode() == HloOpcode::kAsyncStart) {
    // The start says the thread and the wrapped instruction's attributes.
    if (!instr.attrs().async_execution_thread.empty()) {
      attrs.push_back(absl::StrCat("async_execution_thread=",
                                   Quoted(instr.attrs().async_execution_thread)));
    }
    AppendOpcodeAttributes(*sugar, o, &attrs);
  }
  if (instr.sharding().has_value()) {
    attrs.push_back(absl::StrCat("sharding=", ShardingString(*instr.sharding())));
  }
  if (o.print_metadata && !instr.frontend_attributes().empty()) {
    attrs.push_back(absl::StrCat("frontend_attributes=",
                                 FrontendAttributesString(instr.frontend_attributes())));
  }
  if (!instr.control_predecessors().empty()) {
    std::vector<std::string> names;
    for (const HloInstruction* p : instr.control_predecessors()) names.push_back(Name(p->name(), o));
    attrs.push_back(absl::StrCat("control-predecessors={", absl::StrJoin(names, ", "), "}"));
  }
  // XLA's order: statistics, result_accuracy, origin, metadata, backend_config.
  if (!instr.attrs().statistics.empty()) {
    attrs.push_back(absl::StrCat("statistics=", StatisticsString(instr.attrs().statistics)));
  }
  if (!instr.attrs().result_accuracy.IsDefault()) {
    attrs.push_back(
        absl::StrCat("result_accuracy=", ResultAccuracyString(instr.attrs().result_accuracy)));
  }
  if (instr.attrs().original_value.present) {
    attrs.push_back(absl::StrCat(
        "origin={", text_internal::OriginalValueString(instr.attrs().original_value, instr.shape()),
        "}"));
  }
  if (o.print_metadata && !instr.metadata().empty()) {
    attrs.push_back(absl::StrCat("metadata=", MetadataString(instr.metadata())));
  }
  if (!instr.attrs().backend_config.empty()) {
    attrs.push_back(absl::StrCat("backend_config=", StringOrDict(instr.attrs().backend_config)));
  }
  for (const std::string& a : attrs) absl::StrAppend(&out, ", ", a);
  return out;
}

std::string PrintComputation(const HloComputation& computation, const PrintOptions& o) {
  const bool is_entry =
      computation.parent() != nullptr && computation.parent()->entry() == &computation;
  std::vector<std::string> params;
  for (const HloInstruction* p : computation.parameters()) {
    if (p != nullptr) params.push_back(absl::StrCat(ValidName(p->name()), ": ", p->shape().ToString()));
  }
  const HloInstruction* root = computation.root();
  std::string out = absl::StrCat(is_entry ? "ENTRY " : "", Name(computation.name(), o), " (",
                                 absl::StrJoin(params, ", "), ") -> ",
                                 root ? root->shape().ToString() : "()", " {\n");
  for (const auto& instr : computation.instructions()) {
    absl::StrAppend(&out, "  ", instr.get() == root ? "ROOT " : "",
                    PrintInstruction(*instr, o), "\n");
  }
  out += "}";
  if (!computation.execution_thread().empty() && computation.execution_thread() != "main") {
    absl::StrAppend(&out, ", execution_thread=", Quoted(computation.execution_thread()));
  }
  return out;
}

std::string PrintModule(const HloModule& module, const PrintOptions& o) {
  std::string out = absl::StrCat("HloModule ", ValidName(module.name()));
  if (module.is_scheduled()) out += ", is_scheduled=true";
  if (!module.input_output_aliases().empty()) {
    std::vector<std::string> parts;
    for (const InputOutputAlias& a : module.input_output_aliases()) {
      parts.push_back(absl::StrCat(Braced(a.output_index), ": (", a.parameter_number, ", ",
                                   Braced(a.parameter_index), ", ",
                                   a.must_alias ? "must-alias" : "may-alias", ")"));
    }
    absl::StrAppend(&out, ", input_output_alias={ ", absl::StrJoin(parts, ", "), " }");
  }
  if (!module.buffer_donors().empty()) {
    std::vector<std::string> parts;
    for (const BufferDonor& d : module.buffer_donors()) {
      parts.push_back(absl::StrCat("(", d.parameter_number, ", ", Braced(d.parameter_index), ")"));
    }
    absl::StrAppend(&out, ", buffer_donor={ ", absl::StrJoin(parts, ", "), " }");
  }
  if (module.entry() != nullptr) {
    absl::StrAppend(&out, ", entry_computation_layout=", EntryLayoutString(module));
  }
  if (module.replica_count() != 1) absl::StrAppend(&out, ", replica_count=", module.replica_count());
  if (module.num_partitions() != 1) {
    absl::StrAppend(&out, ", num_partitions=", module.num_partitions());
  }
  if (!module.frontend_attributes().empty()) {
    absl::StrAppend(&out, ", frontend_attributes=",
                    FrontendAttributesString(module.frontend_attributes()));
  }
  out += "\n";
  out += StackFrameIndexString(module.stack_frame_index());
  // Computations printed as an async op's sugar are not printed again
  // (unless something else calls them).
  std::set<const HloComputation*> sugared, called;
  for (const auto& comp : module.computations()) {
    for (const auto& x : comp->instructions()) {
      if (x->opcode() == HloOpcode::kAsyncStart && SugarWrapped(*x) != nullptr) {
        sugared.insert(x->called_computations()[0]);
      } else if (!IsAsyncOpcode(x->opcode())) {
        called.insert(x->called_computations().begin(), x->called_computations().end());
      }
    }
  }
  for (const auto& comp : module.computations()) {
    if (sugared.count(comp.get()) && !called.count(comp.get())) continue;
    absl::StrAppend(&out, "\n", PrintComputation(*comp, o), "\n");
  }
  return out;
}

namespace text_internal {

std::string QuotedText(absl::string_view s) { return Quoted(s); }
std::string BracedList(const std::vector<int64_t>& v) { return Braced(v); }
std::string ShardingText(const HloSharding& s) { return ShardingString(s); }

}  // namespace text_internal
}  // namespace tpuoff::hlo
