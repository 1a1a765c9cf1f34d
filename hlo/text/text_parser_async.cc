// XLA's async syntax sugar. `X-start(operands), <X's attributes>` is an
// async-start whose wrapped computation holds one X instruction on
// parameters; the sugar is expanded here, before the build phase, into that
// computation and a plain async-start calling it. (X-update / X-done are
// checked against their async-start when the IR is built.)
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "hlo/text/text_parser_impl.h"

namespace tpuoff::hlo::text_internal {

absl::Status TextParser::DesugarAsyncStarts() {
  using Sugar = ParsedInstruction::AsyncSugar;
  std::set<std::string> names;
  for (const ParsedComputation& c : module_.computations) names.insert(c.name);
  std::vector<ParsedComputation> wrapped;
  for (ParsedComputation& comp : module_.computations) {
    for (ParsedInstruction& start : comp.instructions) {
      if (start.async_sugar != Sugar::kStart) continue;
      const std::string what = absl::StrCat(HloOpcodeString(start.opcode), "-start");
      if (!start.shape.has_value()) {
        return ErrorAt(start.opcode_loc,
                       absl::StrCat(what, " needs its shape: ((operands), result, context)"));
      }
      const Shape& s = *start.shape;
      const int64_t n = static_cast<int64_t>(start.operands.size());
      if (!s.IsTuple() || s.tuple_size() < 2 || !s.tuple_shapes(0).IsTuple() ||
          s.tuple_shapes(0).tuple_size() != n) {
        return ErrorAt(start.shape_loc,
                       absl::StrCat(what, " has shape ", s.ToString(), "; expected ((", n,
                                    " operand shapes), result, context...)"));
      }
      ParsedComputation w;
      w.name = absl::StrCat(start.name, ".wrapped");
      for (int k = 1; names.count(w.name); ++k) w.name = absl::StrCat(start.name, ".wrapped.", k);
      names.insert(w.name);
      w.name_loc = start.name_loc;
      w.execution_thread = start.attrs.async_execution_thread;
      ParsedInstruction x = start;
      x.name = absl::StrCat(start.name, ".inner");
      x.is_root = true;
      x.async_sugar = Sugar::kNone;
      x.shape = s.tuple_shapes(1);
      x.sharding.reset();
      x.control_predecessors.clear();
      x.attrs.async_execution_thread.clear();
      x.seen_attrs.erase("async_execution_thread");
      for (int64_t i = 0; i < n; ++i) {
        ParsedInstruction p;
        p.name = absl::StrCat("param_", i);
        p.name_loc = p.opcode_loc = p.shape_loc = start.operands[i].loc;
        p.opcode = HloOpcode::kParameter;
        p.attrs.parameter_number = i;
        p.shape = s.tuple_shapes(0).tuple_shapes(i);
        x.operands[i].name = p.name;
        w.instructions.push_back(std::move(p));
      }
      w.instructions.push_back(std::move(x));
      // The async-start keeps what XLA keeps on it: the generic annotations.
      HloAttributes kept;
      kept.backend_config = start.attrs.backend_config;
      kept.async_execution_thread = start.attrs.async_execution_thread;
      start.attrs = std::move(kept);
      start.opcode = HloOpcode::kAsyncStart;
      start.async_sugar = Sugar::kNone;
      start.calls = NameRef{w.name, start.opcode_loc};
      start.to_apply.reset();
      start.condition.reset();
      start.body.reset();
      start.true_computation.reset();
      start.false_computation.reset();
      start.select.reset();
      start.scatter.reset();
      start.branch_computations.clear();
      start.called_computations.clear();
      wrapped.push_back(std::move(w));
    }
  }
  // In front: without an ENTRY keyword the last computation is the entry.
  module_.computations.insert(module_.computations.begin(),
                              std::make_move_iterator(wrapped.begin()),
                              std::make_move_iterator(wrapped.end()));
  return absl::OkStatus();
}

}  // namespace tpuoff::hlo::text_internal
