// Typed per-op attributes of an instruction (the fields mirror XLA's
// HloInstructionProto so import/export is field-for-field).
#ifndef TPUOFF_HLO_IR_ATTRIBUTES_H_
#define TPUOFF_HLO_IR_ATTRIBUTES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/attributes_xla.h"

namespace tpuoff::hlo {

enum class ComparisonDirection { kEq, kNe, kGe, kGt, kLe, kLt };
absl::string_view ComparisonDirectionString(ComparisonDirection d);
absl::StatusOr<ComparisonDirection> ParseComparisonDirection(
    absl::string_view s);

// XLA's comparison "type": how floats are ordered (TOTALORDER, FLOAT, ...).
// Kept as text; empty means the default for the operand type.
struct DotDimensionNumbers {
  std::vector<int64_t> lhs_contracting_dimensions;
  std::vector<int64_t> rhs_contracting_dimensions;
  std::vector<int64_t> lhs_batch_dimensions;
  std::vector<int64_t> rhs_batch_dimensions;
  bool operator==(const DotDimensionNumbers&) const = default;
};

// Dimension roles of a convolution (XLA's ConvolutionDimensionNumbers); the
// text form is `dim_labels=b01f_01io->b01f`.
struct ConvolutionDimensionNumbers {
  int64_t input_batch_dimension = 0;
  int64_t input_feature_dimension = 0;
  std::vector<int64_t> input_spatial_dimensions;
  int64_t kernel_input_feature_dimension = 0;
  int64_t kernel_output_feature_dimension = 0;
  std::vector<int64_t> kernel_spatial_dimensions;
  int64_t output_batch_dimension = 0;
  int64_t output_feature_dimension = 0;
  std::vector<int64_t> output_spatial_dimensions;
  bool operator==(const ConvolutionDimensionNumbers&) const = default;
};
// `b01f_01io->b01f` <-> dimension numbers (ranks from the labels).
std::string ConvolutionDimensionNumbersToString(const ConvolutionDimensionNumbers& dnums);
absl::StatusOr<ConvolutionDimensionNumbers> ParseConvolutionDimensionNumbers(
    absl::string_view labels);

// Dot algorithms (XLA's PrecisionConfig.Algorithm, same numbers); text form
// `algorithm=dot_bf16_bf16_f32`.
absl::string_view DotAlgorithmName(int algorithm);  // "" for unknown numbers
std::optional<int> DotAlgorithmFromName(absl::string_view name);
inline constexpr int kNumDotAlgorithms = 14;

struct GatherDimensionNumbers {
  std::vector<int64_t> offset_dims;
  std::vector<int64_t> collapsed_slice_dims;
  std::vector<int64_t> start_index_map;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> operand_batching_dims;
  std::vector<int64_t> start_indices_batching_dims;
  bool operator==(const GatherDimensionNumbers&) const = default;
};

struct ScatterDimensionNumbers {
  std::vector<int64_t> update_window_dims;
  std::vector<int64_t> inserted_window_dims;
  std::vector<int64_t> scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> input_batching_dims;
  std::vector<int64_t> scatter_indices_batching_dims;
  bool operator==(const ScatterDimensionNumbers&) const = default;
};

struct PaddingDimension {
  int64_t edge_padding_low = 0;
  int64_t edge_padding_high = 0;
  int64_t interior_padding = 0;
  bool operator==(const PaddingDimension&) const = default;
};

// One dimension of a sliding window (reduce-window), as XLA's
// WindowDimension: window element k of output position o reads the
// base-dilated, padded input at o*stride + k*window_dilation - padding_low.
struct WindowDimension {
  int64_t size = 1;
  int64_t stride = 1;
  int64_t padding_low = 0;
  int64_t padding_high = 0;
  int64_t window_dilation = 1;
  int64_t base_dilation = 1;
  bool window_reversal = false;
  bool operator==(const WindowDimension&) const = default;
};

struct SliceDimension {
  int64_t start = 0;
  int64_t limit = 0;
  int64_t stride = 1;
  bool operator==(const SliceDimension&) const = default;
};

// A mesh axis a collective's groups run over: the whole axis, or
// (pre_size > 0) the sub-axis `'name':(pre_size)size` — the axis reshaped
// to [pre_size, size, rest], its middle part.
struct MeshAxisRef {
  std::string name;
  int64_t pre_size = 0;
  int64_t size = 0;
  bool operator==(const MeshAxisRef&) const = default;
};

// Device groups of a collective. Either explicit lists, or XLA's iota form
// `[num_groups,group_size]<=[reshape]T(perm)`, which `groups` also expands.
struct ReplicaGroups {
  std::vector<std::vector<int64_t>> groups;
  // Iota form, when the module said it that way (kept for printing).
  std::vector<int64_t> iota_reshape_dims;
  std::vector<int64_t> iota_transpose_perm;
  bool iota_form = false;
  // Mesh form (XLA's MeshAxesReplicaGroupList), kept for printing:
  // `mesh['a'=4,'b'=2], device_ids=(...) {'a','b':(1)2}`. The device at each
  // mesh position (row-major) is mesh_device_ids[position], or the position
  // itself when the list is empty; mesh_device_iota_* keep the `[dims]T(perm)`
  // spelling of the list when the module used it. One group per index of the
  // mesh (sub-)axes not named, running over the named ones (hlo/ir/
  // mesh_replica_groups.h).
  std::vector<std::pair<std::string, int64_t>> mesh_axes;
  std::vector<int64_t> mesh_device_ids;
  std::vector<int64_t> mesh_device_iota_reshape;
  std::vector<int64_t> mesh_device_iota_perm;
  std::vector<MeshAxisRef> mesh_group_axes;
  bool operator==(const ReplicaGroups&) const = default;
};

// Device ids of an iota tile assignment: iota(prod(reshape)), reshaped,
// transposed by perm, flattened.
std::vector<int64_t> ExpandIotaDevices(const std::vector<int64_t>& reshape_dims,
                                       const std::vector<int64_t>& perm);

struct HloSharding {
  enum class Type { kReplicated, kMaximal, kTuple, kTiled, kManual, kUnknown };
  Type type = Type::kReplicated;
  std::vector<int64_t> tile_assignment_dims;  // kTiled (and kMaximal: {1})
  std::vector<int64_t> devices;               // flattened tile assignment
  // Iota form `<=[reshape]T(perm)` when the module said it that way.
  bool iota_form = false;
  std::vector<int64_t> iota_reshape_dims;
  std::vector<int64_t> iota_transpose_perm;
  bool replicate_on_last_tile_dim = false;
  std::vector<int> last_tile_dims;  // OpSharding.Type values (e.g. MANUAL=4)
  std::vector<HloSharding> tuple_shardings;
  bool operator==(const HloSharding&) const = default;

