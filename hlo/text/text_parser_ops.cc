// Attributes of fft, cholesky, triangular-solve, the batch-norm ops, rng,
// rng-bit-generator, rng-get-and-update-state, domain, custom-call layout
// constraints and aliasing, and `origin=` on any instruction.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "hlo/text/text_parser_impl.h"

namespace tpuoff::hlo::text_internal {

// `(leaf, leaf, ...)` / `{}` / `{"name"}` / `{"name" {1,0}}`.
absl::Status TextParser::ParseOriginalValueTree(OriginalValue* value,
                                               std::vector<int64_t>* leaf, int depth) {
  if (depth > options_.max_nesting_depth) return TokenError("origin is nested too deeply");
  if (Eat(TokKind::kLparen)) {
    int64_t i = 0;
    if (!At(TokKind::kRparen)) {
      do {
        leaf->push_back(i++);
        RETURN_IF_ERROR(ParseOriginalValueTree(value, leaf, depth + 1));
        leaf->pop_back();
      } while (Eat(TokKind::kComma));
    }
    return Expect(TokKind::kRparen, "to end a tuple of origin");
  }
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start an origin leaf"));
  if (Eat(TokKind::kRbrace)) return absl::OkStatus();
  OriginalValueLeaf l;
  l.leaf_index = *leaf;
  if (!At(TokKind::kString)) return TokenError("expected the original instruction name");
  RETURN_IF_ERROR(ParseString(&l.instruction_name));
  if (At(TokKind::kLbrace)) RETURN_IF_ERROR(ParseDimList(&l.shape_index));
  value->leaves.push_back(std::move(l));
  return Expect(TokKind::kRbrace, "to end an origin leaf");
}

// `{{0}: (0, {}), {}: (1, {2})}`.
absl::Status TextParser::ParseOutputOperandAliasing(std::vector<OutputOperandAlias>* out) {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start output_to_operand_aliasing"));
  if (Eat(TokKind::kRbrace)) return absl::OkStatus();
  do {
    OutputOperandAlias a;
    RETURN_IF_ERROR(ParseDimList(&a.output_index));
    RETURN_IF_ERROR(Expect(TokKind::kColon, "after the output index"));
    RETURN_IF_ERROR(Expect(TokKind::kLparen, "to start (operand, index)"));
    const size_t loc = Loc();
    RETURN_IF_ERROR(ParseDimValue(&a.operand));
    if (a.operand < 0) return ErrorAt(loc, "operand number must be >= 0");
    RETURN_IF_ERROR(Expect(TokKind::kComma, "after the operand number"));
    RETURN_IF_ERROR(ParseDimList(&a.operand_index));
    RETURN_IF_ERROR(Expect(TokKind::kRparen, "to end (operand, index)"));
    out->push_back(std::move(a));
  } while (Eat(TokKind::kComma));
  return Expect(TokKind::kRbrace, "to end output_to_operand_aliasing");
}

// `{kind="sharding", entry={...}, exit={...}}`.
absl::Status TextParser::ParseDomain(HloAttributes* a) {
  const size_t loc = Loc();
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start domain"));
  bool kind = false;
  do {
    if (!At(TokKind::kAttrName)) return TokenError("expected kind=, entry= or exit=");
    const std::string field = lexer_.tok().str;
    lexer_.Next();
    if (field == "kind") {
      RETURN_IF_ERROR(ParseString(&a->domain_kind));
      kind = true;
    } else if (field == "entry" || field == "exit") {
      std::optional<HloSharding>& s =
          field == "entry" ? a->domain_entry_sharding : a->domain_exit_sharding;
      if (s.has_value()) return TokenError(absl::StrCat(field, " given twice"));
      RETURN_IF_ERROR(ParseSharding(&s.emplace()));
    } else {
      return TokenError(absl::StrCat("unknown domain field ", field));
    }
  } while (Eat(TokKind::kComma));
  RETURN_IF_ERROR(Expect(TokKind::kRbrace, "to end domain"));
  if (!kind || a->domain_kind != "sharding" || !a->domain_entry_sharding ||
      !a->domain_exit_sharding) {
    return ErrorAt(loc, "domain needs kind=\"sharding\", entry= and exit=");
  }
  return absl::OkStatus();
}

absl::Status TextParser::ParseOpAttribute(const std::string& name, size_t loc,
                                          ParsedInstruction* instr, bool* handled) {
  using O = HloOpcode;
  const HloOpcode op = instr->opcode;
  HloAttributes& a = instr->attrs;
  *handled = true;
  auto only = [&](std::initializer_list<HloOpcode> ops) -> absl::Status {
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
      return ErrorAt(loc, absl::StrCat("attribute ", name, " does not apply to ",
                                       HloOpcodeString(op)));
    }
    lexer_.Next();
    return absl::OkStatus();
  };
  // An enum value written as an identifier.
  auto enum_value = [&](auto parse, auto* out, absl::string_view what) -> absl::Status {
    if (!At(TokKind::kIdent)) return TokenError(absl::StrCat("expected ", what));
    auto v = parse(lexer_.tok().str);
    if (!v.ok()) return TokenError(absl::StrCat("expected ", what));
    *out = *v;
    lexer_.Next();
    return absl::OkStatus();
  };
  if (name == "origin") {
    lexer_.Next();
    a.original_value = OriginalValue();
    a.original_value.present = true;
    RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start origin"));
    std::vector<int64_t> leaf;
    RETURN_IF_ERROR(ParseOriginalValueTree(&a.original_value, &leaf, 0));
    return Expect(TokKind::kRbrace, "to end origin");
  }
  if (name == "fft_type") {
    RETURN_IF_ERROR(only({O::kFft}));
    return enum_value(ParseFftType, &a.fft_type, "FFT, IFFT, RFFT or IRFFT");
  }
  if (name == "fft_length") {
    RETURN_IF_ERROR(only({O::kFft}));
    return ParseDimList(&a.fft_length);
  }
  if (name == "lower") {
    RETURN_IF_ERROR(only({O::kCholesky, O::kTriangularSolve}));
    return ParseBool(&a.lower);
  }
  if (name == "left_side" || name == "unit_diagonal") {
    RETURN_IF_ERROR(only({O::kTriangularSolve}));
    return ParseBool(name == "left_side" ? &a.left_side : &a.unit_diagonal);
  }
  if (name == "transpose_a") {
    RETURN_IF_ERROR(only({O::kTriangularSolve}));
    return enum_value(ParseTriangularTranspose, &a.transpose_a,
                      "NO_TRANSPOSE, TRANSPOSE or ADJOINT");
  }
  if (name == "epsilon") {
    RETURN_IF_ERROR(only({O::kBatchNormTraining, O::kBatchNormInference, O::kBatchNormGrad}));
    double v = 0;
    bool has_payload = false;
    uint64_t payload = 0;
    const size_t v_loc = Loc();
    RETURN_IF_ERROR(ParseDouble(&v, &has_payload, &payload));
    if (!std::isfinite(v)) return ErrorAt(v_loc, "epsilon must be finite");
    a.epsilon = static_cast<float>(v);
    return absl::OkStatus();
  }
  if (name == "feature_index") {
    RETURN_IF_ERROR(only({O::kBatchNormTraining, O::kBatchNormInference, O::kBatchNormGrad}));
    const size_t v_loc = Loc();
    RETURN_IF_ERROR(ParseDimValue(&a.feature_index));
    if (a.feature_index < 0) return ErrorAt(v_loc, "feature_index must be >= 0");
    return absl::OkStatus();
  }
  if (name == "distribution") {
    RETURN_IF_ERROR(only({O::kRng}));
    return enum_value(ParseRngDistribution, &a.distribution, "rng_uniform or rng_normal");
  }
  if (name == "algorithm" && op == O::kRngBitGenerator) {
    lexer_.Next();
    return enum_value(ParseRngAlgorithm, &a.rng_algorithm,
                      "rng_default, rng_three_fry or rng_philox");
  }
  if (name == "delta") {
    RETURN_IF_ERROR(only({O::kRngGetAndUpdateState}));
    return ParseInt64(&a.delta);
  }
  if (name == "domain") {
    RETURN_IF_ERROR(only({O::kDomain}));
    return ParseDomain(&a);
  }
  if (name == "operand_layout_constraints") {
    RETURN_IF_ERROR(only({O::kCustomCall}));
    RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start operand_layout_constraints"));
    a.operand_layout_constraints.emplace();
    if (!At(TokKind::kRbrace)) {
      do {
        RETURN_IF_ERROR(ParseShape(&a.operand_layout_constraints->emplace_back()));
      } while (Eat(TokKind::kComma));
    }
    return Expect(TokKind::kRbrace, "to end operand_layout_constraints");
  }
  if (name == "output_to_operand_aliasing") {
    RETURN_IF_ERROR(only({O::kCustomCall, O::kFusion}));
    return ParseOutputOperandAliasing(&a.output_to_operand_aliasing);
  }
  *handled = false;
  return absl::OkStatus();
}

}  // namespace tpuoff::hlo::text_internal
