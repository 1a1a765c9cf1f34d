// Conversion between the IR and XLA's HloModuleProto (proto/hlo.proto), in
// binary wire format and in the protobuf JSON mapping. The .pb.h stays inside
// the .cc files: IR headers never include it.
#ifndef TPUOFF_HLO_PROTO_PROTO_IO_H_
#define TPUOFF_HLO_PROTO_PROTO_IO_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/module.h"

namespace tpuoff::hlo {

// Serialized HloModuleProto bytes, with ids, host_program_shape and all the
// rules of HLO_INTEROP.md.
absl::StatusOr<std::string> ModuleToProtoBytes(const HloModule& module);
// The protobuf JSON mapping of the same HloModuleProto.
absl::StatusOr<std::string> ModuleToProtoJson(const HloModule& module);

// Imports a serialized HloModuleProto. Never crashes on malformed bytes:
// errors name the computation/instruction and the field. Not verified.
absl::StatusOr<std::unique_ptr<HloModule>> ModuleFromProtoBytes(absl::string_view bytes);
absl::StatusOr<std::unique_ptr<HloModule>> ModuleFromProtoJson(absl::string_view json);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_PROTO_PROTO_IO_H_