  static HloSharding Replicated() { return HloSharding{}; }
  static HloSharding Manual() {
    HloSharding s;
    s.type = Type::kManual;
    return s;
  }
  // Tiled over `tile_dims` with devices 0..n-1 in order (iota form).
  static HloSharding IotaTiled(std::vector<int64_t> tile_dims);
};

struct OpMetadata {
  std::string op_type;
  std::string op_name;
  std::string source_file;
  int32_t source_line = 0;
  int32_t source_end_line = 0;
  int32_t source_column = 0;
  int32_t source_end_column = 0;
  std::vector<int64_t> profile_type;  // ProfileType values
  std::string deduplicated_name;
  std::string scheduling_name;
  int32_t stack_frame_id = 0;
  bool empty() const { return *this == OpMetadata{}; }
  bool operator==(const OpMetadata&) const = default;
};

using FrontendAttributes = std::map<std::string, std::string>;

enum class FusionKind { kLoop, kInput, kOutput, kCustom };

// fft: FftType (xla_data.proto numbers); text fft_type=FFT.
enum class FftType { kFft = 0, kIfft = 1, kRfft = 2, kIrfft = 3 };
absl::string_view FftTypeString(FftType t);
absl::StatusOr<FftType> ParseFftType(absl::string_view s);

// triangular-solve transpose_a (TriangularSolveOptions.Transpose numbers).
enum class TriangularTranspose { kInvalid = 0, kNoTranspose = 1, kTranspose = 2, kAdjoint = 3 };
absl::string_view TriangularTransposeString(TriangularTranspose t);
absl::StatusOr<TriangularTranspose> ParseTriangularTranspose(absl::string_view s);

// rng distribution (RandomDistribution) and rng-bit-generator algorithm
// (RandomAlgorithm); text rng_uniform / rng_philox.
enum class RngDistribution { kInvalid = 0, kUniform = 1, kNormal = 2 };
enum class RngAlgorithm { kDefault = 0, kThreeFry = 1, kPhilox = 2 };
absl::string_view RngDistributionString(RngDistribution d);
absl::StatusOr<RngDistribution> ParseRngDistribution(absl::string_view s);
absl::string_view RngAlgorithmString(RngAlgorithm a);
absl::StatusOr<RngAlgorithm> ParseRngAlgorithm(absl::string_view s);
absl::string_view FusionKindString(FusionKind k);
absl::StatusOr<FusionKind> ParseFusionKind(absl::string_view s);

// All attributes an instruction may carry; each opcode reads only its own.
struct HloAttributes {
  int64_t parameter_number = 0;
  int64_t tuple_index = 0;
  // broadcast, transpose, reduce, reverse, concatenate, iota, all-gather,
  // reduce-scatter, all-to-all (split dimension), sort.
  std::vector<int64_t> dimensions;
  std::vector<SliceDimension> slice;
  std::vector<int64_t> dynamic_slice_sizes;
  std::vector<PaddingDimension> padding;
  std::vector<WindowDimension> window;  // reduce-window: one per dimension
  ComparisonDirection comparison_direction = ComparisonDirection::kEq;
  std::string comparison_type;  // "" = default
  DotDimensionNumbers dot;
  std::vector<std::string> operand_precision;  // "DEFAULT", "HIGHEST", ...
  GatherDimensionNumbers gather;
  std::vector<int64_t> gather_slice_sizes;
  ScatterDimensionNumbers scatter;
  bool indices_are_sorted = false;
  bool unique_indices = false;
  std::optional<int64_t> channel_id;
  ReplicaGroups replica_groups;
  bool use_global_device_ids = false;
  bool constrain_layout = false;
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;
  std::string custom_call_target;
  std::string backend_config;
  int custom_call_api_version = 0;  // 0 = unspecified
  bool custom_call_has_side_effect = false;
  FusionKind fusion_kind = FusionKind::kLoop;
  // dot / convolution: PrecisionConfig.Algorithm (0 = unset).
  int dot_algorithm = 0;
  // convolution (window in `window`).
  ConvolutionDimensionNumbers conv;
  int64_t feature_group_count = 1;
  int64_t batch_group_count = 1;
  // sort
  bool is_stable = false;
  // topk
  int64_t k = 0;
  bool largest = true;
  // reduce-precision
  int64_t exponent_bits = 0;
  int64_t mantissa_bits = 0;
  // async-start/-update/-done: the thread the wrapped computation runs on
  // ("" = XLA's "main").
  std::string async_execution_thread;
  // collective-permute(-start) in place (4 operands): one slice per pair.
  std::vector<std::vector<int64_t>> permute_slice_sizes;
  // send/recv(-done): a transfer to or from the host.
  bool is_host_transfer = false;
  // copy-start: which cross-program prefetch it is.
  std::optional<int64_t> cross_program_prefetch_index;
  // parameter: replication per leaf buffer (empty: not given).
  std::vector<bool> parameter_replication;
  // call: a composite (its frontend attributes name it).
  bool is_composite = false;
  // fft
  FftType fft_type = FftType::kFft;
  std::vector<int64_t> fft_length;
  // cholesky (lower) and triangular-solve
  bool lower = false;
  bool left_side = false;
  bool unit_diagonal = false;
  TriangularTranspose transpose_a = TriangularTranspose::kInvalid;
  // batch-norm-training/-inference/-grad
  float epsilon = 0;
  int64_t feature_index = 0;
  // rng, rng-bit-generator, rng-get-and-update-state
  RngDistribution distribution = RngDistribution::kInvalid;
  RngAlgorithm rng_algorithm = RngAlgorithm::kDefault;
  int64_t delta = 0;
  // custom-call: operand layouts it requires (`operand_layout_constraints=`,
  // shapes with layouts; nullopt = unconstrained) and buffers it writes in
  // place of an operand.
  std::optional<std::vector<Shape>> operand_layout_constraints;
  std::vector<OutputOperandAlias> output_to_operand_aliasing;
  // domain: `domain={kind="sharding", entry={...}, exit={...}}`.
  std::string domain_kind;
  std::optional<HloSharding> domain_entry_sharding;
  std::optional<HloSharding> domain_exit_sharding;
  // Any instruction: where its value came from in the unoptimised module.
  OriginalValue original_value;
  // Unary transcendental ops: the accuracy asked for.
  ResultAccuracy result_accuracy;
  // Any instruction: statistics for visualisation.
  StatisticsViz statistics;
  bool operator==(const HloAttributes&) const = default;
};

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_ATTRIBUTES_H_
