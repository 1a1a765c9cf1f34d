// Annotations XLA prints on any instruction or module that do not change
// what is computed but must survive a round trip: result accuracy of
// transcendental ops, statistics for visualisation, buffer donors. Field
// meanings follow xla_data.proto / hlo.proto.
#ifndef TPUOFF_HLO_IR_ATTRIBUTES_XLA_H_
#define TPUOFF_HLO_IR_ATTRIBUTES_XLA_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hlo/ir/opcode.h"
#include "hlo/ir/shape.h"

namespace tpuoff::hlo {

// ResultAccuracy: a mode (DEFAULT, HIGHEST) or a tolerance. Text
// `{mode=highest}` or `{tolerance={atol=1,rtol=0.5,ulps=2}}`; the default is
// not printed. Only the unary transcendental ops take one
// (OpcodeTakesResultAccuracy).
struct ResultAccuracy {
  bool highest = false;
  bool has_tolerance = false;
  double atol = 0;
  double rtol = 0;
  int64_t ulps = 0;
  bool IsDefault() const { return !highest && !has_tolerance; }
  bool operator==(const ResultAccuracy&) const = default;
};
bool OpcodeTakesResultAccuracy(HloOpcode op);

// StatisticsViz: `statistics={visualizing_index=1,stat-1=33,stat-2=44}`.
struct StatisticsViz {
  int64_t visualizing_index = 0;
  std::vector<std::pair<std::string, double>> statistics;
  bool empty() const { return visualizing_index == 0 && statistics.empty(); }
  bool operator==(const StatisticsViz&) const = default;
};

// An entry parameter (sub)buffer that may be donated to an output:
// `buffer_donor={ (0, {}), (1, {0}) }` in the module header.
struct BufferDonor {
  int64_t parameter_number = 0;
  std::vector<int64_t> parameter_index;
  bool operator==(const BufferDonor&) const = default;
};

// The stack-frame index XLA prints before the computations (FileNames,
// FunctionNames, FileLocations, StackFrames) and stores in
// HloModuleProto.stack_frame_index; metadata's stack_frame_id points into
// it. Ids are 1-based.
struct StackFrameIndex {
  struct FileLocation {
    int32_t file_name_id = 0;
    int32_t function_name_id = 0;
    int32_t line = 0;
    int32_t end_line = 0;
    int32_t column = 0;
    int32_t end_column = 0;
    bool operator==(const FileLocation&) const = default;
  };
  struct Frame {
    int32_t file_location_id = 0;
    int32_t parent_frame_id = 0;
    bool operator==(const Frame&) const = default;
  };
  std::vector<std::string> file_names;
  std::vector<std::string> function_names;
  std::vector<FileLocation> file_locations;
  std::vector<Frame> frames;
  bool empty() const {
    return file_names.empty() && function_names.empty() && file_locations.empty() &&
           frames.empty();
  }
  bool operator==(const StackFrameIndex&) const = default;
};

// XLA's OriginalValue: which array of the unoptimised module each leaf of an
// instruction's result came from. Text `origin={{"x.1"}}`, tuples
// `origin={({"a" {1}}, {})}` (`{}`: a leaf with none); proto
// OriginalValueProto (elements of leaf index + original array).
struct OriginalValueLeaf {
  std::vector<int64_t> leaf_index;  // index of the leaf in the result tuple
  std::string instruction_name;
  std::vector<int64_t> shape_index;  // index into that instruction's result
  bool operator==(const OriginalValueLeaf&) const = default;
};
struct OriginalValue {
  bool present = false;  // origin= given (may still have no leaves)
  std::vector<OriginalValueLeaf> leaves;
  bool operator==(const OriginalValue&) const = default;
};

// A custom-call (or fusion) output buffer that aliases an operand buffer:
// text `output_to_operand_aliasing={{0}: (0, {})}`.
struct OutputOperandAlias {
  std::vector<int64_t> output_index;
  int64_t operand = 0;
  std::vector<int64_t> operand_index;
  bool operator==(const OutputOperandAlias&) const = default;
};

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_ATTRIBUTES_XLA_H_
