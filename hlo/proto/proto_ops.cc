// Proto fields of fft, cholesky, triangular-solve, the batch-norm ops, rng,
// rng-bit-generator, rng-get-and-update-state, domain, custom-call layout
// constraints and output/operand aliasing, and original_value (origin=).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "hlo/proto/proto_internal.h"

namespace tpuoff::hlo::proto_internal {
namespace {

absl::Status Invalid(const std::string& where, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", msg));
}

std::vector<int64_t> Ints(const google::protobuf::RepeatedField<int64_t>& r) {
  return std::vector<int64_t>(r.begin(), r.end());
}

}  // namespace

absl::Status OpAttributesToProto(const HloInstruction& instr, xla::HloInstructionProto* p) {
  const HloAttributes& a = instr.attrs();
  switch (instr.opcode()) {
    case HloOpcode::kFft:
      p->set_fft_type(static_cast<xla::FftType>(a.fft_type));
      for (int64_t l : a.fft_length) p->add_fft_length(l);
      break;
    case HloOpcode::kCholesky:
      p->mutable_cholesky_options()->set_lower(a.lower);
      break;
    case HloOpcode::kTriangularSolve: {
      auto* o = p->mutable_triangular_solve_options();
      o->set_left_side(a.left_side);
      o->set_lower(a.lower);
      o->set_unit_diagonal(a.unit_diagonal);
      o->set_transpose_a(static_cast<xla::TriangularSolveOptions::Transpose>(a.transpose_a));
      break;
    }
    case HloOpcode::kBatchNormTraining:
    case HloOpcode::kBatchNormInference:
    case HloOpcode::kBatchNormGrad:
      p->set_epsilon(a.epsilon);
      p->set_feature_index(a.feature_index);
      break;
    case HloOpcode::kRng:
      p->set_distribution(static_cast<xla::RandomDistribution>(a.distribution));
      break;
    case HloOpcode::kRngBitGenerator:
      p->set_rng_algorithm(static_cast<xla::RandomAlgorithm>(a.rng_algorithm));
      break;
    case HloOpcode::kRngGetAndUpdateState:
      p->set_delta(a.delta);
      break;
    case HloOpcode::kDomain:
      if (a.domain_entry_sharding) {
        ShardingToProto(*a.domain_entry_sharding, p->mutable_domain_entry_sharding());
      }
      if (a.domain_exit_sharding) {
        ShardingToProto(*a.domain_exit_sharding, p->mutable_domain_exit_sharding());
      }
      break;
    case HloOpcode::kCustomCall:
      // XLA reads the constraints only when constrain_layout is set.
      if (a.operand_layout_constraints.has_value()) {
        p->set_constrain_layout(true);
        for (const Shape& s : *a.operand_layout_constraints) {
          ShapeToProto(s, p->add_operand_shapes_with_layout());
        }
      }
      break;
    default:
      break;
  }
  for (const OutputOperandAlias& al : a.output_to_operand_aliasing) {
    auto* e = p->add_output_operand_aliasing();
    for (int64_t i : al.output_index) e->add_output_shape_index(i);
    e->set_operand_index(al.operand);
    for (int64_t i : al.operand_index) e->add_operand_shape_index(i);
  }
  if (a.original_value.present) {
    auto* ov = p->mutable_original_value();
    for (const OriginalValueLeaf& l : a.original_value.leaves) {
      auto* e = ov->add_elements();
      for (int64_t i : l.leaf_index) e->add_shape_index(i);
      e->mutable_original_array()->set_instruction_name(l.instruction_name);
      for (int64_t i : l.shape_index) e->mutable_original_array()->add_shape_index(i);
    }
  }
  return absl::OkStatus();
}

absl::Status OpAttributesFromProto(const xla::HloInstructionProto& p, HloOpcode op,
                                   const std::string& where, HloAttributes* a) {
  switch (op) {
    case HloOpcode::kFft:
      if (!xla::FftType_IsValid(p.fft_type())) {
        return Invalid(where, absl::StrCat("unknown fft_type ", static_cast<int>(p.fft_type())));
      }
      a->fft_type = static_cast<FftType>(p.fft_type());
      a->fft_length = Ints(p.fft_length());
      break;
    case HloOpcode::kCholesky:
      a->lower = p.cholesky_options().lower();
      break;
    case HloOpcode::kTriangularSolve: {
      const auto& o = p.triangular_solve_options();
      if (!xla::TriangularSolveOptions::Transpose_IsValid(o.transpose_a())) {
        return Invalid(where, absl::StrCat("unknown transpose_a ",
                                           static_cast<int>(o.transpose_a())));
      }
      a->left_side = o.left_side();
      a->lower = o.lower();
      a->unit_diagonal = o.unit_diagonal();
      a->transpose_a = static_cast<TriangularTranspose>(o.transpose_a());
      break;
    }
    case HloOpcode::kBatchNormTraining:
    case HloOpcode::kBatchNormInference:
    case HloOpcode::kBatchNormGrad:
      if (!std::isfinite(p.epsilon())) return Invalid(where, "epsilon must be finite");
      a->epsilon = p.epsilon();
      a->feature_index = p.feature_index();
      break;
    case HloOpcode::kRng:
      if (!xla::RandomDistribution_IsValid(p.distribution())) {
        return Invalid(where, absl::StrCat("unknown distribution ",
                                           static_cast<int>(p.distribution())));
      }
      a->distribution = static_cast<RngDistribution>(p.distribution());
      break;
    case HloOpcode::kRngBitGenerator:
      if (!xla::RandomAlgorithm_IsValid(p.rng_algorithm())) {
        return Invalid(where, absl::StrCat("unknown rng_algorithm ",
                                           static_cast<int>(p.rng_algorithm())));
      }
      a->rng_algorithm = static_cast<RngAlgorithm>(p.rng_algorithm());
      break;
    case HloOpcode::kRngGetAndUpdateState:
      a->delta = p.delta();
      break;
    case HloOpcode::kDomain:
      // XLA's proto holds sharding domains only.
      a->domain_kind = "sharding";
      if (p.has_domain_entry_sharding()) {
        ASSIGN_OR_RETURN(a->domain_entry_sharding,
                         ShardingFromProto(p.domain_entry_sharding(),
                                           absl::StrCat(where, ": domain_entry_sharding")));
      }
      if (p.has_domain_exit_sharding()) {
        ASSIGN_OR_RETURN(a->domain_exit_sharding,
                         ShardingFromProto(p.domain_exit_sharding(),
                                           absl::StrCat(where, ": domain_exit_sharding")));
      }
      if (!a->domain_entry_sharding || !a->domain_exit_sharding) {
        return Invalid(where, "domain needs domain_entry_sharding and domain_exit_sharding");
      }
      break;
    case HloOpcode::kCustomCall:
      if (p.constrain_layout()) {
        a->operand_layout_constraints.emplace();
        for (int i = 0; i < p.operand_shapes_with_layout_size(); ++i) {
          ASSIGN_OR_RETURN(Shape s, ShapeFromProto(p.operand_shapes_with_layout(i),
                                                   absl::StrCat(where, ": operand_shapes_with_layout[",
                                                                i, "]")));
          a->operand_layout_constraints->push_back(std::move(s));
        }
        // constrain_layout is this, not a collective's flag.
        a->constrain_layout = false;
      }
      break;
    default:
      break;
  }
  for (const auto& e : p.output_operand_aliasing()) {
    if (op != HloOpcode::kCustomCall && op != HloOpcode::kFusion) {
      return Invalid(where, "output_operand_aliasing applies to custom-call and fusion only");
    }
    a->output_to_operand_aliasing.push_back(
        {Ints(e.output_shape_index()), e.operand_index(), Ints(e.operand_shape_index())});
  }
  if (p.has_original_value()) {
    a->original_value.present = true;
    for (const auto& e : p.original_value().elements()) {
      a->original_value.leaves.push_back({Ints(e.shape_index()),
                                          e.original_array().instruction_name(),
                                          Ints(e.original_array().shape_index())});
    }
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::hlo::proto_internal
