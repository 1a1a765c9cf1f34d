// Internals of the HLO text parser, shared by text_parser*.cc. Parsing runs
// in two phases: the grammar phase turns text into Parsed* records (names
// still unresolved), the build phase resolves names, orders computations and
// instructions by dependency, infers omitted shapes and creates the IR.
#ifndef TPUOFF_HLO_TEXT_TEXT_PARSER_IMPL_H_
#define TPUOFF_HLO_TEXT_TEXT_PARSER_IMPL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/module.h"
#include "hlo/text/text_lexer.h"
#include "hlo/text/text_parser.h"

namespace tpuoff::hlo::text_internal {

// A reference by name, with where it was written.
struct NameRef {
  std::string name;
  size_t loc = 0;
};

struct OperandRef {
  std::string name;
  std::optional<Shape> shape;  // when written as `f32[2]{0} %x`
  size_t loc = 0;
  // XLA's compact tuple access `%x#1#0`: element 0 of element 1 of x. The
  // computation's parse turns it into get-tuple-element instructions.
  std::vector<int64_t> tuple_path;
};

struct ParsedInstruction {
  std::string name;
  size_t name_loc = 0;
  bool is_root = false;
  std::optional<Shape> shape;  // absent: inferred from the operands
  size_t shape_loc = 0;
  HloOpcode opcode = HloOpcode::kParameter;
  size_t opcode_loc = 0;
  std::vector<OperandRef> operands;
  size_t operands_loc = 0;
  std::optional<Literal> literal;  // constant
  HloAttributes attrs;
  std::set<std::string> seen_attrs;  // attribute names given
  // XLA's async syntax sugar: `X-start(...)` is an async-start wrapping one
  // X instruction (parsed with opcode X and async_sugar kStart, its
  // attributes X's); `X-update` / `X-done` are async-update / async-done
  // whose wrapped instruction must be an X.
  enum class AsyncSugar { kNone, kStart, kUpdate, kDone };
  AsyncSugar async_sugar = AsyncSugar::kNone;
  HloOpcode async_wrapped_opcode = HloOpcode::kParameter;
  // Called computations by role; the build phase puts them in IR order.
  std::optional<NameRef> to_apply, condition, body, calls;
  std::optional<NameRef> true_computation, false_computation;
  std::optional<NameRef> select, scatter;  // select-and-scatter
  std::vector<NameRef> branch_computations, called_computations;
  OpMetadata metadata;
  FrontendAttributes frontend_attributes;
  std::optional<HloSharding> sharding;
  std::vector<NameRef> control_predecessors;
};

struct ParsedComputation {
  std::string name;
  size_t name_loc = 0;
  bool is_entry = false;
  std::optional<Shape> declared_result;  // from `(params) -> shape`
  size_t result_loc = 0;
  std::vector<ParsedInstruction> instructions;
  std::string execution_thread;
};

struct ParsedAlias {
  InputOutputAlias alias;
  size_t loc = 0;
};

struct ParsedModule {
  std::string name;
  std::optional<std::vector<Shape>> entry_param_layouts;
  Shape entry_result_layout;
  size_t entry_layout_loc = 0;
  std::vector<ParsedAlias> aliases;
  FrontendAttributes frontend_attributes;
  int64_t num_partitions = 1;
  int64_t replica_count = 1;
  bool is_scheduled = false;
  std::vector<BufferDonor> buffer_donors;
  size_t buffer_donor_loc = 0;
  StackFrameIndex stack_frames;
  size_t stack_frames_loc = 0;
  std::vector<ParsedComputation> computations;
};

class TextParser {
 public:
  TextParser(absl::string_view text, absl::string_view filename,
             const ParseOptions& options)
      : lexer_(text), filename_(filename), options_(options) {}

  absl::StatusOr<std::unique_ptr<HloModule>> Run();

  // ---- Errors (text_parser.cc). All name file:line:col and the token.
  absl::Status ErrorAt(size_t loc, absl::string_view message,
                       absl::StatusCode code = absl::StatusCode::kInvalidArgument) const;
  absl::Status TokenError(absl::string_view message) const;
  absl::Status Unsupported(size_t loc, absl::string_view message) const {
    return ErrorAt(loc, message, absl::StatusCode::kUnimplemented);
  }
  size_t Loc() const { return lexer_.tok().begin; }

  // ---- Tokens.
  bool At(TokKind kind) const { return lexer_.kind() == kind; }
  bool AtIdent(absl::string_view s) const {
    return lexer_.kind() == TokKind::kIdent && lexer_.tok().str == s;
  }
  bool Eat(TokKind kind);
  absl::Status Expect(TokKind kind, absl::string_view context);

