// Parses XLA's HLO text syntax into a module. Errors carry file:line:col and
// the offending token; unsupported syntax is UNIMPLEMENTED, malformed input
// INVALID_ARGUMENT. The parser never crashes on any input.
#ifndef TPUOFF_HLO_TEXT_TEXT_PARSER_H_
#define TPUOFF_HLO_TEXT_TEXT_PARSER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/limits.h"
#include "hlo/ir/module.h"

namespace tpuoff::hlo {

// Limits that keep hostile input from allocating or recursing without bound.
struct ParseOptions {
  // Largest array any shape may describe; f32[99999999999] is rejected.
  int64_t max_array_bytes = kMaxArrayBytes;  // 128 GiB (hlo/ir/limits.h)
  // Most elements one constant may hold (and never more than the characters
  // left in the input, since every element is spelt out).
  int64_t max_constant_elements = int64_t{1} << 26;
  // Deepest nesting of tuple shapes, tuple shardings and similar brackets.
  int max_nesting_depth = kMaxShapeNesting;
  // Most devices an iota tile assignment or replica-group list may expand to.
  int64_t max_devices = int64_t{1} << 14;
};

// `filename` is used in error messages only. The result is not verified;
// call VerifyModule() (the CLI always does).
//
// Accepted beyond what XLA's own parser takes: computations may be defined
// after their callers and instructions after their users (both are put in
// dependency order); `padding=` may be empty for rank-0 pads (XLA prints it
// that way). Dropped on purpose, as they do not change what a module
// computes: layout tiling, memory spaces and element sizes; is_scheduled,
// allow_spmd_sharding_propagation_*, buffer_donor, alias_passthrough_params;
// statistics, origin, result_accuracy, inferred_dimension, parameter_replication
// and metadata fields other than op_type/op_name/source_file/source_line.
absl::StatusOr<std::unique_ptr<HloModule>> ParseHloText(
    absl::string_view text, absl::string_view filename = "<text>");
absl::StatusOr<std::unique_ptr<HloModule>> ParseHloText(
    absl::string_view text, absl::string_view filename,
    const ParseOptions& options);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_TEXT_TEXT_PARSER_H_
