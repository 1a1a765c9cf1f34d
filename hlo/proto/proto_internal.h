// Field-level conversions between IR value types and their xla:: proto
// messages, shared by proto_export.cc and proto_import.cc. Internal to
// hlo/proto: the only hlo header that includes the generated .pb.h, and no
// IR header includes it.
#ifndef TPUOFF_HLO_PROTO_PROTO_INTERNAL_H_
#define TPUOFF_HLO_PROTO_PROTO_INTERNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/attributes.h"
#include "hlo/ir/instruction.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/shape.h"
// protobuf_generate_cpp writes the header at the build root; accept a
// proto/ subdirectory too should the build ever move it there.
#if __has_include("proto/hlo.pb.h")
#include "proto/hlo.pb.h"
#else
#include "hlo.pb.h"
#endif

namespace tpuoff::hlo::proto_internal {

// Limits on what an imported proto may ask for, so hostile input cannot make
// us allocate or overflow. Real modules are far below them (the largest GRPO
// logits are ~5e9 elements).
inline constexpr int64_t kMaxRank = 64;
inline constexpr int64_t kMaxDimension = int64_t{1} << 40;
// Product of the non-zero dimensions of one array shape (keeps strides and
// byte sizes far from int64 overflow).
inline constexpr int64_t kMaxElements = int64_t{1} << 42;
// Devices in one expanded iota tile assignment, iota replica group list or
// device assignment (the largest TPU pods have under 10k chips; a small cap
// keeps each hostile sharding from expanding to megabytes).
inline constexpr int64_t kMaxDevices = int64_t{1} << 16;

// ---- Shapes ----------------------------------------------------------------

// Arrays always get a layout (scalars an empty one) and is_dynamic_dimension
// entries, as XLA writes them; tuples recurse; tokens are bare.
void ShapeToProto(const Shape& shape, xla::ShapeProto* proto);
// Validates element type, rank, dimensions, layout permutation and the
// element-count cap. A missing layout means row-major. `where` prefixes
// error messages (e.g. "computation main, instruction x: shape").
// Enforces hlo/ir/limits.h (array bytes, tuple nesting below `depth`).
absl::StatusOr<Shape> ShapeFromProto(const xla::ShapeProto& proto,
                                     absl::string_view where, int depth = 0);

// ---- Op attributes of proto_ops.cc ------------------------------------------

// fft, cholesky, triangular-solve, batch norm, rng*, domain, custom-call
// layout constraints, output/operand aliasing and original_value.
absl::Status OpAttributesToProto(const HloInstruction& instr, xla::HloInstructionProto* proto);
absl::Status OpAttributesFromProto(const xla::HloInstructionProto& proto, HloOpcode op,
                                   const std::string& where, HloAttributes* attrs);

// ---- Literals --------------------------------------------------------------

// Writes `literal` with the shape (and layout) `layout_shape`, which must be
// compatible with the literal's shape: element data is stored in that
// layout's physical order, as XLA reads it.
absl::Status LiteralToProto(const Literal& literal, const Shape& layout_shape,
                            xla::LiteralProto* proto);
// Reads a literal; the element count of the typed field must match the
// shape exactly. Data in the proto's layout order becomes row-major bytes.
absl::StatusOr<Literal> LiteralFromProto(const xla::LiteralProto& proto,
                                         absl::string_view where);

// ---- Attributes ------------------------------------------------------------

void ShardingToProto(const HloSharding& sharding, xla::OpSharding* proto);
absl::StatusOr<HloSharding> ShardingFromProto(const xla::OpSharding& proto,
                                              absl::string_view where);

// Explicit groups go to the legacy `replica_groups` field, which every XLA
// loader version reads first; an iota form is also recorded in
// `collective_device_list.iota_replica_group_list` so it survives a round
// trip through our importer (XLA ignores it when the explicit list is set).
absl::Status ReplicaGroupsToProto(const ReplicaGroups& groups,
                                  xla::HloInstructionProto* proto);
absl::StatusOr<ReplicaGroups> ReplicaGroupsFromProto(
    const xla::HloInstructionProto& proto, absl::string_view where);

void MetadataToProto(const OpMetadata& metadata, xla::OpMetadata* proto);
OpMetadata MetadataFromProto(const xla::OpMetadata& proto);

void FrontendAttributesToProto(const FrontendAttributes& attrs,
                               xla::FrontendAttributes* proto);
FrontendAttributes FrontendAttributesFromProto(
    const xla::FrontendAttributes& proto);

// "DEFAULT" / "HIGH" / "HIGHEST" <-> PrecisionConfig.Precision.
absl::StatusOr<xla::PrecisionConfig::Precision> PrecisionFromString(
    absl::string_view name);
absl::StatusOr<std::string> PrecisionToString(int value,
                                              absl::string_view where);

// protobuf prints a negative zero as `-0`, which its own JSON parser reads
// as the integer 0, losing the sign (and -0.0 is XLA's usual add-reduction
// init). Respells such numbers `-0.0` outside strings; applied to JSON we
// write and to JSON we read (which other protobuf writers produce too).
std::string RespellNegativeZeros(const std::string& json);

// Checks that `perm` is a permutation of 0..n-1.
bool IsPermutation(const std::vector<int64_t>& perm, int64_t n);

}  // namespace tpuoff::hlo::proto_internal

#endif  // TPUOFF_HLO_PROTO_PROTO_INTERNAL_H_
