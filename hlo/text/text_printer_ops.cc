// Printing of the attributes of fft, cholesky, triangular-solve, the
// batch-norm ops, rng, rng-bit-generator, rng-get-and-update-state,
// get/set-dimension-size and domain, of custom-call / fusion aliasing and
// of origin=, in XLA's spelling and order.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/text/text_printer_impl.h"

namespace tpuoff::hlo::text_internal {
namespace {

// XLA's OriginalValue text: the result's tuple tree with `{"name" {index}}`
// at the leaves that have an origin and `{}` at the others.
void AppendOriginalValue(const OriginalValue& v, const Shape& shape, std::vector<int64_t>* leaf,
                         std::string* out) {
  if (shape.IsTuple()) {
    out->push_back('(');
    for (int64_t i = 0; i < shape.tuple_size(); ++i) {
      if (i > 0) out->append(", ");
      leaf->push_back(i);
      AppendOriginalValue(v, shape.tuple_shapes(i), leaf, out);
      leaf->pop_back();
    }
    out->push_back(')');
    return;
  }
  for (const OriginalValueLeaf& l : v.leaves) {
    if (l.leaf_index != *leaf) continue;
    absl::StrAppend(out, "{", QuotedText(l.instruction_name),
                    l.shape_index.empty() ? "" : absl::StrCat(" ", BracedList(l.shape_index)), "}");
    return;
  }
  out->append("{}");
}

}  // namespace

std::string OutputOperandAliasingString(const std::vector<OutputOperandAlias>& aliases) {
  std::vector<std::string> parts;
  for (const OutputOperandAlias& a : aliases) {
    parts.push_back(absl::StrCat(BracedList(a.output_index), ": (", a.operand, ", ",
                                 BracedList(a.operand_index), ")"));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

std::string OriginalValueString(const OriginalValue& v, const Shape& shape) {
  std::string out;
  std::vector<int64_t> leaf;
  AppendOriginalValue(v, shape, &leaf, &out);
  return out;
}

void AppendNumericOpAttributes(const HloInstruction& instr, std::vector<std::string>* out) {
  const HloAttributes& a = instr.attrs();
  auto add = [&](auto&&... pieces) { out->push_back(absl::StrCat(pieces...)); };
  auto add_dims = [&](absl::string_view name, const std::vector<int64_t>& v, bool always) {
    if (always || !v.empty()) add(name, "=", BracedList(v));
  };
  using O = HloOpcode;
  switch (instr.opcode()) {
    case O::kFft:
      add("fft_type=", FftTypeString(a.fft_type));
      add_dims("fft_length", a.fft_length, true);
      break;
    case O::kCholesky:
      if (a.lower) add("lower=true");
      break;
    case O::kTriangularSolve:
      if (a.left_side) add("left_side=true");
      if (a.lower) add("lower=true");
      if (a.unit_diagonal) add("unit_diagonal=true");
      if (a.transpose_a != TriangularTranspose::kInvalid) {
        add("transpose_a=", TriangularTransposeString(a.transpose_a));
      }
      break;
    case O::kBatchNormTraining:
    case O::kBatchNormInference:
    case O::kBatchNormGrad:
      add("epsilon=", a.epsilon);
      add("feature_index=", a.feature_index);
      break;
    case O::kRng: add("distribution=", RngDistributionString(a.distribution)); break;
    case O::kRngBitGenerator: add("algorithm=", RngAlgorithmString(a.rng_algorithm)); break;
    case O::kRngGetAndUpdateState: add("delta=", a.delta); break;
    case O::kGetDimensionSize:
    case O::kSetDimensionSize: add_dims("dimensions", a.dimensions, true); break;
    case O::kDomain:
      add("domain={kind=", QuotedText(a.domain_kind), ", entry=",
          a.domain_entry_sharding ? ShardingText(*a.domain_entry_sharding) : "{}", ", exit=",
          a.domain_exit_sharding ? ShardingText(*a.domain_exit_sharding) : "{}", "}");
      break;
    default:
      break;
  }
}

}  // namespace tpuoff::hlo::text_internal