  // ---- Values (text_parser_values.cc).
  absl::Status ParseInt64(int64_t* value);
  // A size, index or dimension: |value| <= kMaxDimValue.
  absl::Status ParseDimValue(int64_t* value);
  absl::Status ParseBool(bool* value);
  absl::Status ParseString(std::string* value);
  absl::Status ParseDouble(double* value, bool* has_payload, uint64_t* payload);
  // `{1,2,3}` (or with other brackets/delimiters), values bounded like dims.
  absl::Status ParseDimList(std::vector<int64_t>* out,
                            TokKind open = TokKind::kLbrace,
                            TokKind close = TokKind::kRbrace,
                            TokKind delim = TokKind::kComma);
  absl::Status ParseDimListList(std::vector<std::vector<int64_t>>* out);
  // `%name` or a bare identifier.
  absl::Status ParseName(std::string* name, size_t* loc);
  bool AtShape() const;
  absl::Status ParseShape(Shape* shape, int depth = 0);
  // An array constant's values; `{...}` (elided) leaves `literal` empty.
  absl::Status ParseLiteral(const Shape& shape, std::optional<Literal>* literal);

  // ---- Attribute values (text_parser_attrs.cc).
  absl::Status ParseSharding(HloSharding* sharding, int depth = 0);
  absl::Status ParseReplicaGroups(ReplicaGroups* groups);
  absl::Status ParseMeshReplicaGroups(ReplicaGroups* groups);
  absl::Status ParseMetadata(OpMetadata* metadata);
  absl::Status ParseFrontendAttributes(FrontendAttributes* attrs);
  absl::Status ParseStringOrJsonDict(std::string* value);
  absl::Status ParseSliceRanges(std::vector<SliceDimension>* slice);
  absl::Status ParsePadding(std::vector<PaddingDimension>* padding);
  // `{size=1x32 stride=1x32 pad=0_0x10_10 ...}` (text_parser_window.cc).
  absl::Status ParseWindow(std::vector<WindowDimension>* window);
  absl::Status ParsePrecisionList(std::vector<std::string>* precisions);
  // `{mode=highest}` / `{tolerance={atol=..,rtol=..,ulps=..}}`.
  absl::Status ParseResultAccuracy(ResultAccuracy* accuracy);
  // `{visualizing_index=1,stat-1=33}`.
  absl::Status ParseStatistics(StatisticsViz* statistics);
  absl::Status ParseNameList(std::vector<NameRef>* names);
  absl::Status ParseComputationRef(NameRef* ref);
  // text_parser_ops.cc: attributes of fft, linear algebra, batch norm, rng,
  // domain, custom-call layouts/aliasing and origin=. `handled` is false
  // (and nothing consumed) for any other attribute.
  absl::Status ParseOpAttribute(const std::string& name, size_t loc, ParsedInstruction* instr,
                                bool* handled);
  absl::Status ParseOriginalValueTree(OriginalValue* value, std::vector<int64_t>* leaf,
                                      int depth);
  absl::Status ParseOutputOperandAliasing(std::vector<OutputOperandAlias>* out);
  absl::Status ParseDomain(HloAttributes* attrs);
  // Skips one attribute value whose meaning we drop (balanced brackets).
  absl::Status SkipValue();
  // One `name=value` after an instruction's operands.
  absl::Status ParseInstructionAttribute(ParsedInstruction* instr);
  // Opcode-specific required attributes, after all were parsed.
  absl::Status CheckRequiredAttributes(const ParsedInstruction& instr) const;

  // ---- Grammar (text_parser.cc).
  absl::Status ParseModule();
  absl::Status ParseHeaderAttribute();
  absl::Status ParseEntryComputationLayout();
  absl::Status ParseInputOutputAlias();
  absl::Status ParseBufferDonors();
  // FileNames / FunctionNames / FileLocations / StackFrames tables.
  absl::Status ParseStackFrameIndex();
  absl::Status ParseComputation();
  absl::Status ParseInstruction(ParsedComputation* computation);
  absl::Status ParseOperands(ParsedInstruction* instr);
  void ExpandCompactTupleAccess(ParsedComputation* comp);

  // ---- Building the IR (text_parser_build.cc).
  absl::StatusOr<std::unique_ptr<HloModule>> Build();
  // Turns every `X-start` into an async-start calling a new computation
  // that holds the X instruction (text_parser_async.cc).
  absl::Status DesugarAsyncStarts();

  HloLexer lexer_;
  std::string filename_;
  ParseOptions options_;
  ParsedModule module_;
};

// Largest magnitude accepted for sizes, indices and padding amounts.
inline constexpr int64_t kMaxDimValue = int64_t{1} << 40;
// Largest magnitude of a padding amount: small enough that padded sizes
// (size + (size - 1) * interior) cannot overflow.
inline constexpr int64_t kMaxPadding = int64_t{1} << 24;
// Highest rank accepted for an array shape.
inline constexpr int64_t kMaxRank = 64;

}  // namespace tpuoff::hlo::text_internal

#endif  // TPUOFF_HLO_TEXT_TEXT_PARSER_IMPL_H_
