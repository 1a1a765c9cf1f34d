// HLO text grammar: module header, computations, instructions and operands.
// Attribute values live in text_parser_attrs.cc, shapes and constants in
// text_parser_values.cc, name resolution and IR creation in
// text_parser_build.cc.
#include "hlo/text/text_parser.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/status_macros.h"
#include "hlo/text/text_parser_impl.h"

namespace tpuoff::hlo {
namespace text_internal {

absl::Status TextParser::ErrorAt(size_t loc, absl::string_view message,
                                 absl::StatusCode code) const {
  const auto [line, col] = lexer_.LineCol(loc);
  const Token t = lexer_.TokenAt(loc);
  std::string where;
  if (t.kind == TokKind::kEof) {
    where = "at end of input";
  } else {
    absl::string_view text = lexer_.TokenText(t);
    std::string shown(text.substr(0, 40));
    if (text.size() > 40) shown += "...";
    where = absl::StrCat("at '", shown, "'");
  }
  return absl::Status(code, absl::StrCat(filename_, ":", line, ":", col, ": ", message,
                                         " (", where, ")"));
}

absl::Status TextParser::TokenError(absl::string_view message) const {
  if (At(TokKind::kError)) return ErrorAt(Loc(), lexer_.error());
  return ErrorAt(Loc(), message);
}

bool TextParser::Eat(TokKind kind) {
  if (!At(kind)) return false;
  lexer_.Next();
  return true;
}

absl::Status TextParser::Expect(TokKind kind, absl::string_view context) {
  if (Eat(kind)) return absl::OkStatus();
  return TokenError(absl::StrCat("expected ", TokKindName(kind), " ", context));
}

absl::StatusOr<std::unique_ptr<HloModule>> TextParser::Run() {
  RETURN_IF_ERROR(ParseModule());
  RETURN_IF_ERROR(DesugarAsyncStarts());
  return Build();
}

absl::Status TextParser::ParseModule() {
  if (!AtIdent("HloModule")) {
    if (AtIdent("module") || AtIdent("func") || AtIdent("func.func")) {
      return TokenError(
          "expected 'HloModule': this looks like MLIR (StableHLO) text, e.g. jax's "
          "lowered.as_text(); give tpuoff HLO: lowered.as_text(dialect=\"hlo\"), or the "
          "binary lowered.compiler_ir(\"hlo\").as_serialized_hlo_module_proto()");
    }
    return TokenError("expected 'HloModule'");
  }
  lexer_.Next();
  size_t loc;
  if (At(TokKind::kColonName)) {  // `HloModule name:` as some XLA dumps write it
    module_.name = lexer_.tok().str;
    lexer_.Next();
  } else {
    RETURN_IF_ERROR(ParseName(&module_.name, &loc));
    Eat(TokKind::kColon);
  }
  std::set<std::string> seen;
  while (Eat(TokKind::kComma)) {
    if (At(TokKind::kAttrName) && !seen.insert(lexer_.tok().str).second) {
      return TokenError(absl::StrCat("module attribute ", lexer_.tok().str, " given twice"));
    }
    RETURN_IF_ERROR(ParseHeaderAttribute());
  }
  // Newer XLA prints a stack-frame index before the computations.
  module_.stack_frames_loc = Loc();
  RETURN_IF_ERROR(ParseStackFrameIndex());
  do {
    RETURN_IF_ERROR(ParseComputation());
  } while (!At(TokKind::kEof));
  return absl::OkStatus();
}

absl::Status TextParser::ParseHeaderAttribute() {
  if (!At(TokKind::kAttrName)) return TokenError("expected a module attribute name=");
  const size_t loc = Loc();
  const std::string name = lexer_.tok().str;
  lexer_.Next();
  if (name == "entry_computation_layout") {
    module_.entry_layout_loc = loc;
    return ParseEntryComputationLayout();
  }
  if (name == "input_output_alias") return ParseInputOutputAlias();
  if (name == "frontend_attributes") {
    return ParseFrontendAttributes(&module_.frontend_attributes);
  }
  if (name == "num_partitions" || name == "replica_count") {
    int64_t n = 0;
    RETURN_IF_ERROR(ParseInt64(&n));
    if (n < 1 || n > options_.max_devices) {
      return ErrorAt(loc, absl::StrCat(name, " must be in [1, ", options_.max_devices, "]"));
    }
    (name == "num_partitions" ? module_.num_partitions : module_.replica_count) = n;
    return absl::OkStatus();
  }
  if (name == "is_scheduled") return ParseBool(&module_.is_scheduled);
  if (name == "buffer_donor") {
    module_.buffer_donor_loc = loc;
    return ParseBufferDonors();
  }
  if (name == "alias_passthrough_params") {
    bool ignored = false;
    return ParseBool(&ignored);
  }
  // Compilation hints for XLA's partitioner: they do not change what the
  // module computes (not kept).
  if (name == "allow_spmd_sharding_propagation_to_output" ||
      name == "allow_spmd_sharding_propagation_to_parameters" ||
      name == "origin_recovery_table") {
    return SkipValue();
  }
  return Unsupported(loc, absl::StrCat("module attribute ", name, " is not supported"));
}

absl::Status TextParser::ParseEntryComputationLayout() {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start entry_computation_layout"));
  RETURN_IF_ERROR(Expect(TokKind::kLparen, "before the parameter layouts"));
  std::vector<Shape> params;
  if (!At(TokKind::kRparen)) {
    do {
      params.emplace_back();
      RETURN_IF_ERROR(ParseShape(&params.back()));
    } while (Eat(TokKind::kComma));
  }
  RETURN_IF_ERROR(Expect(TokKind::kRparen, "after the parameter layouts"));
  RETURN_IF_ERROR(Expect(TokKind::kArrow, "before the result layout"));
  RETURN_IF_ERROR(ParseShape(&module_.entry_result_layout));
  module_.entry_param_layouts = std::move(params);
  return Expect(TokKind::kRbrace, "to end entry_computation_layout");
}

absl::Status TextParser::ParseInputOutputAlias() {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start input_output_alias"));
  while (!At(TokKind::kRbrace)) {
    ParsedAlias a;
    a.loc = Loc();
    RETURN_IF_ERROR(ParseDimList(&a.alias.output_index));
    RETURN_IF_ERROR(Expect(TokKind::kColon, "after the output index"));
    RETURN_IF_ERROR(Expect(TokKind::kLparen, "before the aliased parameter"));
    RETURN_IF_ERROR(ParseDimValue(&a.alias.parameter_number));
    RETURN_IF_ERROR(Expect(TokKind::kComma, "after the parameter number"));
    RETURN_IF_ERROR(ParseDimList(&a.alias.parameter_index));
    if (Eat(TokKind::kComma)) {
      if (AtIdent("must-alias")) {
        a.alias.must_alias = true;
      } else if (!AtIdent("may-alias")) {
        return TokenError("expected may-alias or must-alias");
      }
      lexer_.Next();
    }
    RETURN_IF_ERROR(Expect(TokKind::kRparen, "after the aliased parameter"));
    module_.aliases.push_back(std::move(a));
    if (!Eat(TokKind::kComma)) break;
  }
  return Expect(TokKind::kRbrace, "to end input_output_alias");
}

// `{ (0, {}), (1, {0}) }`: parameter number and shape index, each checked
// against the entry computation when the module is built.
absl::Status TextParser::ParseBufferDonors() {
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start buffer_donor"));
  if (Eat(TokKind::kRbrace)) return absl::OkStatus();
  do {
    BufferDonor d;
    RETURN_IF_ERROR(Expect(TokKind::kLparen, "before a buffer donor (param, {index})"));
    RETURN_IF_ERROR(ParseDimValue(&d.parameter_number));
    RETURN_IF_ERROR(Expect(TokKind::kComma, "after the donor's parameter number"));
    RETURN_IF_ERROR(ParseDimList(&d.parameter_index));
    RETURN_IF_ERROR(Expect(TokKind::kRparen, "after a buffer donor"));
    module_.buffer_donors.push_back(std::move(d));
  } while (Eat(TokKind::kComma));
  return Expect(TokKind::kRbrace, "to end buffer_donor");
}

absl::Status TextParser::ParseComputation() {
  ParsedComputation comp;
  if (AtIdent("ENTRY")) {
    comp.is_entry = true;
    lexer_.Next();
  }
  RETURN_IF_ERROR(ParseName(&comp.name, &comp.name_loc));
  if (Eat(TokKind::kLparen)) {
    // Parameter names and shapes are restated by the parameter instructions.
    if (!At(TokKind::kRparen)) {
      do {
        if (At(TokKind::kName) || At(TokKind::kIdent)) {
          lexer_.Next();
          RETURN_IF_ERROR(Expect(TokKind::kColon, "after a parameter name"));
        } else if (!Eat(TokKind::kColonName)) {
          return TokenError("expected 'name: shape' in the parameter list");
        }
        Shape ignored;
        RETURN_IF_ERROR(ParseShape(&ignored));
      } while (Eat(TokKind::kComma));
    }
    RETURN_IF_ERROR(Expect(TokKind::kRparen, "to end the parameter list"));
    RETURN_IF_ERROR(Expect(TokKind::kArrow, "before the result shape"));
    comp.result_loc = Loc();
    comp.declared_result.emplace();
    RETURN_IF_ERROR(ParseShape(&*comp.declared_result));
  }
  RETURN_IF_ERROR(Expect(TokKind::kLbrace, "to start the computation body"));
  do {
    RETURN_IF_ERROR(ParseInstruction(&comp));
  } while (!At(TokKind::kRbrace));
  lexer_.Next();
  ExpandCompactTupleAccess(&comp);
  while (Eat(TokKind::kComma)) {
    if (!At(TokKind::kAttrName) || lexer_.tok().str != "execution_thread") {
      return TokenError("expected execution_thread= after a computation");
    }
    lexer_.Next();
    RETURN_IF_ERROR(ParseString(&comp.execution_thread));
  }
  module_.computations.push_back(std::move(comp));
  return absl::OkStatus();
}

absl::Status TextParser::ParseInstruction(ParsedComputation* computation) {
  ParsedInstruction instr;
  if (AtIdent("ROOT")) {
    instr.is_root = true;
    lexer_.Next();
  }
  instr.name_loc = Loc();
  if (At(TokKind::kAttrName)) {  // `name=` with no space
    instr.name = lexer_.tok().str;
    lexer_.Next();
  } else {
    if (!At(TokKind::kName) && !At(TokKind::kIdent)) {
      return TokenError("expected an instruction (name = shape opcode(operands))");
    }
    RETURN_IF_ERROR(ParseName(&instr.name, &instr.name_loc));
    RETURN_IF_ERROR(Expect(TokKind::kEqual, "after the instruction name"));
  }
  if (AtShape()) {
    instr.shape_loc = Loc();
    instr.shape.emplace();
    RETURN_IF_ERROR(ParseShape(&*instr.shape));
  }
  instr.opcode_loc = Loc();
  if (!At(TokKind::kIdent)) return TokenError("expected an opcode");
  const std::string opcode_name = lexer_.tok().str;
  std::optional<HloOpcode> opcode = StringToHloOpcode(opcode_name);
  if (!opcode.has_value()) {
    // XLA's async sugar: `X-start`, `X-update`, `X-done` for an opcode X.
    using Sugar = ParsedInstruction::AsyncSugar;
    for (const auto& [suffix, sugar] : {std::pair<absl::string_view, Sugar>{"-start", Sugar::kStart},
                                        {"-update", Sugar::kUpdate},
                                        {"-done", Sugar::kDone}}) {
      if (!absl::EndsWith(opcode_name, suffix)) continue;
      const std::optional<HloOpcode> wrapped = StringToHloOpcode(
          absl::string_view(opcode_name).substr(0, opcode_name.size() - suffix.size()));
      if (!wrapped.has_value() || *wrapped == HloOpcode::kParameter) break;
      instr.async_sugar = sugar;
      instr.async_wrapped_opcode = *wrapped;
      opcode = sugar == Sugar::kStart    ? *wrapped
               : sugar == Sugar::kUpdate ? HloOpcode::kAsyncUpdate
                                         : HloOpcode::kAsyncDone;
      break;
    }
  }
  if (!opcode.has_value()) {
    return TokenError(absl::StrCat("unknown opcode '", opcode_name, "'"));
  }
  instr.opcode = *opcode;
  lexer_.Next();
  if (instr.async_sugar == ParsedInstruction::AsyncSugar::kStart &&
      (instr.opcode == HloOpcode::kConstant || IsAsyncOpcode(instr.opcode))) {
    return ErrorAt(instr.opcode_loc,
                   absl::StrCat(HloOpcodeString(instr.opcode), " cannot be wrapped in an async op"));
  }
  if (instr.opcode == HloOpcode::kParameter) {
    RETURN_IF_ERROR(Expect(TokKind::kLparen, "before the parameter number"));
    const size_t loc = Loc();
    RETURN_IF_ERROR(ParseDimValue(&instr.attrs.parameter_number));
    if (instr.attrs.parameter_number < 0) return ErrorAt(loc, "parameter number must be >= 0");
    RETURN_IF_ERROR(Expect(TokKind::kRparen, "after the parameter number"));
  } else if (instr.opcode == HloOpcode::kConstant) {
    if (!instr.shape.has_value()) return ErrorAt(instr.opcode_loc, "a constant needs a shape");
    RETURN_IF_ERROR(Expect(TokKind::kLparen, "before the constant's value"));
    RETURN_IF_ERROR(ParseLiteral(*instr.shape, &instr.literal));
    RETURN_IF_ERROR(Expect(TokKind::kRparen, "after the constant's value"));
  } else {
    RETURN_IF_ERROR(ParseOperands(&instr));
  }
  while (Eat(TokKind::kComma)) {
    RETURN_IF_ERROR(ParseInstructionAttribute(&instr));
  }
  RETURN_IF_ERROR(CheckRequiredAttributes(instr));
  computation->instructions.push_back(std::move(instr));
  return absl::OkStatus();
}

// `%x#i#j` operands become get-tuple-element instructions (one per distinct
// prefix of each path, shared by the operands that use it), named
// `x.gte.i.j` or, when the computation has that name already, with a
// `.N` suffix that makes it unique. A printed module shows them as ordinary
// get-tuple-element instructions.
void TextParser::ExpandCompactTupleAccess(ParsedComputation* comp) {
  std::set<std::string> names;
  bool any = false;
  for (const ParsedInstruction& pi : comp->instructions) {
    names.insert(pi.name);
    for (const OperandRef& op : pi.operands) any |= !op.tuple_path.empty();
  }
  if (!any) return;
  std::map<std::pair<std::string, std::vector<int64_t>>, std::string> made;
  std::vector<ParsedInstruction> out;
  out.reserve(comp->instructions.size());
  for (ParsedInstruction& pi : comp->instructions) {
    for (OperandRef& op : pi.operands) {
      std::string source = op.name;
      std::vector<int64_t> prefix;
      for (const int64_t index : op.tuple_path) {
        prefix.push_back(index);
        auto [it, inserted] = made.try_emplace({op.name, prefix});
        if (inserted) {
          const std::string base = absl::StrCat(op.name, ".gte.", absl::StrJoin(prefix, "."));
          std::string name = base;
          for (int n = 1; names.count(name) != 0; ++n) name = absl::StrCat(base, ".", n);
          names.insert(name);
          it->second = name;
          ParsedInstruction gte;
          gte.name = name;
          gte.name_loc = gte.shape_loc = gte.opcode_loc = gte.operands_loc = op.loc;
          gte.opcode = HloOpcode::kGetTupleElement;
          OperandRef from;
          from.name = source;
          from.loc = op.loc;
          gte.operands.push_back(std::move(from));
          gte.attrs.tuple_index = index;
          gte.seen_attrs.insert("index");
          out.push_back(std::move(gte));
        }
        source = it->second;
      }
      if (!op.tuple_path.empty()) {
        op.name = source;
        op.tuple_path.clear();
      }
    }
    out.push_back(std::move(pi));
  }
  comp->instructions = std::move(out);
}

absl::Status TextParser::ParseOperands(ParsedInstruction* instr) {
  instr->operands_loc = Loc();
  RETURN_IF_ERROR(Expect(TokKind::kLparen, "before the operands"));
  if (Eat(TokKind::kRparen)) return absl::OkStatus();
  do {
    OperandRef op;
    op.loc = Loc();
    if (AtShape()) {
      op.shape.emplace();
      RETURN_IF_ERROR(ParseShape(&*op.shape));
    }
    if (!At(TokKind::kName) && !At(TokKind::kIdent)) return TokenError("expected an operand name");
    if (At(TokKind::kIdent) && lexer_.PeekNext().kind == TokKind::kLparen) {
      return Unsupported(Loc(), "nested instructions as operands are not supported");
    }
    size_t name_loc;
    RETURN_IF_ERROR(ParseName(&op.name, &name_loc));
    while (Eat(TokKind::kOctothorp)) {
      const size_t index_loc = Loc();
      int64_t index = 0;
      if (!ParseDimValue(&index).ok()) return TokenError("expected a tuple index after '#'");
      if (index < 0) return ErrorAt(index_loc, "a tuple index after '#' must be >= 0");
      op.tuple_path.push_back(index);
    }
    instr->operands.push_back(std::move(op));
  } while (Eat(TokKind::kComma));
  return Expect(TokKind::kRparen, "after the operands");
}

}  // namespace text_internal

absl::StatusOr<std::unique_ptr<HloModule>> ParseHloText(absl::string_view text,
                                                        absl::string_view filename) {
  return ParseHloText(text, filename, ParseOptions());
}

absl::StatusOr<std::unique_ptr<HloModule>> ParseHloText(absl::string_view text,
                                                        absl::string_view filename,
                                                        const ParseOptions& options) {
  text_internal::TextParser parser(text, filename, options);
  return parser.Run();
}

}  // namespace tpuoff::hlo
