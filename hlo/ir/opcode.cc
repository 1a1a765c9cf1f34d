#include "hlo/ir/opcode.h"

namespace tpuoff::hlo {
namespace {

struct OpcodeInfo {
  absl::string_view name;
  int arity;
  OpcodeKind kind;
};

constexpr OpcodeInfo kOpcodeInfo[] = {
#define TPUOFF_OPCODE_INFO(enum_name, text, arity, kind) \
  {text, arity, OpcodeKind::kind},
    TPUOFF_HLO_OPCODE_LIST(TPUOFF_OPCODE_INFO)
#undef TPUOFF_OPCODE_INFO
};

}  // namespace

int NumOpcodes() {
  return static_cast<int>(sizeof(kOpcodeInfo) / sizeof(kOpcodeInfo[0]));
}

absl::string_view HloOpcodeString(HloOpcode opcode) {
  return kOpcodeInfo[static_cast<int>(opcode)].name;
}

std::optional<HloOpcode> StringToHloOpcode(absl::string_view name) {
  for (int i = 0; i < NumOpcodes(); ++i) {
    if (kOpcodeInfo[i].name == name) return static_cast<HloOpcode>(i);
  }
  return std::nullopt;
}

int OpcodeArity(HloOpcode opcode) {
  return kOpcodeInfo[static_cast<int>(opcode)].arity;
}

OpcodeKind GetOpcodeKind(HloOpcode opcode) {
  return kOpcodeInfo[static_cast<int>(opcode)].kind;
}

bool IsCollective(HloOpcode opcode) {
  switch (opcode) {
    case HloOpcode::kAllReduce:
    case HloOpcode::kAllGather:
    case HloOpcode::kReduceScatter:
    case HloOpcode::kCollectivePermute:
    case HloOpcode::kAllToAll:
      return true;
    default:
      return false;
  }
}

}  // namespace tpuoff::hlo
